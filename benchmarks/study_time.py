"""How long each lesson takes to study, and how much of it is the course checking itself.

    python benchmarks/study_time.py [--words-per-minute 100] [--lines-per-minute 6]

Study time is counted on the whole student notebook (notebooks/student/), as a learner meets it:
markdown words / 100 + non-blank code lines / 6, every cell included (the Colab setup cell, the
check cells, the reference lines, the exercises). A core lesson (00-07) should take at most 60
minutes at that pace, an optional deep dive (01b, 02b, ...) at most 75.

Self-verification is the share of the notebook's lines that are the course checking itself rather
than teaching: the code lines of the check cells (`cl.verify`, `cl.end_lesson`) and the lines of
the generated reference blocks in the markdown (statements that call `cl.claim` or
`cl.save_figures`, in lessons still written that way, count too), over all its non-blank lines. It should stay
under 10 %.

Prints one row per lesson: words, code lines, minutes, self-verification share, and a mark where
a limit is passed.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STUDENT = ROOT / "notebooks" / "student"
CORE_LIMIT, OPTIONAL_LIMIT, CHECK_SHARE_LIMIT = 60, 75, 0.10
OPTIONAL = re.compile(r"^\d\d[a-z]_")  # 01b_, 03b_, ...: the optional deep dives
CHECK_CALL = re.compile(r"\bcl\.(verify|end_lesson|claim|save_figures)\(")
REFERENCE = re.compile(r"<!-- reference(?:-table|-order|-claim)?:.*?<!-- /reference -->", re.S)


def study(notebook: Path) -> dict:
    """Words, code lines and self-verification lines of one student notebook."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    words = code = lines = checking = 0
    for cell in cells:
        text = "".join(cell["source"])
        nonblank = [line for line in text.splitlines() if line.strip()]
        lines += len(nonblank)
        if cell["cell_type"] == "markdown":
            words += len(text.split())
            checking += sum(
                len([x for x in m.group().splitlines() if x.strip()]) for m in REFERENCE.finditer(text)
            )
        elif cell["cell_type"] == "code":
            code += len(nonblank)
            checking += _checking_lines(text)
    return {"words": words, "code": code, "lines": lines, "checking": checking}


def _checking_lines(code: str) -> int:
    """Non-blank lines of the top-level statements of a code cell that check claims or save figures."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return 0
    lines = code.splitlines()
    found = 0
    for stmt in tree.body:
        text = "\n".join(lines[stmt.lineno - 1 : stmt.end_lineno])
        if CHECK_CALL.search(text):
            found += sum(1 for line in text.splitlines() if line.strip())
    return found


def minutes(found: dict, words_per_minute: float = 100, lines_per_minute: float = 6) -> float:
    return found["words"] / words_per_minute + found["code"] / lines_per_minute


def limit_of(notebook: Path) -> int:
    return OPTIONAL_LIMIT if OPTIONAL.match(notebook.name) else CORE_LIMIT


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--words-per-minute", type=float, default=100)
    parser.add_argument("--lines-per-minute", type=float, default=6)
    args = parser.parse_args()
    total = 0.0
    print(f"{'lesson':<36} {'words':>7} {'code':>6} {'minutes':>8} {'limit':>6} {'checking':>9}")
    for notebook in sorted(STUDENT.glob("[0-9][0-9]*_*.ipynb")):
        found = study(notebook)
        spent = minutes(found, args.words_per_minute, args.lines_per_minute)
        total += spent
        share = found["checking"] / found["lines"] if found["lines"] else 0.0
        marks = [
            m
            for m, bad in (
                ("over time", spent > limit_of(notebook)),
                ("checks over 10 %", share >= CHECK_SHARE_LIMIT),
            )
            if bad
        ]
        print(
            f"{notebook.stem:<36} {found['words']:>7,} {found['code']:>6,} {spent:>8.0f} {limit_of(notebook):>6} "
            f"{share:>8.1%}  {', '.join(marks)}"
        )
    print(f"{'all lessons':<36} {'':>7} {'':>6} {total:>8.0f}  ({total / 60:.1f} h)")


if __name__ == "__main__":
    main()
