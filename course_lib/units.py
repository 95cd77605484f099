"""Quantities in words for messages and tables: one way to write each kind everywhere.

    format_duration   '0.4 s', '42 s', '8 min 42 s'
    format_ratio      a speed ratio with its interval: '1.34x (1.29–1.40)'
    format_bytes      a size (a number of bytes, or a file's) in decimal megabytes: '44.7 MB'
    megabytes         the same size as a number, for figures and sums: 44.7

The course's megabyte is decimal (10⁶ bytes, as file managers count), never 2²⁰. A speed ratio
measured by `measure.compare_latency` prints itself (`str(comparison)`, by `format_ratio`).

Imports nothing from the course, so any module (PyTorch-free or not) can use it.
"""

from __future__ import annotations

import numbers
import os

MB = 1_000_000  # bytes in the course's megabyte


def format_duration(seconds: float) -> str:
    """A duration as people read it: '0.4 s' and '7.3 s' below 10 s, '42 s' below a minute,
    '8 min 42 s' above (whole seconds, where a tenth no longer matters)."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    minutes, rest = divmod(whole, 60)
    return f"{minutes} min {rest} s" if minutes else f"{rest} s"


def format_ratio(ratio: float, low: float, high: float) -> str:
    """A ratio of medians with its interval, the one way the course prints a speed-up: '1.34x (1.29–1.40)'."""
    return f"{ratio:.2f}x ({low:.2f}–{high:.2f})"


def megabytes(size: float | str | os.PathLike) -> float:
    """A size in decimal megabytes: `size` is a number of bytes, or a file (then its size on disk).

    For figures, sums and comparisons; to print a size, `format_bytes`."""
    if isinstance(size, str | os.PathLike):
        return os.stat(size).st_size / MB
    if isinstance(size, bool) or not isinstance(size, numbers.Real):
        raise TypeError(
            f"megabytes() takes a number of bytes or a file's path; got {type(size).__name__} {size!r}. "
            "Pass the bytes (e.g. path.stat().st_size, a memory reading) or the file's path."
        )
    return size / MB


def format_bytes(size: float | str | os.PathLike, digits: int = 1, *, unit: bool = True) -> str:
    """A size in decimal megabytes, as the course prints every size: '44.7 MB', '1,234.5 MB'.

    `size` is a number of bytes, or a file (its size on disk); `digits` after the point;
    `unit=False` leaves out ' MB', for a table column whose heading names the unit."""
    text = f"{megabytes(size):,.{digits}f}"
    return f"{text} MB" if unit else text
