"""Lesson 06's sentences about its results, and the figures each section's check cell measures.

Each sentence here is written once in the lesson's markdown, with `<!-- claim: name -->` after it.
"""

from __future__ import annotations

from typing import Any

from course_lib.names import RESNET18, TEXT_ENCODER

from ..claims import Book, about, all_of, apart, change, far, interval, noise
from ..claims import speed as ratio

book = Book("06")

# The variants of section 1, as the lesson names them, and the figure names they go by.
DYNAMIC = "dynamic INT8, per-channel (lesson 02)"
FOUR_BIT = {
    "te_int4_b128": "4-bit, blocks of 128, asymmetric (default)",
    "te_int4_b32": "4-bit, blocks of 32, asymmetric",
    "te_int4_b32_sym": "4-bit, blocks of 32, symmetric",
    "te_int4_al4": "4-bit, blocks of 32, asymmetric, accuracy_level 4",
}
TIMED_4BIT = ("te_int4_b128", "te_int4_b32", "te_int4_al4")  # the symmetric file runs b32's kernel
SIZE_TARGET = 0.26  # lesson 04's course target, as a share of fp32's bytes


# 1. 4-bit weight-only on the text encoder ------------------------------------------------------------
@book.figures("1")
def _(bytes_by_op: dict, quality: dict, candidates: dict, speed: dict | None, memory: dict | None) -> dict:
    """`speed` and `memory` None where nothing could be timed (the emulated ARM CPUs)."""
    from course_lib.units import megabytes

    names = {"te_dynamic": DYNAMIC, **FOUR_BIT}
    out: dict[str, Any] = {
        "matmul_share": bytes_by_op.get("MatMul", 0) / sum(bytes_by_op.values()),
        "te_dynamic_mb": megabytes(candidates[DYNAMIC]),
        "smallest_4bit_mb": min(megabytes(candidates[x]) for x in FOUR_BIT.values()),
    }
    if memory is not None:
        out |= {
            "te_fp32_peak_mb": megabytes(memory["fp32 (optimized)"]),
            "te_dynamic_peak_mb": megabytes(memory[DYNAMIC]),
            "te_int4_b32_peak_mb": megabytes(memory[FOUR_BIT["te_int4_b32"]]),
        }
    out |= {f"{n}_cos_min": quality[x]["cos_min"] for n, x in names.items()}
    if speed is None:
        return out
    for case, suffix in (("128 tokens", "at_128"), ("short sentence", "at_short")):
        out |= {f"{n}_{suffix}": ratio(speed[case][names[n]]) for n in ("te_dynamic", *TIMED_4BIT)}
    return out


@book.sentence(
    "1",
    "matmul-third",
    "The MatMul weights are about a third of the text encoder's fp32 weight bytes",
    shows="{matmul_share:.0%}",
    depends="runtime",
)
def _(f):
    return about(f["matmul_share"], 1 / 3)


@book.sentence(
    "1",
    "dynamic-smaller",
    "Dynamic INT8's file is smaller than any 4-bit file",
    shows="{te_dynamic_mb:.1f} MB against {smallest_4bit_mb:.1f} MB",
    depends="runtime",
)
def _(f):
    return f["te_dynamic_mb"] < f["smallest_4bit_mb"]


@book.sentence(
    "1",
    "b32-beats-b128",
    "Blocks of 32 beat blocks of 128 on the worst sentence",
    shows="{te_int4_b32_cos_min:.4f} against {te_int4_b128_cos_min:.4f}",
    depends=("cpu", "data"),
)
def _(f):
    return f["te_int4_b32_cos_min"] > f["te_int4_b128_cos_min"]


@book.sentence(
    "1",
    "asym-beats-sym",
    "Asymmetric blocks of 32 beat symmetric ones on the worst sentence",
    shows="{te_int4_b32_cos_min:.4f} against {te_int4_b32_sym_cos_min:.4f}",
    depends=("cpu", "data"),
)
def _(f):
    return f["te_int4_b32_cos_min"] > f["te_int4_b32_sym_cos_min"]


@book.sentence(
    "1",
    "al4-same-quality",
    "accuracy_level=4 moves the worst sentence's cosine by less than a thousandth",
    shows="{te_int4_al4_cos_min:.4f} against {te_int4_b32_cos_min:.4f}",
    depends=("cpu", "data"),
)
def _(f):
    return abs(f["te_int4_al4_cos_min"] - f["te_int4_b32_cos_min"]) < 0.001


@book.sentence(
    "1",
    "4bit-below-dynamic",
    "No 4-bit file reaches dynamic INT8 on the worst sentence",
    shows="dynamic {te_dynamic_cos_min:.4f}; best 4-bit {te_int4_b32_cos_min:.4f}",
    depends=("cpu", "data"),
)
def _(f):
    return all(f[f"{n}_cos_min"] < f["te_dynamic_cos_min"] for n in FOUR_BIT)


@book.sentence(
    "1",
    "dynamic-faster-128",
    "Dynamic INT8 is clearly faster than every 4-bit file, on one sentence of 128 tokens",
    shows="dynamic {te_dynamic_at_128}; 4-bit {te_int4_b128_at_128}, {te_int4_b32_at_128}, {te_int4_al4_at_128}",
    depends="speed",
)
def _(f):
    return all_of(apart(f["te_dynamic_at_128"], f[f"{n}_at_128"]) for n in TIMED_4BIT)


@book.sentence(
    "1",
    "dynamic-faster-short",
    "Dynamic INT8 is clearly faster than every 4-bit file, on the short sentence",
    shows="dynamic {te_dynamic_at_short}; 4-bit {te_int4_b128_at_short}, {te_int4_b32_at_short}, {te_int4_al4_at_short}",
    depends="speed",
)
def _(f):
    return all_of(apart(f["te_dynamic_at_short"], f[f"{n}_at_short"]) for n in TIMED_4BIT)


@book.sentence(
    "1",
    "4bit-more-memory",
    "The 4-bit file takes more memory running one sentence than dynamic INT8's",
    shows="{te_int4_b32_peak_mb:.0f} MB against {te_dynamic_peak_mb:.0f} MB",
    depends="runtime",
)
def _(f):
    return f["te_int4_b32_peak_mb"] > f["te_dynamic_peak_mb"]


# 2. 16-bit activations (A16W8) on the ResNet18 ---------------------------------------------------------
@book.figures("2")
def _(a8: Any, a16: Any, ran_a16: Any) -> dict:
    c = a16.latency
    return {
        "a8w8_drift": a8.parity.mean_abs_drift,
        "a16w8_drift": a16.parity.mean_abs_drift,
        "a16w8_agreement_change": change(a16.parity.compare(a8.parity, "agreement")),
        "a16w8_b64": ratio(c),
        "a16w8_speedup_b64": c.speedup,
        "a8w8_speedup_b64": a8.speedup,
        "fp32_over_a16w8": interval(1 / c.speedup, 1 / c.speedup_high, 1 / c.speedup_low, "x"),
        "a16w8_integer_ops": ran_a16.integer_count,
        "resnet_compute_ops": ran_a16.compute_count,
        "a8w8_accuracy": a8.parity.candidate_accuracy,
        "a16w8_accuracy": a16.parity.candidate_accuracy,
        "resnet_images": a16.parity.n,
    }


@book.sentence(
    "2",
    "a16w8-drifts-less",
    "A16W8's logits drift less from fp32's than A8W8's",
    shows="mean |drift| {a16w8_drift:.4f} against {a8w8_drift:.4f}",
    depends=("weights", "cpu"),
)
def _(f):
    return f["a16w8_drift"] < f["a8w8_drift"]


@book.sentence(
    "2",
    "agreement-noise",
    "A16W8's and A8W8's agreements with fp32 differ by no more than the noise",
    shows="{a16w8_agreement_change}",
    depends=("weights", "cpu", "data"),
)
def _(f):
    return noise(f["a16w8_agreement_change"])


@book.sentence(
    "2",
    "a16w8-far-slower",
    "A16W8 runs far slower than fp32 at batch 64",
    shows="fp32 {fp32_over_a16w8} as fast",
    depends="speed",
)
def _(f):
    return far(f["fp32_over_a16w8"])


@book.sentence(
    "2",
    "a16w8-no-integer",
    "No compute op of the A16W8 file runs on an integer kernel",
    shows="{a16w8_integer_ops} of {resnet_compute_ops}",
    depends=("cpu", "runtime"),
)
def _(f):
    return f["a16w8_integer_ops"] == 0


# 3. One table to decide from -------------------------------------------------------------------------
def _kind(option: str | None) -> str:
    """What kind of file a row of the table is, from the name the results store gives it."""
    if option is None:
        return "none"
    if "4-bit" in option:
        return "4-bit"
    if option.startswith("A16W8"):
        return "A16W8"
    if option.lower().startswith(("dynamic", "per_channel")):
        return "dynamic INT8"
    if option.startswith("static INT8"):
        return "static INT8"
    return "8-bit static"


@book.figures("3")
def _(rows: list[dict], picks: dict) -> dict:
    by_option = {r["option"]: r for r in rows}
    four_bit, a16 = (
        by_option[FOUR_BIT["te_int4_b32"]],
        next(r for r in rows if r["option"].startswith("A16W8")),
    )
    text, resnet = (
        picks[model]["option"] if picks.get(model) else None for model in (TEXT_ENCODER, RESNET18)
    )
    return {
        "text_pick": text or "none",
        "resnet_pick": resnet or "none",
        "text_pick_kind": _kind(text),
        "resnet_pick_kind": _kind(resnet),
        "int4_quality": four_bit["quality"],
        "int4_meets_floor": four_bit["quality floor"] == "✔",
        "int4_size_ratio": float(four_bit["of fp32"]),
        "a16w8_quality": a16["quality"],
        "a16w8_meets_floor": a16["quality floor"] == "✔",
        "a16w8_size_ratio": float(a16["of fp32"]),
        "options_in_table": len(rows),
    }


@book.sentence(
    "3",
    "4bit-misses-floor",
    "The 4-bit text encoder misses the quality floor",
    shows="{int4_quality}",
    depends=("cpu", "data"),
)
def _(f):
    return not f["int4_meets_floor"]


@book.sentence(
    "3",
    "4bit-over-size",
    "The 4-bit text encoder misses the size target",
    shows="{int4_size_ratio:.2f} of fp32",
    depends="runtime",
)
def _(f):
    return f["int4_size_ratio"] > SIZE_TARGET


@book.sentence(
    "3",
    "a16w8-meets-bars",
    "A16W8 meets the quality floor and the size target",
    shows="{a16w8_quality}, {a16w8_size_ratio:.2f} of fp32",
    depends=("weights", "cpu"),
)
def _(f):
    return f["a16w8_meets_floor"] and f["a16w8_size_ratio"] <= SIZE_TARGET


@book.sentence(
    "3",
    "picks-dynamic-text",
    "The rule picks dynamic INT8 for the text encoder",
    shows="{text_pick}",
    depends=("data", "runtime"),
)
def _(f):
    return f["text_pick_kind"] == "dynamic INT8"


@book.sentence(
    "3",
    "picks-8bit-resnet",
    "The rule picks an 8-bit static file for the ResNet18",
    shows="{resnet_pick}",
    depends=("speed", "weights", "cpu"),
)
def _(f):
    return f["resnet_pick_kind"] == "8-bit static"


@book.end
def _(candidates: dict, quality: dict, speed: dict, memory: dict, resnet: dict) -> None:
    """The lesson's results in the course's results store: for the report, and for section 3's
    table when the lesson runs again."""
    from pathlib import Path

    from course_machinery import models, results

    fp32 = models.get(TEXT_ENCODER).onnx_files["optimized"]

    for label, path in candidates.items():
        one, short = (speed[case].get(label) for case in ("128 tokens", "short sentence"))
        metrics = {
            "cos_min": quality[label]["cos_min"],
            "cos_mean": quality[label]["cos_mean"],
            "fp32_bytes": Path(fp32).stat().st_size,
            "peak_memory_b1_bytes": memory.get(label),
            "speedup_b1": one and one.speedup,
            "speedup_b1_low": one and one.speedup_low,
            "speedup_b1_high": one and one.speedup_high,
            "speedup_short": short and short.speedup,
        }
        results.record("06", TEXT_ENCODER, label, metrics, options={"threads": 2}, path=path)
    for label, s in resnet.items():
        c, p = s.latency, s.parity
        metrics = {
            "accuracy": p.candidate_accuracy,
            "fp32_accuracy": p.reference_accuracy,
            "agreement": p.agreement,
            "size_ratio": s.size_ratio,
            "images": p.n,
            "speedup_b64": c.speedup,
            "speedup_b64_low": c.speedup_low,
            "speedup_b64_high": c.speedup_high,
        }
        results.record("06", RESNET18, label, metrics, options={"threads": 2}, path=s.path)
