"""The quantization error explorer's computations (lesson 01): one tensor, one grid, and what it costs.

Read in this order:

    the tensor      sample_values (a distribution with outliers), _choose_range (min/max, percentile, by hand)
    the grid        _integer_range, _range_scale_zero_point, _quantize_bits (any bit width from 2 to 8)
    the study       error_study -> ErrorStudy (scale, zero point, levels, clipped values, error)
    for the plots   _error_curve, _thin_levels
    the trade-off   clipping_sweep (MSE against the clipping percentile)

Plain functions over course_lib.affine; course_lib.explorers.widgets binds controls to them and draws.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from .. import affine

DISTRIBUTIONS = ("normal", "uniform", "ReLU activations", "ResNet weights")
RANGE_METHODS = ("min/max", "percentile", "by hand")


def sample_values(
    distribution: str = "normal",
    n: int = 20_000,
    outliers: int = 0,
    outlier_magnitude: float = 10.0,
    seed: int = 0,
    weights: ArrayLike | None = None,
) -> np.ndarray:
    """A float32 tensor to quantize, with `outliers` values replaced by ±outlier_magnitude standard deviations.

    distribution: "normal" (mean 0, std 1), "uniform" (on [-1, 1]), "ReLU activations" (max(0, normal):
        half the values exactly 0, the rest positive), or "ResNet weights" (all of `weights`, flattened;
        n is ignored). Outliers replace values at seeded random positions; their sign is random,
        except for ReLU activations, which are never negative.
    """
    rng = np.random.default_rng(seed)
    if distribution == "normal":
        x = rng.standard_normal(n)
    elif distribution == "uniform":
        x = rng.uniform(-1.0, 1.0, n)
    elif distribution == "ReLU activations":
        x = np.maximum(rng.standard_normal(n), 0.0)
    elif distribution == "ResNet weights":
        if weights is None:
            raise ValueError(
                "distribution='ResNet weights' needs the tensor: pass weights=state_dict['<layer>.weight']."
            )
        x = np.asarray(weights, dtype=np.float64).ravel().copy()
    else:
        raise ValueError(f"distribution must be one of {DISTRIBUTIONS}; got {distribution!r}.")
    x = x.astype(np.float32)
    if outliers < 0 or outliers > x.size:
        raise ValueError(f"outliers must be between 0 and the tensor's size {x.size}; got {outliers}.")
    if outliers:
        where = rng.choice(x.size, size=outliers, replace=False)
        signs = np.ones(outliers) if distribution == "ReLU activations" else rng.choice([-1.0, 1.0], outliers)
        x[where] = (signs * outlier_magnitude * x.std()).astype(np.float32)
    return x


def _choose_range(
    x: ArrayLike,
    method: str = "min/max",
    percentile: float = 99.9,
    low: float | None = None,
    high: float | None = None,
) -> tuple[float, float]:
    """The real range [rmin, rmax] a quantizer will cover.

    "min/max": the data's extremes, so nothing is clipped. "percentile": the central `percentile` % of
    the values, so about (100 - percentile) % are clipped, half at each end. "by hand": [low, high].
    """
    x = np.asarray(x, dtype=np.float32)
    if method == "min/max":
        return float(x.min()), float(x.max())
    if method == "percentile":
        if not 50 < percentile <= 100:
            raise ValueError(f"percentile must be in (50, 100]; got {percentile}. Try 99.9 or 99.99.")
        tail = (100 - percentile) / 2
        return float(np.percentile(x, tail)), float(np.percentile(x, 100 - tail))
    if method == "by hand":
        if low is None or high is None or not low <= high:
            raise ValueError(f"method='by hand' needs low <= high; got low={low}, high={high}.")
        return float(low), float(high)
    raise ValueError(f"method must be one of {RANGE_METHODS}; got {method!r}.")


# Bit widths from 2 to 8. ONNX stores 4- and 8-bit integers, and course_lib.affine does exactly what
# ONNX Runtime does with them; the explorer also offers 2, 3, 5, 6 and 7 bits to show what each bit
# buys. Those use the same formulas on their own range of codes, held in int8/uint8 arrays.


def _integer_range(bits: int, signed: bool, narrow: bool = False) -> tuple[int, int]:
    """The codes (qmin, qmax) of a `bits`-bit integer: (8, signed) -> (-128, 127), (3, unsigned) -> (0, 7).

    narrow drops the most negative code of a signed type, as affine.qrange does (int8 -> (-127, 127)).
    """
    if not (isinstance(bits, int | np.integer) and 2 <= bits <= 8):
        raise ValueError(f"bits must be an integer from 2 to 8; got {bits!r}. Use 8 for int8/uint8.")
    if not signed:
        return 0, 2**bits - 1
    qmin, qmax = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    return (qmin + 1 if narrow else qmin), qmax


def _range_scale_zero_point(
    rmin: float, rmax: float, qmin: int, qmax: int, symmetric: bool
) -> tuple[float, int]:
    """affine.scale_zero_point's formulas for any codes [qmin, qmax]: widen the range to include 0
    (symmetric: to [-m, m]), s = (rmax - rmin) / (qmax - qmin), z = round(qmin - rmin / s) or, for
    symmetric, the middle code. tests/test_explorers.py checks it against affine on int8, uint8, int4."""
    rmin, rmax = min(float(np.float32(rmin)), 0.0), max(float(np.float32(rmax)), 0.0)
    if symmetric:
        rmin, rmax = -max(-rmin, rmax), max(-rmin, rmax)
    scale = (rmax - rmin) / (qmax - qmin)
    if scale < np.finfo(np.float32).tiny:  # a range of width 0: as affine, s = 1, z = 0
        return 1.0, 0
    zero_point = np.round((qmin + qmax) / 2) if symmetric else np.round(qmin - rmin / scale)
    return float(np.float32(scale)), int(zero_point)


def _quantize_bits(x: ArrayLike, scale: float, zero_point: int, bits: int, signed: bool) -> np.ndarray:
    """affine.quantize onto `bits`-bit codes: quantize into int8/uint8, then saturate to the narrower
    type's full range (clipping twice to nested ranges is clipping once to the inner one)."""
    holder = "int8" if signed else "uint8"
    return np.clip(affine.quantize(x, scale, zero_point, holder), *_integer_range(bits, signed))


@dataclass(frozen=True)
class ErrorStudy:
    """One tensor quantized on one grid, and what it cost."""

    x: np.ndarray  # the tensor
    x_hat: np.ndarray  # its reconstruction, dequantize(quantize(x))
    dtype: str  # e.g. "int8", "uint3"
    bits: int
    signed: bool
    symmetric: bool
    narrow: bool  # the range was mapped onto qmin + 1..qmax (the most negative code reserved)
    rmin: float  # the range asked for (before scale_zero_point widens it to include 0)
    rmax: float
    scale: float
    zero_point: int
    lo: float  # the end levels, dequantize(qmin) and dequantize(qmax)
    hi: float
    clip_low: float  # values beyond these are clipped: the end levels ± half a step (affine._clipping_range)
    clip_high: float
    levels: np.ndarray  # every value quantize can produce, dequantize(qmin..qmax), reserved code included
    clipped: np.ndarray  # boolean mask over x: outside [clip_low, clip_high]
    error: affine.ErrorStats

    def describe(self) -> str:
        e = self.error
        scheme = "symmetric" if self.symmetric else "asymmetric"
        levels = (
            f"{len(self.levels) - 1} levels + 1 reserved" if self.narrow else f"{len(self.levels)} levels"
        )
        return (
            f"{self.dtype} {scheme}, {levels}, range [{self.rmin:.4g}, {self.rmax:.4g}] → "
            f"scale {self.scale:.4g}, zero point {self.zero_point} · MSE {e.mse:.3g} · max error "
            f"{e.max_abs_error:.3g} · SQNR {e.sqnr_db:.1f} dB · clipped {e.percent_clipped:.3f}%"
        )


def error_study(
    x: ArrayLike,
    bits: int = 8,
    signed: bool = True,
    symmetric: bool = False,
    method: str = "min/max",
    percentile: float = 99.9,
    low: float | None = None,
    high: float | None = None,
) -> ErrorStudy:
    """Quantize x with `bits`-bit integers over the range `method` chooses, and measure the error.

    Signed symmetric grids reserve the most negative code (the range maps onto int8 -127..127), so +m
    and -m get mirrored codes; for int8 that is ONNX Runtime's choice too. QuantizeLinear still
    saturates to the full type, so the reserved code stays reachable by values below -m.
    """
    x = np.asarray(x, dtype=np.float32)
    rmin, rmax = _choose_range(x, method, percentile, low, high)
    narrow = symmetric and signed
    dtype = f"{'' if signed else 'u'}int{bits}"
    if bits in (4, 8):  # ONNX types: ONNX Runtime's own choice of scale and zero point
        scale, zero_point = affine.scale_zero_point(rmin, rmax, dtype, symmetric=symmetric, narrow=narrow)
        scale, zero_point = float(scale), int(zero_point)
    else:
        scale, zero_point = _range_scale_zero_point(
            rmin, rmax, *_integer_range(bits, signed, narrow), symmetric
        )
    x_hat = affine.dequantize(_quantize_bits(x, scale, zero_point, bits, signed), scale, zero_point)
    qmin, qmax = _integer_range(bits, signed)  # QuantizeLinear saturates to the full range, narrow or not
    levels = affine.dequantize(np.arange(qmin, qmax + 1), scale, zero_point)
    clip_low, clip_high = affine._clipping_range(scale, zero_point, codes=(qmin, qmax))
    clipped = (x < clip_low) | (x > clip_high)
    return ErrorStudy(
        x=x,
        x_hat=x_hat,
        dtype=dtype,
        bits=bits,
        signed=signed,
        symmetric=symmetric,
        narrow=narrow,
        rmin=rmin,
        rmax=rmax,
        scale=scale,
        zero_point=zero_point,
        lo=float(levels[0]),
        hi=float(levels[-1]),
        clip_low=float(clip_low),
        clip_high=float(clip_high),
        levels=levels,
        clipped=clipped,
        error=affine.quantization_error(x, x_hat, clipped),
    )


def _error_curve(study: ErrorStudy, n_points: int = 6_000) -> tuple[np.ndarray, np.ndarray]:
    """The quantizer's error x̂ - x on a fine grid over the data's span and the clipping range:
    a sawtooth of height scale/2 inside the range, a straight ramp in the clipped regions."""
    start = min(float(study.x.min()), study.clip_low)
    stop = max(float(study.x.max()), study.clip_high)
    grid = np.linspace(start, stop, n_points, dtype=np.float32)
    q = _quantize_bits(grid, study.scale, study.zero_point, study.bits, study.signed)
    return grid, affine.dequantize(q, study.scale, study.zero_point) - grid


def _thin_levels(levels: ArrayLike, max_lines: int = 64) -> tuple[np.ndarray, int]:
    """At most `max_lines` of the levels, evenly spaced, for drawing: (levels shown, every k-th shown)."""
    levels = np.asarray(levels)
    every = max(1, -(-len(levels) // max_lines))
    return levels[::every], every


def clipping_sweep(
    x: ArrayLike, percentiles: ArrayLike, bits: int = 8, signed: bool = True, symmetric: bool = True
) -> np.ndarray:
    """MSE of quantizing x with the range clipped at each percentile (100 = min/max): the clipping
    versus resolution trade-off as one curve."""
    return np.array(
        [
            error_study(x, bits, signed, symmetric, "percentile", float(p)).error.mse
            if p < 100
            else error_study(x, bits, signed, symmetric, "min/max").error.mse
            for p in np.asarray(percentiles, dtype=float)
        ]
    )
