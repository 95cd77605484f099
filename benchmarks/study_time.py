"""How long each lesson takes to study: its words and code lines, at a reading pace.

    python benchmarks/study_time.py [--words-per-minute 100] [--lines-per-minute 6]

Issue 34 set the pace: 100 words of prose or 6 lines of code a minute, before running anything
and before the exercises (the sections from "## Exercises" on, the bookkeeping cells after them,
and the Colab setup cell are left out). The generated reference blocks are counted, since a learner
reads them. A core lesson should take at most 75 minutes at that pace; the optional deep dives
(03b, 05b, 06b) take what their topics need.

Prints one row per lesson: words, code lines, minutes, and whether a core lesson is over 75.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import jupytext  # noqa: E402

CORE_LIMIT_MINUTES = 75
OPTIONAL = re.compile(r"^\d\d[a-z]_")  # 03b_, 05b_, ...: the optional deep dives
SETUP = "Setup for Colab"
STOP = re.compile(r"^#+ (Exercises|Save this lesson's figures)", re.MULTILINE)


def study(source: Path) -> tuple[int, int]:
    """(words of markdown, lines of code) a learner reads before the exercises."""
    words = lines = 0
    for cell in jupytext.read(source).cells:
        text = cell.source
        if cell.cell_type == "markdown":
            stop = STOP.search(text)
            if stop:
                words += len(re.sub(r"<!--.*?-->", "", text[: stop.start()], flags=re.S).split())
                break
            words += len(re.sub(r"<!--.*?-->", "", text, flags=re.S).split())
        elif cell.cell_type == "code" and SETUP not in text:
            lines += sum(1 for line in text.splitlines() if line.strip() and not line.strip().startswith("#"))
    return words, lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--words-per-minute", type=float, default=100)
    parser.add_argument("--lines-per-minute", type=float, default=6)
    args = parser.parse_args()
    total = 0.0
    print(f"{'lesson':<36} {'words':>7} {'code lines':>10} {'minutes':>8}")
    for source in sorted((ROOT / "notebooks" / "src").glob("[0-9][0-9]*_*.py")):
        words, lines = study(source)
        minutes = words / args.words_per_minute + lines / args.lines_per_minute
        total += minutes
        core = not OPTIONAL.match(source.name)
        mark = "  over the core limit" if core and minutes > CORE_LIMIT_MINUTES else ""
        mark = mark or ("" if core else "  (optional)")
        print(f"{source.stem:<36} {words:>7,} {lines:>10,} {minutes:>8.0f}{mark}")
    print(f"{'all lessons':<36} {'':>7} {'':>10} {total:>8.0f}  ({total / 60:.1f} h)")


if __name__ == "__main__":
    main()
