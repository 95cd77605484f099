"""What the calibration explorer reports (lesson 03): each calibration method's range for one
activation tensor, and the share of the tensor's real values outside it.

Plain functions; course_lib.explorers.widgets binds controls to them and draws.
"""

from __future__ import annotations

import numpy as np


def _clipped_shares(values: np.ndarray, ranges: dict[str, tuple[float, float]]) -> dict[str, float]:
    """{method: the fraction of `values` outside its (low, high)}.

    The method's range itself, before a scale and zero point are chosen from it. A grid built on the
    range covers at least the range (its affine._clipping_range reaches up to a step beyond), so
    this is an upper bound on the share that grid clips.
    """
    from ..calibration import clipped_fraction

    return {method: clipped_fraction(values, low, high) for method, (low, high) in ranges.items()}


def _describe_ranges(name: str, values: np.ndarray, ranges: dict[str, tuple[float, float]]) -> str:
    """One line per method: its range and the share of `values` it would clip."""
    shares = _clipped_shares(values, ranges)
    head = f"<b>{name}</b>: {values.size:,} values in [{values.min():.3g}, {values.max():.3g}]"
    parts = [
        f"{method} [{low:.3g}, {high:.3g}] clips {shares[method]:.3%}"
        for method, (low, high) in ranges.items()
    ]
    return head + "; " + "; ".join(parts)
