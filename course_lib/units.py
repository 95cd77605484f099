"""Quantities in words for messages and tables: one way to write each kind everywhere.

    format_duration   '0.4 s', '42 s', '8 min 42 s'
    format_ratio      a speed ratio with its interval: '1.34x (1.29–1.40)'
    format_bytes      a size in decimal megabytes, as the lessons print it: '44.7 MB'


Imports nothing from the course, so any module (PyTorch-free or not) can use it.
"""

from __future__ import annotations


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


def format_bytes(n: float, digits: int = 1) -> str:
    """A size in decimal megabytes (10⁶ bytes, as file managers and the lessons count them): '44.7 MB'."""
    return f"{n / 1e6:.{digits}f} MB"
