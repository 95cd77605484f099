"""Lesson 01b's sentences about its results, and the figures each section's check cell measures.

Each sentence here is written once in the lesson's markdown, with `<!-- claim: name -->` after it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..claims import Book, about, far

book = Book("01b")
INT16_MAX = 32_767


# 1. Payload arithmetic with real bytes ---------------------------------------------------------------
@book.figures("1")
def _(payload: dict, params: Any, quoted: dict, stored: dict) -> dict:
    def total(fmt: str) -> int:
        array, metadata, _ = payload[fmt]
        return int(array.nbytes + metadata)

    ort_format = next(fmt for fmt in payload if "blocks of" in fmt)
    fp32 = int(params.nbytes)
    # the quantized weight's scale and zero point in the file ONNX Runtime's quantizer wrote
    scale = next(v for k, v in stored.items() if k.startswith("weight") and k.endswith("scale"))
    zero_point = next(v for k, v in stored.items() if k.startswith("weight") and k.endswith("zero_point"))
    return {
        "int4_b32_total_bytes": total("int4 packed"),
        "ort_int4_total_bytes": total(ort_format),
        "ort_int4_share_pct": 100 * total(ort_format) / fp32,
        "int4_b32_share": total("int4 packed") / fp32,
        "int4_values_share": int(payload["int4 packed"][0].nbytes) / fp32,
        "payloads_match_quote": all(int(payload[fmt][0].nbytes) == n for fmt, n in quoted.items()),
        "file_scales": int(np.size(scale)),
        "file_zero_points": int(np.size(zero_point)),
        "file_zero_point_type": str(np.asarray(zero_point).dtype),
        "file_zero_points_all_zero": bool(np.all(np.asarray(zero_point) == 0)),
    }


@book.sentence(
    "1",
    "int4-sixth",
    "Packed int4 in blocks of 32 takes about a sixth of float32's bytes once its scales are counted, "
    "not the eighth its values alone take",
    shows="{int4_b32_share:.1%} with its scales, {int4_values_share:.1%} without",
    depends="data",
)
def _(f):
    return about(f["int4_b32_share"], 1 / 6) and f["int4_values_share"] == 1 / 8


@book.sentence(
    "1",
    "ort-layout-smaller",
    "ONNX Runtime's default 4-bit layout takes fewer bytes than blocks of 32",
    shows="{ort_int4_total_bytes:,} against {int4_b32_total_bytes:,} bytes",
    depends="runtime",
)
def _(f):
    return f["ort_int4_total_bytes"] < f["int4_b32_total_bytes"]


@book.sentence(
    "1",
    "payloads-match-quote",
    "The measured payloads agree exactly with seed 004's figures",
    shows="{payloads_match_quote}",
    depends="data",
)
def _(f):
    return f["payloads_match_quote"]


@book.sentence(
    "1",
    "zero-points-written",
    "ONNX Runtime's quantizer writes an int8 zero point for each scale of a symmetric int8 weight, "
    "all of them 0",
    shows="{file_zero_points} {file_zero_point_type} zero points for {file_scales} scales",
    depends="runtime",
)
def _(f):
    return (
        f["file_zero_points"] == f["file_scales"]
        and f["file_zero_point_type"] == "int8"
        and f["file_zero_points_all_zero"]
    )


# 2. An integer matrix product -------------------------------------------------------------------------
@book.figures("2")
def _(accumulator: Any, error_steps: float, same_class: Any, codes: tuple) -> dict:
    runtime, by_hand = codes
    return {
        "matmul_acc_max": int(np.abs(accumulator).max()),
        "matmul_error_steps": float(error_steps),
        "matmul_same_class": int(np.sum(same_class)),
        "matmul_images": int(np.size(same_class)),
        "qlinearmatmul_same": bool(np.array_equal(runtime, by_hand)),
    }


@book.sentence(
    "2",
    "qlinearmatmul-same",
    "ONNX Runtime's QLinearMatMul gives the same codes as the four steps",
    shows="{qlinearmatmul_same}",
    depends=("runtime", "cpu"),
)
def _(f):
    return f["qlinearmatmul_same"]


@book.sentence(
    "2",
    "accumulator-far-past-int16",
    "The int32 accumulator goes far past what int16 holds",
    shows="{matmul_acc_max:,} against 32,767",
    depends=("weights", "data"),
)
def _(f):
    return far(f["matmul_acc_max"] / INT16_MAX)


@book.sentence(
    "2",
    "error-under-three-steps",
    "The integer result lands less than three output steps from the float one",
    shows="{matmul_error_steps:.1f} steps",
    depends=("weights", "data"),
)
def _(f):
    return f["matmul_error_steps"] < 3


@book.sentence(
    "2",
    "class-at-most-one",
    "The error changes the predicted class of no more than one of the eight images",
    shows="{matmul_same_class} of {matmul_images} unchanged",
    depends=("weights", "data"),
)
def _(f):
    return f["matmul_images"] - f["matmul_same_class"] <= 1
