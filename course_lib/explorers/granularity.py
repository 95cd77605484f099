"""The granularity explorer's computations (lesson 01): per-tensor, per-channel and block-wise scales
on a real weight, the error of each and the metadata it stores.

    weight_tensors      the conv and linear weights of a state_dict
    outlier_ratio       how far a weight's extreme sits beyond its bulk
    granularity_study   quantize one weight with one granularity -> GranularityStudy

Plain functions over course_lib.affine; course_lib.explorers.widgets binds controls to them and draws.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from .. import affine

GRANULARITIES = ("per-tensor", "per-channel", "block-wise")


def _to_numpy(value) -> np.ndarray:
    if hasattr(value, "detach"):  # a torch tensor; no torch import needed here
        value = value.detach().cpu().numpy()
    return np.asarray(value, dtype=np.float32)


def weight_tensors(weights: Mapping) -> dict[str, np.ndarray]:
    """The conv and linear weights of a state_dict (or any name -> array mapping), as float32 numpy.

    A weight is any entry with 2 or more dimensions, output channels first (PyTorch's layout for
    Conv2d (out, in, kh, kw) and Linear (out, in)); biases and BatchNorm vectors are left out.
    """
    found = {name: _to_numpy(value) for name, value in weights.items() if np.ndim(value) >= 2}
    if not found:
        raise ValueError(
            "no conv or linear weights found: expected entries with 2 or more dimensions, e.g. "
            "model.state_dict() or {'fc.weight': array of shape (10, 512)}."
        )
    return found


def outlier_ratio(w: ArrayLike, percentile: float = 99.9) -> float:
    """max |w| divided by the `percentile`-th percentile of |w|: how far the extreme sits beyond the bulk."""
    a = np.abs(np.asarray(w, dtype=np.float32))
    return float(a.max() / np.percentile(a, percentile))


@dataclass(frozen=True)
class GranularityStudy:
    """A weight quantized with one granularity: error per output channel, overall, and metadata cost."""

    granularity: str
    dtype: str
    block_size: int | None
    channel_mse: np.ndarray  # one value per output channel
    channel_sqnr_db: np.ndarray
    error: affine.ErrorStats  # over the whole tensor
    n_scales: int
    n_zero_points: int  # 0 when all zero points are 0 (symmetric signed): ONNX lets a graph omit them
    metadata_bytes: int  # float32 scales; zero points in the weight's own type (4-bit ones packed)
    payload_bytes: int  # the integers: one byte each for 8 bits, packed two per byte for 4 bits

    def describe(self, name: str = "", shape: tuple[int, ...] = ()) -> str:
        what = self.granularity + (f" (block {self.block_size})" if self.block_size else "")
        head = f"{name} {'×'.join(map(str, shape))}: " if name else ""
        return (
            f"{head}{self.dtype} symmetric {what} · SQNR {self.error.sqnr_db:.1f} dB, MSE "
            f"{self.error.mse:.3g} · metadata {self.n_scales:,} scales + {self.n_zero_points:,} zero points "
            f"= {self.metadata_bytes:,} bytes, {100 * self.metadata_bytes / self.payload_bytes:.2f}% of "
            f"the {self.payload_bytes:,}-byte payload"
        )


def granularity_study(
    w: ArrayLike,
    granularity: str = "per-channel",
    block_size: int = 32,
    dtype: str = "int8",
    symmetric: bool = True,
) -> GranularityStudy:
    """Quantize a weight (output channels on axis 0) per tensor, per output channel, or in blocks of
    `block_size` consecutive values within each output channel (the weight seen as out × rest).

    Block-wise here means blocks along the input side of each output channel, as ONNX's blocked
    QuantizeLinear (opset 21) and ONNX Runtime's 4-bit MatMul weights lay them out.
    """
    if granularity not in GRANULARITIES:
        raise ValueError(f"granularity must be one of {GRANULARITIES}; got {granularity!r}.")
    if dtype not in ("int8", "uint8", "int4", "uint4"):
        raise ValueError(
            f"dtype must be one of 'int8', 'uint8', 'int4', 'uint4' (ONNX weight types); got {dtype!r}."
        )
    w = np.asarray(w, dtype=np.float32)
    if w.ndim < 2:
        raise ValueError(
            f"expected a weight with output channels on axis 0 and 2+ dimensions; got shape {w.shape}."
        )
    w2 = w.reshape(w.shape[0], -1)  # one row per output channel
    if granularity == "per-tensor":
        scale, zero_point = affine.scale_zero_point(w2.min(), w2.max(), dtype, symmetric)
        w_hat = affine.fake_quantize(w2, scale, zero_point, dtype)
    elif granularity == "per-channel":
        scale, zero_point = affine.scale_zero_point(w2.min(axis=1), w2.max(axis=1), dtype, symmetric)
        w_hat = affine.fake_quantize(w2, scale, zero_point, dtype, axis=0)
    else:
        scale, zero_point = affine._block_scale_zero_point(w2, block_size, dtype, symmetric, axis=1)
        w_hat, _ = affine._quantize_blockwise(w2, block_size, dtype, symmetric, axis=1)
    n_scales = int(np.asarray(scale).size)
    n_zero_points = 0 if symmetric and affine._is_signed(dtype) else n_scales
    bits = affine.DTYPES[dtype][0]
    payload = -(-w.size * bits // 8)  # 4-bit values packed two per byte
    noise = (w2.astype(np.float64) - w_hat) ** 2
    channel_mse = noise.mean(axis=1)
    channel_power = (w2.astype(np.float64) ** 2).mean(axis=1)
    with np.errstate(divide="ignore"):
        channel_sqnr = 10 * np.log10(channel_power / channel_mse)
    return GranularityStudy(
        granularity=granularity,
        dtype=dtype,
        block_size=block_size if granularity == "block-wise" else None,
        channel_mse=channel_mse,
        channel_sqnr_db=channel_sqnr,
        error=affine.quantization_error(w2, w_hat),
        n_scales=n_scales,
        n_zero_points=n_zero_points,
        metadata_bytes=4 * n_scales + -(-n_zero_points * bits // 8),
        payload_bytes=int(payload),
    )
