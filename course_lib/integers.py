"""The integers after encoding, lesson 01b's module: their bytes, and the arithmetic on them.

course_lib.affine turns real numbers into integer codes. This module follows the codes further:

    1. int4 storage         pack_int4, unpack_int4 (two 4-bit codes per byte, as ONNX stores them)
    2. integer arithmetic   integer_matmul (a matrix product on the codes, as QLinearMatMul does it)
    3. how a CPU does it    vpmaddubsw_matmul (AVX2's 16-bit pair sums, which can saturate), im2col
                            (a convolution laid out as the matrix product integer kernels run)

Only numpy is used. integer_matmul computes in float32 exactly as ONNX Runtime's QLinearMatMul does;
tests/test_affine.py checks it bit for bit.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from .affine import _check_scale, _saturate, round_half_to_even

# ---------------------------------------------------------------------------------------------------
# 1. int4 storage: two values per byte
# ---------------------------------------------------------------------------------------------------


def pack_int4(q: ArrayLike) -> np.ndarray:
    """Store 4-bit values two per byte, as ONNX's INT4/UINT4 tensors do: element 2i in the low nibble,
    element 2i+1 in the high nibble. An odd count leaves the last high nibble 0.

    q: int4 values (-8..7) or uint4 values (0..15), any shape; it is flattened. Returns uint8 bytes:
    1,000,000 values take 500,000 bytes, where an int8 array holding them takes 1,000,000.
    """
    q = np.asarray(q).ravel()
    if q.size and not np.issubdtype(q.dtype, np.integer):
        raise ValueError(
            f"pack_int4 expects integers; found dtype {q.dtype}. Quantize with dtype='int4' first."
        )
    lo, hi = (int(q.min()), int(q.max())) if q.size else (0, 0)
    if not (lo >= -8 and hi <= 7 or lo >= 0 and hi <= 15):
        raise ValueError(
            f"pack_int4 expects int4 values in [-8, 7] or uint4 values in [0, 15]; found values in "
            f"[{lo}, {hi}]. Quantize with dtype='int4' or 'uint4' first."
        )
    nibbles = (q.astype(np.int16) & 0x0F).astype(np.uint8)  # two's complement: -1 -> 0b1111
    if nibbles.size % 2:
        nibbles = np.append(nibbles, np.uint8(0))
    return nibbles[0::2] | (nibbles[1::2] << 4)


def unpack_int4(packed: ArrayLike, n: int, signed: bool = True) -> np.ndarray:
    """The first n 4-bit values in `packed` (from pack_int4), as int8 (signed) or uint8 (unsigned)."""
    packed = np.asarray(packed, dtype=np.uint8).ravel()
    if not 0 <= n <= 2 * packed.size:
        raise ValueError(
            f"n must be between 0 and 2 * packed.size = {2 * packed.size}; got n={n}. Pass the number "
            "of values that were packed, e.g. unpack_int4(packed, q.size)."
        )
    nibbles = np.empty(2 * packed.size, dtype=np.uint8)
    nibbles[0::2] = packed & 0x0F
    nibbles[1::2] = packed >> 4
    nibbles = nibbles[:n]
    if not signed:
        return nibbles
    return (nibbles.astype(np.int8) ^ 8) - 8  # sign-extend: 8..15 -> -8..-1


# ---------------------------------------------------------------------------------------------------
# 2. Integer arithmetic: a matrix product without floats
# ---------------------------------------------------------------------------------------------------


def integer_matmul(
    qa: ArrayLike,
    a_scale: ArrayLike,
    a_zero_point: ArrayLike,
    qb: ArrayLike,
    b_scale: ArrayLike,
    b_zero_point: ArrayLike,
    out_scale: ArrayLike,
    out_zero_point: ArrayLike,
    out_dtype: str = "uint8",
) -> tuple[np.ndarray, np.ndarray]:
    """The quantized product of A (M x K) and B (K x N), as ONNX's QLinearMatMul computes it.

    Since a = sa·(qa - za) and b = sb·(qb - zb), a @ b = sa·sb · [(qa - za) @ (qb - zb)]:
      1. subtract the zero points and multiply-accumulate the integers in int32 (the accumulator),
      2. rescale by the one float multiplier sa·sb/s_out (float32, as ONNX Runtime computes it),
      3. round half to even, add the output zero point, saturate to out_dtype.
    b_scale and b_zero_point may hold one value per output column (shape (N,)).
    Returns (quantized output, int32 accumulator). The accumulator is exact while
    K·max|qa - za|·max|qb - zb| < 2**31, e.g. K < 33,025 for uint8 x uint8.
    """
    qa, qb = np.asarray(qa), np.asarray(qb)
    if not (np.issubdtype(qa.dtype, np.integer) and np.issubdtype(qb.dtype, np.integer)):
        raise ValueError(
            f"qa and qb must be integer arrays; found {qa.dtype} and {qb.dtype}. Quantize them first."
        )
    if qa.ndim != 2 or qb.ndim != 2 or qa.shape[1] != qb.shape[0]:
        raise ValueError(
            f"integer_matmul multiplies an (M, K) by a (K, N) matrix; found {qa.shape} and {qb.shape}."
        )
    a_scale, b_scale, out_scale = (np.asarray(s, dtype=np.float32) for s in (a_scale, b_scale, out_scale))
    for s in (a_scale, b_scale, out_scale):
        _check_scale(s)
    accumulator = (qa.astype(np.int32) - np.int32(a_zero_point)) @ (
        qb.astype(np.int32) - np.asarray(b_zero_point).astype(np.int32)
    )
    multiplier = a_scale * b_scale / out_scale  # float32, one per output column if b is per-column
    out = round_half_to_even(accumulator.astype(np.float32) * multiplier) + np.float32(out_zero_point)
    return _saturate(out, out_dtype), accumulator


# ---------------------------------------------------------------------------------------------------
# 3. How a CPU does it: AVX2's pair sums, and a convolution as a matrix product
# ---------------------------------------------------------------------------------------------------
INT16_MIN, INT16_MAX = -32768, 32767


def vpmaddubsw_matmul(qa: ArrayLike, qb: ArrayLike, chunk: int = 64) -> tuple[np.ndarray, int, int]:
    """A uint8 (M x K) by int8 (K x N) product computed the way AVX2's VPMADDUBSW does it.

    VPMADDUBSW multiplies neighbouring pairs u8·s8 and adds each pair into a **16-bit** sum,
    saturating to [-32768, 32767]; VPMADDWD then adds those into int32. Two products can reach
    2·255·127 = 64,770, which does not fit: such a pair saturates and the result is wrong. With
    7-bit weights (|w| <= 64, ONNX Runtime's reduce_range) a pair is at most 2·255·64 = 32,640.
    CPUs with VNNI (or ARM's dot product) accumulate into 32 bits directly and never saturate.

    A simulation in numpy, for the lesson: returns (int32 result, saturated pairs, total pairs).
    """
    qa, qb = np.asarray(qa), np.asarray(qb)
    if qa.dtype != np.uint8 or qb.dtype != np.int8:
        raise ValueError(f"VPMADDUBSW multiplies uint8 by int8; found {qa.dtype} and {qb.dtype}.")
    if qa.ndim != 2 or qb.ndim != 2 or qa.shape[1] != qb.shape[0]:
        raise ValueError(f"Expected an (M, K) and a (K, N) matrix; found {qa.shape} and {qb.shape}.")
    m, k = qa.shape
    if k % 2:  # pad K to pairs with a zero product
        qa = np.concatenate([qa, np.zeros((m, 1), np.uint8)], axis=1)
        qb = np.concatenate([qb, np.zeros((1, qb.shape[1]), np.int8)], axis=0)
    a = qa.astype(np.int32).reshape(m, -1, 2)  # (M, K/2, 2)
    b = qb.astype(np.int32).reshape(-1, 2, qb.shape[1])  # (K/2, 2, N)
    out = np.empty((m, qb.shape[1]), np.int32)
    saturated = 0
    for start in range(0, qb.shape[1], chunk):
        pairs = np.einsum("mkt,ktn->mkn", a, b[:, :, start : start + chunk])  # exact pair sums
        clipped = np.clip(pairs, INT16_MIN, INT16_MAX)
        saturated += int((clipped != pairs).sum())
        out[:, start : start + chunk] = clipped.sum(axis=1)
    return out, saturated, m * a.shape[1] * qb.shape[1]


def im2col(x: ArrayLike, kernel: tuple[int, int], strides=(1, 1), pads=(0, 0, 0, 0)) -> np.ndarray:
    """The patches a 2-D convolution multiplies, one row per output position: (N·OH·OW, C·kh·kw).

    x: (N, C, H, W); pads as ONNX orders them (top, left, bottom, right). A convolution is then
    `im2col(x, ...) @ weight.reshape(out_channels, -1).T`, which is how integer kernels see it.
    """
    x = np.asarray(x)
    if x.ndim != 4:
        raise ValueError(f"im2col expects (N, C, H, W); found shape {x.shape}.")
    (kh, kw), (sh, sw) = kernel, strides
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    win = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(2, 3))[:, :, ::sh, ::sw]
    return win.transpose(0, 2, 3, 1, 4, 5).reshape(-1, x.shape[1] * kh * kw)
