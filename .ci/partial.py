"""Part of the test suite, for the CI jobs that cannot run all of it: the unit tests and some lessons.

The GitHub workflow's `lowest` job (the lowest supported versions) and `macos-arm64` job run

    python .ci/partial.py --lessons 00 01 02

with the interpreter of the environment under test. In that order it runs `python -m course_lib
prepare`, the unit tests (everything but the notebook and browser tests) and the notebook test of
each lesson named (by number: `03` is 03_static_qdq, `03b` the optional 03b). A lesson number that
names no lesson is an error, not an empty selection. `--collect-only` lists the selected tests
without running anything (tests/test_workflows.py checks the workflow's selection with it).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
UNIT = "not notebook and not browser"  # pytest markers (pyproject.toml's [tool.pytest.ini_options])
NOTEBOOK_TEST = "tests/test_notebooks.py"


def lesson_stems(numbers: list[str], notebooks: Path = ROOT / "notebooks") -> list[str]:
    """The lesson notebooks' names (`00_start_here`, …) for lesson numbers (`00`, `03b`, …)."""
    stems = sorted(p.stem for p in notebooks.glob("[0-9][0-9]*_*.ipynb"))
    chosen = []
    for number in numbers:
        found = [s for s in stems if s.split("_", 1)[0] == number]
        if not found:
            raise SystemExit(
                f"No lesson numbered {number!r} in {notebooks}: expected one of "
                f"{', '.join(s.split('_', 1)[0] for s in stems)}. Fix the --lessons list."
            )
        chosen += found
    return chosen


def lesson_selection(numbers: list[str]) -> list[str]:
    """pytest arguments that select the notebook test of exactly these lessons."""
    expression = " or ".join(f"[{stem}]" for stem in lesson_stems(numbers))
    return [NOTEBOOK_TEST, "-m", "notebook", "-k", expression]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lessons", nargs="*", default=[], metavar="NN", help="lesson numbers to run")
    parser.add_argument("--collect-only", action="store_true", help="list the selected tests, run nothing")
    args = parser.parse_args(argv)
    runs = [["-m", "pytest", "-m", UNIT]]
    if args.lessons:
        runs.append(["-m", "pytest", *lesson_selection(args.lessons)])
    if args.collect_only:
        runs = [[*run, "--collect-only", "-q"] for run in runs]
    else:
        runs.insert(0, ["-m", "course_lib", "prepare", "--no-progress"])
    for run in runs:
        command = [sys.executable, *run]
        print("+", " ".join(command), flush=True)
        code = subprocess.run(command, cwd=ROOT).returncode
        if code != 0:
            return code
    return 0


if __name__ == "__main__":
    sys.exit(main())
