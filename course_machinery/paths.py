"""Where the course's own files are, for the tooling: the repository root and the build folder.

In a source checkout (or an unpacked workshop bundle) the root is the folder above course_lib/,
the one with pyproject.toml and notebooks/. After a pip install (Colab) that folder is
site-packages, which is no place for notebooks or build outputs: the root is then the working
directory, so `python -m course_lib run` looks for notebooks/ and writes build/ where it is run.
"""

from __future__ import annotations

from pathlib import Path

from course_lib import data


def repository_root() -> Path:
    """The checkout course_lib runs from; after a pip install, the working directory."""
    return data.source_checkout() or Path.cwd()


ROOT = repository_root()
BUILD = ROOT / "build"  # every command's outputs: executed notebooks, report, bench, site, bundle
