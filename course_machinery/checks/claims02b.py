"""Lesson 02b's sentences about its results, and the figures each section's check cell measures.

Each sentence here is written once in the lesson's markdown, with `<!-- claim: name -->` after it.
"""

from __future__ import annotations

from typing import Any

from ..claims import (
    Book,
    a_quarter,
    about,
    interval,
    nearly_all,
    noise,
    several_times,
    slower,
    speed,
)

book = Book("02b")

PER_RUN_OPS = ("DynamicQuantizeLinear", "Cast", "Mul", "Add")  # quantize, then rescale and add the bias
PER_CHANNEL = "per_channel (lesson 02)"  # the options table's first row, lesson 02's file


# 1. ResNet18: dynamic quantization on a CNN ----------------------------------------------------------
@book.figures("1")
def _(rb: Any, ra: Any, ran: Any, parity: Any, cmp: Any, prof: dict) -> dict:
    fp32, int8 = prof["fp32"], prof["int8"]
    conv_ms = sum(ms for op, ms in fp32.ms_per_run.items() if "Conv" in op)  # Conv, or FusedConv
    convinteger_ms = int8.ms_per_run.get("ConvInteger", 0.0)
    low, high = parity.accuracy_change_interval()
    change = 100 * (parity.candidate_accuracy - parity.reference_accuracy)
    c = cmp
    return {
        "resnet_integer_ops": ran.integer_count,
        "resnet_compute_ops": ran.compute_count,
        "resnet_size_share": ra.file_bytes / rb.file_bytes,
        "resnet_agreement": parity.agreement,
        "fp32_accuracy": parity.reference_accuracy,
        "int8_accuracy": parity.candidate_accuracy,
        "resnet_accuracy_change": interval(change, low, high, "points"),
        "resnet_b32": speed(c),
        "resnet_speedup_b32": c.speedup,
        "fp32_over_int8_b32": interval(1 / c.speedup, 1 / c.speedup_high, 1 / c.speedup_low, "x"),
        "resnet_convinteger_ms": convinteger_ms,
        "resnet_conv_ms": conv_ms,
        "convinteger_share": convinteger_ms / int8.total_ms,
        "convinteger_over_conv": convinteger_ms / conv_ms,
        "resnet_overhead_share": sum(int8.ms_per_run.get(op, 0.0) for op in PER_RUN_OPS) / int8.total_ms,
    }


@book.sentence(
    "1",
    "resnet-all-integer",
    "The session runs every compute op of the dynamic ResNet18 on an integer kernel",
    shows="{resnet_integer_ops} of {resnet_compute_ops}",
    depends=("cpu", "runtime"),
)
def _(f):
    return f["resnet_integer_ops"] == f["resnet_compute_ops"]


@book.sentence(
    "1",
    "resnet-quarter-size",
    "The dynamic ResNet18's file is about a quarter of fp32's size",
    shows="{resnet_size_share:.3f} of fp32",
    depends="runtime",
)
def _(f):
    return a_quarter(f["resnet_size_share"])


@book.sentence(
    "1",
    "resnet-agrees",
    "Dynamic INT8 gives the same answer as fp32 on nearly every validation image",
    shows="agreement {resnet_agreement:.2%}",
    depends=("weights", "cpu"),
)
def _(f):
    return nearly_all(f["resnet_agreement"])


@book.sentence(
    "1",
    "resnet-accuracy-noise",
    "Its accuracy moves by no more than the noise",
    shows="{resnet_accuracy_change}",
    depends=("weights", "cpu"),
)
def _(f):
    return noise(f["resnet_accuracy_change"])


@book.sentence(
    "1",
    "resnet-several-times-slower",
    "The dynamic ResNet18 runs several times slower than fp32",
    shows="fp32 {fp32_over_int8_b32} as fast at batch 32",
    depends="speed",
)
def _(f):
    return several_times(f["fp32_over_int8_b32"])


@book.sentence(
    "1",
    "convinteger-nearly-all",
    "Nearly all of the INT8 run's kernel time is in ConvInteger",
    shows="{convinteger_share:.0%}",
    depends="speed",
)
def _(f):
    return nearly_all(f["convinteger_share"])


@book.sentence(
    "1",
    "convinteger-several-times",
    "ConvInteger takes several times as long as fp32's Conv kernels",
    shows="{convinteger_over_conv:.1f}x ({resnet_convinteger_ms:.1f} against {resnet_conv_ms:.1f} ms per run)",
    depends="speed",
)
def _(f):
    return several_times(f["convinteger_over_conv"])


@book.sentence(
    "1",
    "per-run-under-tenth",
    "DynamicQuantizeLinear, Cast, Mul and Add take under a tenth of the INT8 run's kernel time",
    shows="{resnet_overhead_share:.0%}",
    depends="speed",
)
def _(f):
    return f["resnet_overhead_share"] < 0.1


# 2. The options that matter ----------------------------------------------------------------------------
def _paired(baseline: Any, candidate: Any) -> dict:
    """The candidate's speed over the baseline's (baseline time / candidate time), from two models
    timed in the same rounds, with its paired-bootstrap interval."""
    from course_lib.measure import bootstrap_ratio_interval

    low, high = bootstrap_ratio_interval(baseline.samples_ms, candidate.samples_ms)
    return interval(baseline.median_ms / candidate.median_ms, low, high, "x")


@book.figures("2")
def _(option_values: dict, b16: dict) -> dict:
    rr, ffn, emb = (label for label in option_values if label != PER_CHANNEL)
    lat = {label: b16[label].latency[label] for label in option_values}
    cos = {label: v["parity"]["cos_min"] for label, v in option_values.items()}
    grown = (
        option_values[emb]["path"].stat().st_size - option_values[PER_CHANNEL]["path"].stat().st_size
    ) / 1e6
    return {
        "te_cos_min_pc": cos[PER_CHANNEL],
        "rr_cos_min": cos[rr],
        "ffn_out_cos_min": cos[ffn],
        "embed_float_cos_min": cos[emb],
        "pc_b16": speed(b16[PER_CHANNEL]),
        "te_speedup_b16": b16[PER_CHANNEL].speedup,
        "rr_speedup_b16": b16[rr].speedup,
        "ffn_out_speedup_b16": b16[ffn].speedup,
        "embed_float_speedup_b16": b16[emb].speedup,
        "rr_vs_pc": _paired(lat[PER_CHANNEL], lat[rr]),
        "ffn_vs_pc": _paired(lat[PER_CHANNEL], lat[ffn]),
        "embed_grown_mb": grown,
    }


@book.sentence(
    "2",
    "rr-lowers-cosine",
    "reduce_range lowers the worst cosine",
    shows="{rr_cos_min:.4f} against per_channel's {te_cos_min_pc:.4f}",
    depends=("cpu", "data"),
)
def _(f):
    return f["rr_cos_min"] < f["te_cos_min_pc"]


@book.sentence(
    "2",
    "rr-about-same-speed",
    "reduce_range runs at about per_channel's speed (timed in turn at batch 16)",
    shows="{rr_vs_pc} per_channel's speed",
    depends="speed",
)
def _(f):
    return about(f["rr_vs_pc"], 1.0)


@book.sentence(
    "2",
    "ffn-raises-cosine",
    "Keeping the FFN outputs in float raises the worst cosine",
    shows="{ffn_out_cos_min:.4f} against per_channel's {te_cos_min_pc:.4f}",
    depends=("cpu", "data"),
)
def _(f):
    return f["ffn_out_cos_min"] > f["te_cos_min_pc"]


@book.sentence(
    "2",
    "ffn-costs-speed",
    "Keeping the FFN outputs in float costs speed (timed in turn with per_channel at batch 16)",
    shows="{ffn_vs_pc} per_channel's speed",
    depends="speed",
)
def _(f):
    return slower(f["ffn_vs_pc"])


@book.sentence(
    "2",
    "embed-grows-file",
    "Keeping the embedding in float grows the file",
    shows="{embed_grown_mb:+.1f} MB",
    depends="runtime",
)
def _(f):
    return f["embed_grown_mb"] > 0


@book.sentence(
    "2",
    "embed-barely-moves",
    "Keeping the embedding in float barely moves the worst cosine",
    shows="{embed_float_cos_min:.4f} against per_channel's {te_cos_min_pc:.4f}",
    depends=("cpu", "data"),
)
def _(f):
    return abs(f["embed_float_cos_min"] - f["te_cos_min_pc"]) < 0.003


# 3. Two traps -------------------------------------------------------------------------------------------
@book.figures("3")
def _(gemms: int, excluded: dict, shared_facts: dict) -> dict:
    fp32, int8 = shared_facts["fp32"], shared_facts["int8"]
    return {
        "gemms": gemms,
        "typo_integer": excluded["typo"].get("MatMulInteger", 0),
        "gemm_name_integer": excluded["gemm_name"].get("MatMulInteger", 0),
        "checked_integer": excluded["checked"].get("MatMulInteger", 0),
        "checked_float": excluded["checked"].get("MatMul", 0),
        "shared_fp32_bytes": fp32.file_bytes,
        "shared_int8_bytes": int8.file_bytes,
        "shared_fp32_float": fp32.initializer_bytes.get("float32", 0),
        "shared_int8_float": int8.initializer_bytes.get("float32", 0),
    }


@book.sentence(
    "3",
    "missed-names",
    "Both missed names leave every layer quantized; the checked names keep one float",
    shows="MatMulInteger: typo {typo_integer}, Gemm's name {gemm_name_integer}, checked {checked_integer} "
    "(and {checked_float} float MatMul) of {gemms} layers",
    depends="runtime",
)
def _(f):
    missed = f["typo_integer"] == f["gemm_name_integer"] == f["gemms"]
    return missed and f["checked_integer"] == f["gemms"] - 1 and f["checked_float"] == 1


@book.sentence(
    "3",
    "shared-both-copies",
    "With its first layer in float, the file holds both copies of the shared weight and is larger than fp32's",
    shows="{shared_int8_bytes:,} bytes against {shared_fp32_bytes:,}; float32 {shared_int8_float:,} "
    "against {shared_fp32_float:,}",
    depends="runtime",
)
def _(f):
    both = f["shared_int8_float"] >= f["shared_fp32_float"]
    return both and f["shared_int8_bytes"] > f["shared_fp32_bytes"]


@book.end
def _(resnet_int8: Any, options: dict, option_values: dict) -> None:
    """The course's results store: the ResNet18 and the text encoder's options, for the report and
    lesson 06's table."""
    from course_machinery import results

    from ..verdicts import figures

    f = figures("02b")
    resnet_metrics = {
        "speedup_b32": f["resnet_speedup_b32"],
        "fp32_accuracy": f["fp32_accuracy"],
        "int8_accuracy": f["int8_accuracy"],
    }
    results.record(
        "02b", "fashion_resnet18", "dynamic int8", resnet_metrics, {"weight_type": "QUInt8"}, resnet_int8
    )
    speeds = dict(
        zip(options, ("rr_speedup_b16", "ffn_out_speedup_b16", "embed_float_speedup_b16"), strict=True)
    )
    for label, kwargs in options.items():
        v, settings = option_values[label], {k: str(value) for k, value in kwargs.items()}
        metrics = {**v["parity"], "speedup_vs_optimized_b16": f[speeds[label]]}
        results.record("02b", "text_encoder", label, metrics, settings, v["path"])
