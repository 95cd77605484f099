"""What the pages workflow publishes: the static site and the student edition, in one folder.

    python .ci/pages.py build/pages

copies the site that `python -m course_lib site` built (build/site) to the folder, the student
edition (notebooks/student/*.ipynb, exercises without their solutions) to its `student/`, and
writes `student/index.html`: each lesson with a download link and its "Open in Colab" link (from
pyproject.toml's launch address). Run it with the course's environment, after `make site`.
"""

from __future__ import annotations

import argparse
import html
import shutil
import sys
from pathlib import Path

from course_machinery.editions import STUDENT_DIR
from course_machinery.launch import read_launch
from course_machinery.runner import lesson_notebooks

ROOT = Path(__file__).resolve().parent.parent
PAGE = """<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>onnx-quant-course: student edition</title></head>
<body>
<h1>onnx-quant-course: the student edition</h1>
<p>The lessons with the exercises left for you (each has a self-check). Open one in Colab, or
download it and open it in JupyterLab with the course installed. <a href="../index.html">The course
site</a> shows every lesson run, with its outputs.</p>
<ul>
{items}
</ul>
</body>
</html>
"""


def write_pages(out: Path, site: Path = ROOT / "build" / "site", root: Path = ROOT) -> Path:
    """Fill `out` with the site and the student edition; return the student index page."""
    if not (site / "index.html").exists():
        raise SystemExit(f"No site at {site}: run `make site` (python -m course_lib site) first.")
    student = root / "notebooks" / STUDENT_DIR
    lessons = lesson_notebooks(student)
    if not lessons:
        raise SystemExit(f"No student edition in {student}: run `make notebooks` first.")
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(site, out)
    (out / ".nojekyll").touch()  # serve folders that start with "_" (Sphinx's _static) as they are
    target = out / "student"
    target.mkdir(exist_ok=True)
    launch = read_launch(root / "pyproject.toml")
    items = []
    for lesson in lessons:
        shutil.copy2(lesson, target / lesson.name)
        name = html.escape(lesson.name)
        colab = html.escape(launch.colab_url(lesson.name))
        items.append(
            f'<li>{name}: <a href="{name}" download>download</a> · <a href="{colab}">Open in Colab</a></li>'
        )
    index = target / "index.html"
    index.write_text(PAGE.format(items="\n".join(items)), encoding="utf-8")
    return index


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the folder to publish (e.g. build/pages)")
    args = parser.parse_args(argv)
    index = write_pages(args.out)
    print(f"Pages: {args.out} (the site, and the student edition at {index.relative_to(args.out)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
