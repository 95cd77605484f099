"""Everything generated from the lessons' jupytext sources, in one step.

The sources in `notebooks/src/` are what authors edit. From them come, in this order:

1. the reference blocks in their markdown, from the stored reference runs (`recording`);
2. the badges and the Colab setup cell of each source, the `.ipynb` of each source (the instructor
   edition) and the README's lesson links (`launch`);
3. the committed student edition in `notebooks/student/` (`editions`).

`python -m course_lib notebooks` (and `make notebooks`) runs all three; `--check` lists what is out of
date, which the tests also do.
"""

from __future__ import annotations

from pathlib import Path

from . import editions, launch, recording
from .paths import ROOT


def regenerate(root: Path = ROOT, dry_run: bool = False, only: set[str] | None = None) -> list[Path]:
    """Rewrite what is out of date (with `dry_run`, only list it), for every lesson or those `only`
    names ({"03", "03b"}); return those files."""
    changed = recording.write(root, dry_run=dry_run, only=only)
    changed += [p for p in launch.write(root, dry_run=dry_run, only=only) if p not in changed]
    changed += editions.sync_student_edition(root / "notebooks", dry_run=dry_run, only=only)
    return changed
