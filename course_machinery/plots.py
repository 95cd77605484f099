"""Speed ratios drawn on a log axis, so that 0.14x and 8x sit as far from 1x as they are.

On a linear axis from 0 to 8, a variant at 0.14x fp32's speed is a sliver beside one at 8x,
though it is as many times slower as the other is faster. `ratio_axis` puts the ratios on a
base-2 log scale, labels the ticks "0.5x", "1x", "2x" and draws the line of equal speed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

EQUAL_SPEED = "as fast as fp32"  # the label of the line at 1x


def ratio_label(ratio: float) -> str:
    """A tick label: 0.125 -> "0.125x", 0.5 -> "0.5x", 1 -> "1x", 8 -> "8x"."""
    return f"{ratio:g}x"


def ratio_axis(ax, ratios: Sequence[float], label: str = EQUAL_SPEED, axis: str = "x") -> None:
    """Put `ratios` on a base-2 log `axis` of `ax`, ticked at powers of two that cover them (and
    1x), with a line at 1x labelled `label`. Ratios must be positive."""
    values = [float(r) for r in ratios if r is not None and math.isfinite(r)]
    if any(v <= 0 for v in values):
        raise ValueError(
            f"A speed ratio must be positive to sit on a log axis; got {min(values)}. "
            "Pass baseline time / candidate time."
        )
    low = math.floor(math.log2(min([*values, 1.0])))
    high = math.ceil(math.log2(max([*values, 1.0])))
    if low == high:
        low, high = low - 1, high + 1
    ticks = [2.0**k for k in range(low, high + 1)]
    scale, limits, set_ticks, line = (
        (ax.set_xscale, ax.set_xlim, ax.set_xticks, ax.axvline)
        if axis == "x"
        else (ax.set_yscale, ax.set_ylim, ax.set_yticks, ax.axhline)
    )
    scale("log", base=2)
    limits(ticks[0] / 1.15, ticks[-1] * 1.15)
    set_ticks(ticks, [ratio_label(t) for t in ticks])
    ax.minorticks_off()
    line(1.0, color="black", lw=1.0, ls="--", label=label)
    ax.legend(loc="best", fontsize=8, framealpha=0.9)
