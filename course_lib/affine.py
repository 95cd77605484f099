"""Affine encoding, the arithmetic behind lesson 01, readable top to bottom.

A quantized tensor stores small integers q and two numbers per tensor (or per channel, or per block):
a scale s and a zero point z. The real value each integer stands for is

    x  ≈  x̂ = s · (q - z),       q = saturate(round_half_to_even(x / s) + z)

Read in this order:

    1. integer ranges       qrange
    2. choosing s and z     scale_zero_point
    3. the encoding itself  round_half_to_even, quantize, dequantize, fake_quantize
    4. what it costs        representable_range, _clipping_range, _clipped_mask, quantization_error
    5. granularity          _block_scale_zero_point, _quantize_blockwise
                            (course_lib.explorers.granularity_study compares the three on one weight)

What the integers become next (their bytes, and the arithmetic kernels do on them) is
course_lib.integers, lesson 01b's module.

Only numpy is used. quantize and dequantize compute in float32 exactly as ONNX Runtime's CPU kernels
for QuantizeLinear and DequantizeLinear do, and scale_zero_point follows
onnxruntime.quantization.quant_utils.compute_scale_zp; tests/test_affine.py checks both bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

# ---------------------------------------------------------------------------------------------------
# 1. Integer ranges
# ---------------------------------------------------------------------------------------------------

#: dtype name -> (bits, signed, numpy type that holds the values). int4/uint4 values live in
#: int8/uint8 arrays one per byte; integers.pack_int4 stores two per byte, as ONNX does.
DTYPES: dict[str, tuple[int, bool, type[np.integer]]] = {
    "int8": (8, True, np.int8),
    "uint8": (8, False, np.uint8),
    "int4": (4, True, np.int8),
    "uint4": (4, False, np.uint8),
    "int16": (16, True, np.int16),
    "uint16": (16, False, np.uint16),
}

#: ONNX Runtime's reduce_range table (quant_utils.ONNX_INT_TYPE_REDUCED_RANGE), copied as is.
#: One bit less range, so that uint8 x int8 products summed in pairs fit int16 on CPUs without VNNI.
#: Note int8's upper end: -64..64 is 129 levels, not the 7-bit two's complement -64..63.
REDUCED_RANGES: dict[str, tuple[int, int]] = {
    "int8": (-64, 64),
    "uint8": (0, 127),
    "int4": (-4, 3),
    "uint4": (0, 7),
    "int16": (-16384, 16384),
    "uint16": (0, 32767),
}


def _check_dtype(dtype: str) -> tuple[int, bool, type[np.integer]]:
    if dtype not in DTYPES:
        allowed = ", ".join(repr(name) for name in DTYPES)
        raise ValueError(
            f"dtype must be one of {allowed}; got {dtype!r}. Pass the integer type's name as a string, "
            "e.g. dtype='int8'."
        )
    return DTYPES[dtype]


def _is_signed(dtype: str) -> bool:
    """True for int8/int4/int16, False for the unsigned types."""
    return _check_dtype(dtype)[1]


def _storage_dtype(dtype: str) -> type[np.integer]:
    """The numpy type that holds one value of `dtype` (int4 values are held in int8, one per byte)."""
    return _check_dtype(dtype)[2]


def qrange(dtype: str, reduce_range: bool = False, narrow: bool = False) -> tuple[int, int]:
    """The integers (qmin, qmax) a `dtype` can hold: int8 -> (-128, 127), uint8 -> (0, 255).

    narrow: drop the most negative code of a signed type, so the range is symmetric around 0
        (int8 -> (-127, 127)). Symmetric weight quantization uses it so +w and -w get mirrored codes.
    reduce_range: ONNX Runtime's 7-bit ranges (uint8 -> (0, 127), int8 -> (-64, 64)); it wins over
        narrow, as in ONNX Runtime. It only changes the range scale_zero_point maps onto:
        QuantizeLinear still saturates to the type's full range.
    """
    bits, signed, _ = _check_dtype(dtype)
    if reduce_range:
        return REDUCED_RANGES[dtype]
    if not signed:
        if narrow:
            raise ValueError(
                f"narrow=True drops the most negative code of a signed type; {dtype!r} is unsigned and has "
                "none to drop. Use narrow=False, or a signed dtype such as 'int8'."
            )
        return 0, 2**bits - 1
    qmin, qmax = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    return (qmin + 1 if narrow else qmin), qmax


# ---------------------------------------------------------------------------------------------------
# 2. Choosing the scale and the zero point
# ---------------------------------------------------------------------------------------------------


def scale_zero_point(
    rmin: ArrayLike,
    rmax: ArrayLike,
    dtype: str = "uint8",
    symmetric: bool = False,
    reduce_range: bool = False,
    narrow: bool | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The scale and zero point that map the real range [rmin, rmax] onto the integers of `dtype`.

    Asymmetric (default): the range is first widened to include 0, so that real zero (padding, ReLU
        outputs) is exactly an integer, then stretched onto [qmin, qmax]:
            s = (rmax - rmin) / (qmax - qmin),   z = round(qmin - rmin / s)
    Symmetric: the range becomes [-m, m] with m = max(|rmin|, |rmax|) and z sits in the middle of the
        integers: 0 for int8, 128 for uint8 (ONNX Runtime's convention).

    rmin, rmax: scalars, or arrays of one value per channel (the result then has their shape).
        They are statistics of a float32 tensor, so they are taken as float32 first.
    narrow: None follows ONNX Runtime: narrow (int8 -127..127) when symmetric and int8/int16.
    A zero-width range (all values 0) gets s = 1, z = 0, as in ONNX Runtime.
    Returns (scale as float32, zero point in the storage type of `dtype`); numpy scalars for scalar input.

    Same arithmetic as onnxruntime.quantization.quant_utils.compute_scale_zp: s in float64, z from that
    float64 s, rounded half to even, then s stored as float32.
    """
    if narrow is None:
        narrow = symmetric and dtype in ("int8", "int16")
    qmin, qmax = qrange(dtype, reduce_range=reduce_range, narrow=narrow)
    rmin, rmax = np.asarray(rmin, dtype=np.float32), np.asarray(rmax, dtype=np.float32)
    if not (np.all(np.isfinite(rmin)) and np.all(np.isfinite(rmax))):
        raise ValueError(
            "rmin and rmax must be finite; found inf or nan. Compute them from finite data "
            "(e.g. np.nanmin / np.nanmax) or clip the tensor first."
        )
    if np.any(rmin > rmax):
        raise ValueError(
            f"rmin must be <= rmax; found rmin={rmin} > rmax={rmax}. Pass the minimum first: "
            "scale_zero_point(x.min(), x.max(), ...)."
        )

    rmin = np.minimum(rmin, 0).astype(np.float64)  # include zero: real 0.0 must be representable
    rmax = np.maximum(rmax, 0).astype(np.float64)
    if symmetric:
        absmax = np.maximum(-rmin, rmax)
        rmin, rmax = -absmax, absmax

    scale = (rmax - rmin) / (qmax - qmin)
    degenerate = scale < np.finfo(np.float32).tiny  # a range of width 0 has no scale; use 1
    safe_scale = np.where(degenerate, 1.0, scale)
    if symmetric:
        zero_point = np.full_like(scale, np.round((qmin + qmax) / 2.0))
    else:
        zero_point = np.round(qmin - rmin / safe_scale)
    zero_point = np.where(degenerate, 0, zero_point).astype(_storage_dtype(dtype))
    return safe_scale.astype(np.float32)[()], zero_point[()]


# ---------------------------------------------------------------------------------------------------
# 3. The encoding: quantize and dequantize
# ---------------------------------------------------------------------------------------------------


def round_half_to_even(x: ArrayLike) -> np.ndarray:
    """Round to the nearest integer; ties go to the even neighbour ("banker's rounding").

    >>> round_half_to_even(np.array([0.5, 1.5, 2.5, -0.5, -1.5]))
    array([ 0.,  2.,  2., -0., -2.])

    Why it matters: rounding ties always up (0.5 -> 1, 1.5 -> 2, 2.5 -> 3) pushes every tie the same
    way, so a tensor full of ties (pixels k/255, exact multiples of s/2) comes back with a bias. Half
    to even sends half of the ties down and half up, so the errors cancel on average. It is what
    QuantizeLinear does in ONNX (and what the CPU's rounding instruction does by default); Python's
    round() agrees, `int(x + 0.5)` does not.
    """
    return np.rint(x)


def _check_scale(scale: np.ndarray) -> None:
    if not np.all(np.isfinite(scale)) or np.any(scale <= 0):
        raise ValueError(
            f"scale must be positive and finite; found {scale}. A scale of 0 comes from a range of width "
            "0: compute scale and zero point with scale_zero_point(rmin, rmax, ...), which uses 1.0 then."
        )


def _per_axis(param: ArrayLike, name: str, ndim: int, axis: int | None, length: int | None) -> np.ndarray:
    """`param` reshaped to broadcast against a tensor: a scalar, or one value per slice along `axis`."""
    param = np.asarray(param)
    if axis is None:
        if param.size != 1:
            raise ValueError(
                f"{name} has shape {param.shape} but axis is None; per-tensor quantization takes a single "
                f"{name}. For one {name} per channel pass axis=<channel axis>, e.g. axis=0 for a weight."
            )
        return param.reshape(())
    if param.ndim == 0:
        return param
    if param.shape != (length,):
        raise ValueError(
            f"{name} must be a scalar or have shape ({length},), one value per slice along axis {axis}; "
            f"found shape {param.shape}. Compute it per channel, e.g. "
            f"scale_zero_point(x.min(axis=others), x.max(axis=others))."
        )
    shape = [1] * ndim
    shape[axis] = length
    return param.reshape(shape)


def _normalize_axis(axis: int | None, ndim: int) -> int | None:
    if axis is None:
        return None
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis must be in [{-ndim}, {ndim - 1}] for a {ndim}-D tensor; got axis={axis}.")
    return axis % ndim


def _saturate(q: np.ndarray, dtype: str) -> np.ndarray:
    """Clip to the full range of `dtype` (out-of-range values become qmin or qmax) and store as integers.

    NaN has no integer; ONNX Runtime's CPU kernels send it to qmin, and so does this.
    """
    qmin, qmax = qrange(dtype)
    return np.clip(np.where(np.isnan(q), qmin, q), qmin, qmax).astype(_storage_dtype(dtype))


def _quantize(x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray, dtype: str) -> np.ndarray:
    """The formula itself, for float32 x and broadcastable scale and zero point."""
    with np.errstate(over="ignore"):  # a huge x / scale overflows to inf, which saturates like any other
        return _saturate(
            round_half_to_even(x / scale.astype(np.float32)) + zero_point.astype(np.float32), dtype
        )


def quantize(
    x: ArrayLike, scale: ArrayLike, zero_point: ArrayLike, dtype: str = "uint8", axis: int | None = None
) -> np.ndarray:
    """ONNX QuantizeLinear: q = saturate(round_half_to_even(x / scale) + zero_point).

    Computed in float32 like ONNX Runtime: x / scale is a float32 division (not x * (1/scale), which
    differs in the last bit for some x and can flip a rounding), then rounding, then clipping to the
    full range of `dtype`.
    axis: None for one scale and zero point per tensor; an axis for one per slice along it (scale and
        zero point of shape (x.shape[axis],)), e.g. axis=0 for the output channels of a weight.
    Returns an array of _storage_dtype(dtype): int8/uint8 (int4/uint4 values are held one per byte).
    """
    _check_dtype(dtype)
    x = np.asarray(x, dtype=np.float32)
    axis = _normalize_axis(axis, x.ndim)
    length = None if axis is None else x.shape[axis]
    scale = _per_axis(scale, "scale", x.ndim, axis, length).astype(np.float32)
    zero_point = _per_axis(zero_point, "zero_point", x.ndim, axis, length)
    _check_scale(scale)
    qmin, qmax = qrange(dtype)
    if np.any(zero_point != np.round(zero_point)) or np.any(zero_point < qmin) or np.any(zero_point > qmax):
        raise ValueError(
            f"zero_point must be an integer in [{qmin}, {qmax}] for dtype={dtype!r}; found {zero_point}. "
            "Compute it with scale_zero_point(rmin, rmax, dtype) for the same dtype."
        )
    return _quantize(x, scale, zero_point, dtype)


def dequantize(q: ArrayLike, scale: ArrayLike, zero_point: ArrayLike, axis: int | None = None) -> np.ndarray:
    """ONNX DequantizeLinear: x̂ = (q - zero_point) * scale, as float32.

    Like ONNX Runtime, the integer difference q - zero_point is exact, converted to float32 and
    multiplied by the float32 scale: one rounding in all. Same `axis` convention as quantize.
    """
    q = np.asarray(q)
    if not np.issubdtype(q.dtype, np.integer):
        raise ValueError(
            f"q must be an integer array (the output of quantize); found dtype {q.dtype}. "
            "Quantize it first: q = quantize(x, scale, zero_point, dtype)."
        )
    axis = _normalize_axis(axis, q.ndim)
    length = None if axis is None else q.shape[axis]
    scale = _per_axis(scale, "scale", q.ndim, axis, length).astype(np.float32)
    zero_point = _per_axis(zero_point, "zero_point", q.ndim, axis, length)
    _check_scale(scale)
    return (q.astype(np.int32) - zero_point.astype(np.int32)).astype(np.float32) * scale


def fake_quantize(
    x: ArrayLike, scale: ArrayLike, zero_point: ArrayLike, dtype: str = "uint8", axis: int | None = None
) -> np.ndarray:
    """quantize then dequantize: what a QuantizeLinear -> DequantizeLinear pair does to a tensor."""
    return dequantize(quantize(x, scale, zero_point, dtype, axis), scale, zero_point, axis)


# ---------------------------------------------------------------------------------------------------
# 4. What it costs: rounding error and clipping
# ---------------------------------------------------------------------------------------------------


def representable_range(
    scale: ArrayLike, zero_point: ArrayLike, dtype: str = "uint8"
) -> tuple[np.ndarray, np.ndarray]:
    """The end levels [dequantize(qmin), dequantize(qmax)]: every code decodes to a value in here.

    Inside it the error is at most scale / 2 (rounding). Half a step beyond each end a value still
    rounds to the end level; further out it is clipped (see _clipping_range) and the error grows
    without bound. Per-channel scale and zero point give one interval per channel.
    """
    qmin, qmax = qrange(dtype)
    scale = np.asarray(scale, dtype=np.float32)
    _check_scale(scale)
    zero_point = np.asarray(zero_point).astype(np.int32)
    lo = (qmin - zero_point).astype(np.float32) * scale
    hi = (qmax - zero_point).astype(np.float32) * scale
    return lo[()], hi[()]


def _clipping_range(
    scale: ArrayLike,
    zero_point: ArrayLike,
    dtype: str = "uint8",
    codes: tuple[int, int] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The real values quantize stores without clipping: [(qmin - z - 1/2)·s, (qmax - z + 1/2)·s].

    What "clipped" means throughout the course: outside this range, more than half a step beyond
    the end levels. Up to half a step beyond, a value still rounds to the end level with a rounding
    error (at most s/2); further out, QuantizeLinear saturates its code to qmin or qmax and the
    error grows with the distance. The half step matters where a range's end is crowded: the zero
    point is rounded to an integer, so a calibrated minimum (an image's background, most of its
    pixels) may lie a fraction of a step beyond the end level, and it is not clipped. A value
    exactly on an end (a tie, error s/2 either way) may fall on either side by float rounding.

    codes: (qmin, qmax) for integers that `dtype` does not name (e.g. 3-bit codes); dtype is then
        not used. Computed in float64, where (q - z ± 1/2)·s is exact for a float32 scale.
    """
    qmin, qmax = qrange(dtype) if codes is None else codes
    scale = np.asarray(scale, dtype=np.float32)
    _check_scale(scale)
    zero_point = np.asarray(zero_point).astype(np.float64)
    low = (qmin - zero_point - 0.5) * scale.astype(np.float64)
    high = (qmax - zero_point + 0.5) * scale.astype(np.float64)
    return low[()], high[()]


def _clipped_mask(
    x: ArrayLike, scale: ArrayLike, zero_point: ArrayLike, dtype: str = "uint8", axis: int | None = None
) -> np.ndarray:
    """True where x is clipped: outside _clipping_range, where saturation, not rounding, sets the error."""
    x = np.asarray(x, dtype=np.float32)
    axis = _normalize_axis(axis, x.ndim)
    length = None if axis is None else x.shape[axis]
    low, high = _clipping_range(scale, zero_point, dtype)
    low = _per_axis(low, "scale", x.ndim, axis, length)
    high = _per_axis(high, "scale", x.ndim, axis, length)
    return (x < low) | (x > high)


@dataclass(frozen=True)
class ErrorStats:
    """How far x̂ is from x: a measurement (not an exception). sqnr_db: signal-to-quantization-noise ratio, higher is better
    (each extra bit adds about 6 dB). percent_clipped is None when no clipped mask was given."""

    mse: float
    max_abs_error: float
    sqnr_db: float
    percent_clipped: float | None


def quantization_error(x: ArrayLike, x_hat: ArrayLike, clipped: ArrayLike | None = None) -> ErrorStats:
    """Mean squared error, worst error, SQNR = 10·log10(mean(x²) / mean((x - x̂)²)) and, given
    clipped = _clipped_mask(x, scale, zero_point, dtype), the percentage of values that were clipped."""
    x = np.asarray(x, dtype=np.float64)
    x_hat = np.asarray(x_hat, dtype=np.float64)
    if x.shape != x_hat.shape:
        raise ValueError(
            f"x and x_hat must have the same shape; found {x.shape} and {x_hat.shape}. "
            "Pass the tensor and its own reconstruction, e.g. x_hat = fake_quantize(x, ...)."
        )
    noise = x - x_hat
    mse = float(np.mean(noise**2))
    signal_power = float(np.mean(x**2))
    if mse == 0:
        sqnr_db = float("inf")
    elif signal_power == 0:
        sqnr_db = float("-inf")
    else:
        sqnr_db = float(10 * np.log10(signal_power / mse))
    percent_clipped = None if clipped is None else float(100 * np.mean(clipped))
    return ErrorStats(mse, float(np.max(np.abs(noise))), sqnr_db, percent_clipped)


# ---------------------------------------------------------------------------------------------------
# 5. Granularity: one scale per tensor, per channel, or per block
# ---------------------------------------------------------------------------------------------------


def _blocks(w: np.ndarray, block_size: int, axis: int) -> np.ndarray:
    """w with `axis` moved last and cut into blocks: shape (..., n_blocks, block_size), zero-padded.

    Padding with zeros is harmless: every range is widened to include 0 anyway.
    """
    if not (isinstance(block_size, int | np.integer) and block_size >= 1):
        raise ValueError(
            f"block_size must be a positive integer; got {block_size!r}. Typical values are 32, 64 or 128."
        )
    moved = np.moveaxis(w, axis, -1)
    n = moved.shape[-1]
    n_blocks = -(-n // block_size)
    pad = [(0, 0)] * (moved.ndim - 1) + [(0, n_blocks * block_size - n)]
    return np.pad(moved, pad).reshape(*moved.shape[:-1], n_blocks, block_size)


def _block_scale_zero_point(
    w: ArrayLike, block_size: int, dtype: str = "int8", symmetric: bool = True, axis: int = -1
) -> tuple[np.ndarray, np.ndarray]:
    """One scale and zero point per block of `block_size` consecutive values along `axis`.

    Returned in ONNX's layout for blocked QuantizeLinear/DequantizeLinear (opset 21): the shape of w
    with shape[axis] = ceil(w.shape[axis] / block_size).
    """
    w = np.asarray(w, dtype=np.float32)
    axis = _normalize_axis(axis, w.ndim)
    blocks = _blocks(w, block_size, axis)
    scale, zero_point = scale_zero_point(blocks.min(axis=-1), blocks.max(axis=-1), dtype, symmetric)
    return np.moveaxis(np.asarray(scale), -1, axis), np.moveaxis(np.asarray(zero_point), -1, axis)


def _quantize_blockwise(
    w: ArrayLike, block_size: int, dtype: str = "int8", symmetric: bool = True, axis: int = -1
) -> tuple[np.ndarray, int]:
    """Quantize w block by block and return (reconstruction x̂, number of scale/zero-point values stored).

    Smaller blocks follow the data more closely (less error) but store more metadata: that trade-off
    is the point. Zero points are counted unless they are all 0 (symmetric signed), since ONNX lets
    a graph omit a zero point that is 0.
    """
    w = np.asarray(w, dtype=np.float32)
    axis = _normalize_axis(axis, w.ndim)
    scale, zero_point = _block_scale_zero_point(w, block_size, dtype, symmetric, axis)
    blocks = _blocks(w, block_size, axis)
    s = np.moveaxis(scale, axis, -1)[..., None]  # back to the (..., n_blocks, 1) layout of the blocks
    z = np.moveaxis(zero_point, axis, -1)[..., None]
    x_hat = (_quantize(blocks, s, z, dtype).astype(np.int32) - z.astype(np.int32)).astype(np.float32) * s
    n = w.shape[axis]
    x_hat = x_hat.reshape(*x_hat.shape[:-2], -1)[..., :n]  # drop the padding
    stores_zero_point = not (symmetric and _is_signed(dtype))
    return np.moveaxis(x_hat, -1, axis), int(scale.size * (2 if stores_zero_point else 1))
