"""Lesson 06b's sentences about its results, and the figures each section's check cell measures.

Each sentence here is written once in the lesson's markdown, with `<!-- claim: name -->` after it.
"""

from __future__ import annotations

from typing import Any

from course_lib.names import TEXT_ENCODER

from ..claims import X86, Book, about, all_of, apart, far, most, nearly_all
from ..claims import speed as ratio

book = Book("06b")

DYNAMIC = "dynamic INT8, per-channel (lesson 02)"
STATIC = "static INT8, representative calibration"
SHORT = "static INT8, short sentences only"
EMBEDDING = "static INT8, before the optimizer: MatMul and the embedding"
LAYERNORM = "static INT8, before the optimizer: MatMul and the LayerNorms"
CASES = {"1 sentence": "1", "short sentence": "short", "16 sentences": "16"}  # the timed cases
SLOW_FILES = ("A16W8", "4-bit weights")  # the QDQ files section 3 profiles beside fp32


# 1. The bytes of a 4-bit file ----------------------------------------------------------------------
@book.figures("1")
def _(packed: Any, scales: Any, original: Any, error_in_steps: Any) -> dict:
    within = float((error_in_steps <= 0.5 + 1e-4).mean())
    return {
        "bytes_per_weight": (packed.nbytes + scales.nbytes) / original.size,
        "within_half_step": within,
        "off_share": 1 - within,
        "max_steps_off": float(error_in_steps.max()),
    }


@book.sentence(
    "1",
    "nearly-all-within-half-step",
    "Decoded by hand, nearly every weight of the symmetric file comes back within half a step of its float32 value",
    shows="{within_half_step:.3%}",
    depends="runtime",
)
def _(f):
    return nearly_all(f["within_half_step"])


@book.sentence(
    "1",
    "rest-one-step",
    "The rest, under one per cent of the weights, land no more than one step off",
    shows="{off_share:.3%}, up to {max_steps_off:.2f} steps",
    depends="runtime",
)
def _(f):
    return f["off_share"] < 0.01 and f["max_steps_off"] <= 1 + 1e-4


# 2. Static INT8 on the text encoder ----------------------------------------------------------------
@book.figures("2")
def _(quality: dict, files: dict, speed: dict) -> dict:
    from course_lib.units import megabytes

    cos = {x: q["cos_min"] for x, q in quality.items()}
    out: dict[str, Any] = {
        "te_dynamic_cos_min": cos[DYNAMIC],
        "te_static_cos_min": cos[STATIC],
        "te_static_short_cos_min": cos[SHORT],
        "te_static_embedding_cos_min": cos[EMBEDDING],
        "te_static_layernorm_cos_min": cos[LAYERNORM],
        "te_dynamic_mb": megabytes(files[DYNAMIC]),
        "te_static_mb": megabytes(files[STATIC]),
        "te_static_embedding_mb": megabytes(files[EMBEDDING]),
        "smallest_other_static_mb": min(
            megabytes(p) for x, p in files.items() if x not in (DYNAMIC, EMBEDDING)
        ),
    }
    for case, suffix in CASES.items():
        out[f"static_at_{suffix}"] = ratio(speed[case][STATIC])
        out[f"dynamic_at_{suffix}"] = ratio(speed[case][DYNAMIC])
    return out


@book.sentence(
    "2",
    "short-calibration-worse",
    "Calibrating on short sentences only gives a worse worst sentence",
    shows="{te_static_short_cos_min:.4f} against {te_static_cos_min:.4f}",
    depends=("cpu", "data"),
)
def _(f):
    return f["te_static_short_cos_min"] < f["te_static_cos_min"]


@book.sentence(
    "2",
    "embedding-shrinks-most",
    "Quantizing the embedding gives the smallest static file",
    shows="{te_static_embedding_mb:.1f} MB; the next smallest static file {smallest_other_static_mb:.1f} MB",
    depends="runtime",
)
def _(f):
    return f["te_static_embedding_mb"] < f["smallest_other_static_mb"]


@book.sentence(
    "2",
    "layernorm-costs-far-more",
    "Quantizing the LayerNorms costs far more quality than quantizing the embedding (1 − worst cosine)",
    shows="worst cosine {te_static_layernorm_cos_min:.4f} against {te_static_embedding_cos_min:.4f}",
    depends=("cpu", "data"),
)
def _(f):
    return far((1 - f["te_static_layernorm_cos_min"]) / (1 - f["te_static_embedding_cos_min"]))


@book.sentence(
    "2",
    "static-as-close",
    "Static INT8's worst sentence is about as close to fp32 as dynamic INT8's (1 − cosine within a fifth)",
    shows="{te_static_cos_min:.4f} against {te_dynamic_cos_min:.4f}",
    depends=("cpu", "data"),
)
def _(f):
    return about(1 - f["te_static_cos_min"], 1 - f["te_dynamic_cos_min"])


@book.sentence(
    "2",
    "static-three-times-larger",
    "Static INT8's file is about three times dynamic INT8's",
    shows="{te_static_mb:.1f} MB against {te_dynamic_mb:.1f} MB",
    depends="runtime",
)
def _(f):
    return about(f["te_static_mb"] / f["te_dynamic_mb"], 3)


@book.sentence(
    "2",
    "static-never-faster",
    "Static INT8 is never clearly faster than dynamic INT8 (1 sentence, the short one, 16 sentences)",
    shows="static {static_at_1}, {static_at_short}, {static_at_16}; dynamic {dynamic_at_1}, "
    "{dynamic_at_short}, {dynamic_at_16}",
    depends="speed",
)
def _(f):
    return all(apart(f[f"static_at_{s}"], f[f"dynamic_at_{s}"]) is not True for s in CASES.values())


# 3. The profile of the slow QDQ files ------------------------------------------------------------------
@book.figures("3")
def _(stories: dict) -> dict:
    fp32 = stories["fp32"]
    out: dict[str, Any] = {"fp32_conv_ms": fp32["conv ms"], "fp32_nchwc_convs": fp32["in NCHWc"]}
    for name, key in zip(SLOW_FILES, ("a16w8", "int4"), strict=True):
        s = stories[name]
        out |= {
            f"{key}_conv_ms": s["conv ms"],
            f"{key}_qdq_ms": s["Q/DQ ms"],
            f"{key}_conv_share": s["conv ms"] / s["all kernels ms"],
            f"{key}_convs": s["Convs"],
            f"{key}_nchwc_convs": s["in NCHWc"],
            f"{key}_dequantized_weights": s["weight from a DequantizeLinear"],
        }
    return out


@book.sentence(
    "3",
    "a16w8-time-in-conv",
    "Most of the A16W8 file's kernel time is in its float convolutions",
    shows="{a16w8_conv_share:.0%} ({a16w8_conv_ms:.1f} ms; Q/DQ {a16w8_qdq_ms:.1f} ms)",
    depends="speed",
)
def _(f):
    return most(f["a16w8_conv_share"])


@book.sentence(
    "3",
    "int4-time-in-conv",
    "Most of the 4-bit file's kernel time is in its float convolutions",
    shows="{int4_conv_share:.0%} ({int4_conv_ms:.1f} ms; Q/DQ {int4_qdq_ms:.1f} ms)",
    depends="speed",
)
def _(f):
    return most(f["int4_conv_share"])


@book.sentence(
    "3",
    "convs-far-longer",
    "The A16W8 and 4-bit files' convolutions take far longer than fp32's",
    shows="{a16w8_conv_ms:.1f} ms and {int4_conv_ms:.1f} ms against {fp32_conv_ms:.1f} ms",
    depends="speed",
)
def _(f):
    return all_of(far(f[f"{k}_conv_ms"] / f["fp32_conv_ms"]) for k in ("a16w8", "int4"))


@book.sentence(
    "3",
    "weights-dequantized",
    "Each convolution of the A16W8 and 4-bit files reads its weight from a DequantizeLinear",
    shows="{a16w8_dequantized_weights} of {a16w8_convs}; {int4_dequantized_weights} of {int4_convs}",
    depends="runtime",
)
def _(f):
    return all(0 < f[f"{k}_dequantized_weights"] == f[f"{k}_convs"] for k in ("a16w8", "int4"))


@book.sentence(
    "3",
    "nchwc-fp32-only",
    "fp32's convolutions run in the NCHWc layout, and the A16W8 and 4-bit files' do not",
    shows="{fp32_nchwc_convs} against {a16w8_nchwc_convs} and {int4_nchwc_convs}",
    scope=X86,
    depends=("cpu", "runtime"),
)
def _(f):
    return f["fp32_nchwc_convs"] > 0 and f["a16w8_nchwc_convs"] == f["int4_nchwc_convs"] == 0


@book.end
def _(quality: dict, files: dict, speed: dict) -> None:
    """The text encoder's rows in the course's results store: for the report and lesson 06's table."""
    from pathlib import Path

    from course_machinery import models, results

    fp32_bytes = Path(models.get(TEXT_ENCODER).onnx_files["optimized"]).stat().st_size
    for label, path in files.items():
        one, short, sixteen = (speed[case].get(label) for case in CASES)
        metrics = {
            "cos_min": quality[label]["cos_min"],
            "cos_mean": quality[label]["cos_mean"],
            "fp32_bytes": fp32_bytes,
            "speedup_b1": one and one.speedup,
            "speedup_b1_low": one and one.speedup_low,
            "speedup_b1_high": one and one.speedup_high,
            "speedup_short": short and short.speedup,
            "speedup_b16": sixteen and sixteen.speedup,
            "speedup_b16_low": sixteen and sixteen.speedup_low,
            "speedup_b16_high": sixteen and sixteen.speedup_high,
        }
        results.record("06b", TEXT_ENCODER, label, metrics, options={"threads": 2}, path=path)
