"""Lesson 01's sentences about its results, and the figures each section's check cell measures.

Each sentence here is written once in the lesson's markdown, with `<!-- claim: name -->` after it.
The sentences about the trained ResNet18's weights (section 4 and 5) are written to hold for weights
trained with any seed on any CPU: the runs the course has seen put the outlier's largest |w| at 2.1
to 3.0 times its 99.9th percentile, clipping's gain at 8 bits between -1.6 and +1.7 dB and at 4
bits between +6.5 and +9.6 dB.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..claims import Book, about, far, nearly_all

book = Book("01")


# 1. Encode and decode ----------------------------------------------------------------------------
@book.figures("1")
def _(x: Any, x_hat: Any, scale: Any, u_err: Any) -> dict:
    errors = np.abs(np.asarray(x, np.float64) - np.asarray(x_hat, np.float64))
    return {
        "clipped_error": float(errors.max()),
        "half_step": float(scale) / 2,
        "max_abs_error": float(u_err.max_abs_error),
        "mse": float(u_err.mse),
        "rounding_mse": float(scale) ** 2 / 12,
    }


@book.sentence(
    "1",
    "clipped-far",
    "The clipped value's error is far larger than half a step",
    shows="{clipped_error:.2f} against s/2 = {half_step:.2f}",
    depends="data",
)
def _(f):
    return far(f["clipped_error"] / f["half_step"])


@book.sentence(
    "1",
    "worst-half-step",
    "Over a million values inside the range, the worst error is half a step (up to float32's last digit)",
    shows="{max_abs_error:.7f} against s/2 = {half_step:.7f}",
    depends="data",
)
def _(f):
    return 0.999 * f["half_step"] <= f["max_abs_error"] <= (1 + 1e-5) * f["half_step"]


@book.sentence(
    "1",
    "mse-s2-12",
    "The mean squared error matches s²/12 to within a percent",
    shows="{mse:.4e} against {rounding_mse:.4e}",
    depends="data",
)
def _(f):
    return abs(f["mse"] / f["rounding_mse"] - 1) < 0.01


# 2. The rounding rule ------------------------------------------------------------------------------
@book.figures("2")
def _(halves: Any, q_halves: Any) -> dict:
    from course_lib import affine

    halves, q_halves = np.asarray(halves, np.float32), np.asarray(q_halves)
    return {
        "ties": int(halves.size),
        "runtime_as_affine": bool(np.array_equal(q_halves, affine.quantize(halves, 1.0, 0, "int8"))),
        "runtime_half_to_even": bool(np.array_equal(q_halves, np.rint(halves))),
        "half_up_bias": float(np.mean(np.floor(halves + 0.5) - halves)),
        "runtime_bias": float(np.mean(q_halves - halves)),
    }


@book.sentence(
    "2",
    "ties-to-even",
    "ONNX Runtime's QuantizeLinear rounds ties half to even, giving the codes affine.quantize gives",
    shows="{ties} ties",
    depends="runtime",
)
def _(f):
    return f["runtime_half_to_even"] and f["runtime_as_affine"]


@book.sentence(
    "2",
    "ties-unbiased",
    "Rounding half up biases ties by half a step on average; half to even leaves no bias",
    shows="half up {half_up_bias:+.3f}, half to even {runtime_bias:+.3f}",
    depends="runtime",
)
def _(f):
    return abs(f["half_up_bias"] - 0.5) < 1e-6 and abs(f["runtime_bias"]) < 1e-6


# 3. Scale and zero point from a range ------------------------------------------------------------------
@book.figures("3")
def _(probe: Any, x_back: Any, zero_back: Any, q_ends: Any, steps: tuple, grids: dict) -> dict:
    from course_lib import affine

    qmin, qmax = affine.qrange("int8", narrow=True)
    s_sym, s_asym = (float(s) for s in steps)
    return {
        "zero_decoded": float(np.asarray(x_back)[np.asarray(probe) == 0][0]),
        "fractional_zero": float(zero_back),
        "unused_codes": int(q_ends[0]) - qmin,
        "unused_share": (int(q_ends[0]) - qmin) / (qmax - qmin + 1),
        "step_ratio": s_sym / s_asym,
        "uint8_grid": [round(float(v), 6) for v in grids["uint8 asymmetric"]],
        "int8_grid": [round(float(v), 6) for v in grids["int8 asymmetric"]],
        "full_range_top": grids["int8 symmetric, full range"][1],
    }


@book.sentence(
    "3",
    "zero-exact",
    "With an integer zero point, real 0 comes back as exactly 0",
    shows="{zero_decoded}",
    depends="data",
)
def _(f):
    return f["zero_decoded"] == 0.0


@book.sentence(
    "3",
    "fractional-zero-off",
    "With the fractional zero point, real 0 comes back wrong",
    shows="{fractional_zero:.6f}",
    depends="data",
)
def _(f):
    return f["fractional_zero"] != 0.0


@book.sentence(
    "3",
    "symmetric-wastes-third",
    "On [-1, 3], symmetric int8 never uses about a third of its codes",
    shows="{unused_codes} codes, {unused_share:.1%}",
    depends="data",
)
def _(f):
    return about(f["unused_share"], 1 / 3)


@book.sentence(
    "3",
    "symmetric-step-coarser",
    "Symmetric int8's step on [-1, 3] is about one and a half times asymmetric uint8's",
    shows="{step_ratio:.2f}x",
    depends="data",
)
def _(f):
    return about(f["step_ratio"], 1.5)


@book.sentence(
    "3",
    "signedness-same-grid",
    "Asymmetric uint8 and int8 give the same grid",
    shows="{uint8_grid} and {int8_grid}",
    depends="data",
)
def _(f):
    return bool(np.allclose(f["uint8_grid"], f["int8_grid"], rtol=0, atol=1e-6))


@book.sentence(
    "3",
    "full-range-misses-top",
    "Symmetric int8 on the full -128..127 cannot reach +3",
    shows="top code {full_range_top:.4f}",
    depends="data",
)
def _(f):
    return f["full_range_top"] < 3.0


# 4. Ranges and outliers -------------------------------------------------------------------------------
@book.figures("4")
def _(layer: str, ratios: dict, errors: dict, percentiles: list, sweep: dict) -> dict:
    found: dict[str, Any] = {"outlier_layer": layer, "outlier_ratio": float(ratios[layer])}
    for dtype in ("int8", "int4"):
        for label, key in (("min/max", "minmax"), ("clip at 99.9th pct", "clip")):
            step, bulk, tail, whole = errors[dtype, label]
            found[f"sqnr_{key}_{dtype}"] = float(whole.sqnr_db)
            found[f"bulk_mse_{key}_{dtype}"] = float(bulk.mse)
            found[f"tail_mse_{key}_{dtype}"] = float(tail.mse)
            found[f"step_{key}_{dtype}"] = float(step)
        found[f"gain_{dtype}"] = found[f"sqnr_clip_{dtype}"] - found[f"sqnr_minmax_{dtype}"]
    found["step_ratio"] = found["step_minmax_int8"] / found["step_clip_int8"]
    for bits in (8, 4):
        found[f"best_pct_int{bits}"] = float(percentiles[int(np.argmin(sweep[bits]))])
    return found


@book.sentence(
    "4",
    "outlier-ratio",
    "The largest |w| is more than one and a half times the 99.9th percentile, and clipping there "
    "makes the step that many times finer",
    shows="{outlier_ratio:.2f}x; the step {step_ratio:.2f}x finer",
    depends="weights",
)
def _(f):
    return f["outlier_ratio"] > 1.5 and abs(f["step_ratio"] / f["outlier_ratio"] - 1) < 0.01


@book.sentence(
    "4",
    "clip-8bit-small",
    "At 8 bits, clipping at the 99.9th percentile moves the SQNR by less than three dB, up or down",
    shows="{gain_int8:+.1f} dB",
    depends="weights",
)
def _(f):
    return abs(f["gain_int8"]) < 3


@book.sentence(
    "4",
    "clip-4bit-wins",
    "At 4 bits, the same clipping wins by more than five dB",
    shows="{gain_int4:+.1f} dB",
    depends="weights",
)
def _(f):
    return f["gain_int4"] > 5


@book.sentence(
    "4",
    "clip-bulk-tail",
    "Clipping lowers the bulk's error at 8 and at 4 bits, and at 8 bits raises the tail's",
    shows="bulk MSE {bulk_mse_minmax_int8:.1e} to {bulk_mse_clip_int8:.1e}, tail {tail_mse_minmax_int8:.1e} "
    "to {tail_mse_clip_int8:.1e} at 8 bits",
    depends="weights",
)
def _(f):
    bulk_drops = all(f[f"bulk_mse_clip_{t}"] < f[f"bulk_mse_minmax_{t}"] for t in ("int8", "int4"))
    return bulk_drops and f["tail_mse_clip_int8"] > f["tail_mse_minmax_int8"]


@book.sentence(
    "4",
    "best-4-fewer",
    "At 4 bits the best clipping point keeps fewer weights in range than at 8 bits",
    shows="{best_pct_int4:g} % against {best_pct_int8:g} %",
    depends="weights",
)
def _(f):
    return f["best_pct_int4"] < f["best_pct_int8"]


@book.sentence(
    "4",
    "best-8-near-minmax",
    "At 8 bits the best clipping point sits at or near min/max (99.99 % or more kept)",
    shows="{best_pct_int8:g} %",
    depends="weights",
)
def _(f):
    return f["best_pct_int8"] >= 99.99


# 5. Granularity ----------------------------------------------------------------------------------------
@book.figures("5")
def _(w: Any, studies: dict, gains: dict) -> dict:
    pt, pc = studies["per-tensor"], studies["per-channel"]
    outlier_channel = int(np.unravel_index(np.argmax(np.abs(w)), np.shape(w))[0])
    others = np.arange(len(pc.channel_mse)) != outlier_channel
    better = int(np.sum(pc.channel_mse[others] < pt.channel_mse[others]))
    values = np.array(list(gains.values()))
    return {
        "sqnr_per_tensor": float(pt.error.sqnr_db),
        "sqnr_per_channel": float(pc.error.sqnr_db),
        "sqnr_block128": float(studies["block-wise 128"].error.sqnr_db),
        "sqnr_block32": float(studies["block-wise 32"].error.sqnr_db),
        # a float32 scale and an int8 zero point for each scale, as ONNX Runtime's quantizer writes them
        "per_channel_meta_share": 5 * pc.n_scales / pc.payload_bytes,
        "outlier_channel_gain": float(
            pc.channel_sqnr_db[outlier_channel] - pt.channel_sqnr_db[outlier_channel]
        ),
        "channels_better": better,
        "other_channels": int(others.sum()),
        "pc_gain_min": float(values.min()),
        "pc_gain_max": float(values.max()),
        "weights_count": len(values),
    }


@book.sentence(
    "5",
    "granularity-order",
    "Per-channel beats per-tensor, and blocks of 32 beat per-channel",
    shows="{sqnr_per_tensor:.1f}, {sqnr_per_channel:.1f}, {sqnr_block32:.1f} dB",
    depends="weights",
)
def _(f):
    return f["sqnr_per_tensor"] < f["sqnr_per_channel"] < f["sqnr_block32"]


@book.sentence(
    "5",
    "per-channel-cheap",
    "Per-channel's scales and zero points cost less than a percent of the payload",
    shows="{per_channel_meta_share:.2%}",
    depends="weights",
)
def _(f):
    return f["per_channel_meta_share"] < 0.01


@book.sentence(
    "5",
    "outlier-channel-same",
    "The outlier's channel gains nothing from its own scale",
    shows="{outlier_channel_gain:+.2f} dB",
    depends="weights",
)
def _(f):
    return abs(f["outlier_channel_gain"]) < 0.01


@book.sentence(
    "5",
    "nearly-every-channel-better",
    "Nearly every other channel comes out with a lower error per-channel",
    shows="{channels_better} of {other_channels}",
    depends="weights",
)
def _(f):
    return nearly_all(f["channels_better"] / f["other_channels"])


@book.sentence(
    "5",
    "per-channel-every-weight",
    "Per-channel beats per-tensor on every weight of this model",
    shows="{pc_gain_min:+.1f} to {pc_gain_max:+.1f} dB over {weights_count} weights",
    depends="weights",
)
def _(f):
    return f["pc_gain_min"] > 0
