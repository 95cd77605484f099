"""Quantities in words for messages and tables: one way to write a duration everywhere.

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
