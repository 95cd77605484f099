"""Lesson 05's sentences about its results, and the figures each section's check cell measures.

Each sentence here is written once in the lesson's markdown, with `<!-- claim: name -->` after it.
"""

from __future__ import annotations

import os
from typing import Any

from ..claims import (
    ARM,
    NOT_SATURATING,
    SATURATING,
    X86,
    Book,
    Interval,
    a_quarter,
    about,
    all_of,
    below,
    change,
    far,
    faster,
    most,
    noise,
    slower,
    speed,
)

book = Book("05")

# The variants of course_machinery.variants.RESNET_VARIANTS, by the short key their figures carry.
KEYS = {
    "dynamic (QUInt8)": "dynamic",
    "static U8S8 per-channel": "u8s8_pc",
    "static U8S8 per-channel reduce_range": "u8s8_pc_rr",
    "static U8S8 per-tensor": "u8s8_pt",
    "static S8S8 per-channel": "s8s8_pc",
    "static S8S8 per-channel reduce_range": "s8s8_pc_rr",
    "QOperator U8S8 per-channel": "qop_u8s8_pc",
}
U8S8 = [k for n, k in KEYS.items() if "U8S8" in n]
S8S8 = [k for n, k in KEYS.items() if "S8S8" in n]
NCHWC = "com.microsoft.nchwc"


def _ends(x: Any) -> tuple[float, float]:
    return (x.low, x.high) if isinstance(x, Interval) else (float(x), float(x))


def _above(a: Any, b: Any) -> bool | None:
    """a's speed clearly above b's: True when a's interval lies wholly above b's, False when wholly
    below, None when they overlap."""
    (a_low, a_high), (b_low, b_high) = _ends(a), _ends(b)
    if a_low > b_high:
        return True
    if b_low > a_high:
        return False
    return None


# 3. What each graph runs ----------------------------------------------------------------------------
@book.figures("3")
def _(ran: dict, floats: list, shared: list, weights: dict, layouts: dict) -> dict:
    u8s8 = [n for n in ran if "U8S8" in n]
    s8s8 = [n for n in ran if "S8S8" in n]
    float_share = [
        ran[n].float_compute.get("Conv", 0)
        / max(ran[n].float_compute.get("Conv", 0) + ran[n].integer.get("QLinearConv", 0), 1)
        for n in s8s8
    ]
    names = lambda nodes: {n.name for n in nodes}  # noqa: E731
    return {
        "u8s8_full": sum(ran[n].integer_count == ran[n].compute_count for n in u8s8),
        "u8s8_files": len(u8s8),
        "int8_full": sum(ran[n].integer_count == ran[n].compute_count for n in ran if n != "fp32"),
        "int8_files": len(ran) - 1,
        "s8s8_qlinear": min(ran[n].integer.get("QLinearConv", 0) for n in s8s8),
        "s8s8_convs": ran[s8s8[0]].compute_count - 1,  # all but the final Gemm
        "dynamic_integer_ops": ran["dynamic (QUInt8)"].integer_count,
        "compute_ops": ran["dynamic (QUInt8)"].compute_count,
        "s8s8_float_ops": ran[s8s8[0]].compute_count - ran[s8s8[0]].integer_count,
        "s8s8_float_share_low": min(float_share),
        "s8s8_float_share_high": max(float_share),
        "float_convs": len(floats),
        "float_not_after_fan_out": len(names(floats) ^ names(shared)),
        "float_weights_dequantized": int(weights.get("DequantizeLinear", 0)),
        "s8s8_nchwc": int(layouts["S8S8"].get(NCHWC, 0)),
        "fp32_nchwc": int(layouts["fp32"].get(NCHWC, 0)),
        "fp32_convs": int(sum(layouts["fp32"].values())),
    }


@book.sentence(
    "3",
    "u8s8-all-integer",
    "Every compute op of the U8S8 files and of the dynamic file runs on an integer kernel",
    shows="{u8s8_full} of {u8s8_files} U8S8 files; dynamic {dynamic_integer_ops} of {compute_ops}",
    scope=X86,
    depends=("cpu", "runtime"),
)
def _(f):
    return f["u8s8_full"] == f["u8s8_files"] and f["dynamic_integer_ops"] == f["compute_ops"]


@book.sentence(
    "3",
    "arm-all-integer",
    "On ARM every compute op of every INT8 file, the S8S8 files and the dynamic file included, runs on "
    "an integer kernel",
    shows="{int8_full} of {int8_files} INT8 files; S8S8: {s8s8_qlinear} of {s8s8_convs} convolutions as QLinearConv",
    scope=ARM,
    depends=("cpu", "runtime"),
)
def _(f):
    return f["int8_full"] == f["int8_files"]


@book.sentence(
    "3",
    "s8s8-half-float",
    "The S8S8 files run about half of their convolutions in float",
    shows="{s8s8_float_share_low:.0%} to {s8s8_float_share_high:.0%} of their convolutions",
    scope=X86,
    depends=("cpu", "runtime"),
)
def _(f):
    return about(f["s8s8_float_share_low"], 0.5) and about(f["s8s8_float_share_high"], 0.5)


@book.sentence(
    "3",
    "float-after-fan-out",
    "The S8S8 file's float convolutions are exactly those whose input QuantizeLinear feeds two nodes or more",
    shows="{float_convs} float, {float_not_after_fan_out} not after a shared QuantizeLinear",
    scope=X86,
    depends=("cpu", "runtime"),
)
def _(f):
    return f["float_convs"] > 0 and f["float_not_after_fan_out"] == 0


@book.sentence(
    "3",
    "float-unpacked",
    "Each float convolution of the S8S8 file reads its weight from a DequantizeLinear and runs without the "
    "NCHWc layout that fp32's convolutions run in",
    shows="weights from DequantizeLinear: {float_weights_dequantized} of {float_convs}; NCHWc: S8S8 "
    "{s8s8_nchwc}, fp32 {fp32_nchwc} of {fp32_convs}",
    scope=X86,
    depends=("cpu", "runtime"),
)
def _(f):
    return (
        f["float_weights_dequantized"] == f["float_convs"] > 0
        and f["s8s8_nchwc"] == 0
        and f["fp32_nchwc"] == f["fp32_convs"] > 0
    )


# 4. Every variant side by side: accuracy, memory, speed ---------------------------------------------
@book.figures("4")
def _(paths: dict, parities: dict, memory: dict | None, timed: dict | None) -> dict:
    """`timed`: {batch: {variant: LatencyComparison against fp32}}, as compare_in_turn returns them;
    None (and `memory` None) where nothing could be timed (the emulated ARM CPUs)."""
    names = [n for n in paths if n != "fp32"]
    changes = [parities[n].compare(parities["fp32"], "accuracy") for n in names]
    widths = [100 * (high - low) for low, high in (parities[n].accuracy_interval() for n in paths)]
    fp32_bytes = os.path.getsize(paths["fp32"])
    from course_machinery.variants import production_resnet_variant

    best = production_resnet_variant()
    out = {
        "accuracy_change_low": min(c.low for c in changes),
        "accuracy_change_high": max(c.high for c in changes),
        "widest_paired": max(c.high - c.low for c in changes),
        "narrowest_accuracy": min(widths),
        "smallest_size": min(os.path.getsize(paths[n]) / fp32_bytes for n in names),
        "largest_size": max(os.path.getsize(paths[n]) / fp32_bytes for n in names),
    }
    if memory is not None:
        out |= {
            "fp32_peak_mb": memory["fp32"] / 1e6,
            "int8_peak_mb": max(memory[n] for n in names) / 1e6,
            "fp32_over_int8_peak": memory["fp32"] / max(memory[n] for n in names),
        }
    if timed is None:
        return out
    # lesson 00 quotes these two
    out |= {"lever_resnet_b64": speed(timed[64][best]), "dynamic_b64": speed(timed[64]["dynamic (QUInt8)"])}
    for batch in (1, 64):
        for name in names:
            out[f"b{batch}_{KEYS[name]}"] = speed(timed[batch][name])
    return out


@book.sentence(
    "4",
    "accuracy-within-a-point",
    "Every variant's accuracy stays within a point of fp32's (its paired interval inside ±1 point)",
    shows="paired changes between {accuracy_change_low:+.2f} and {accuracy_change_high:+.2f} points",
    depends=("weights", "cpu"),
)
def _(f):
    return f["accuracy_change_low"] > -1 and f["accuracy_change_high"] < 1


@book.sentence(
    "4",
    "paired-narrower",
    "The paired interval of a change from fp32 is narrower than one accuracy's own interval",
    shows="widest paired {widest_paired:.2f} points, narrowest accuracy interval {narrowest_accuracy:.2f}",
    depends=("weights", "data"),
)
def _(f):
    return f["widest_paired"] < f["narrowest_accuracy"]


@book.sentence(
    "4",
    "quarter-size",
    "Every INT8 file is about a quarter of fp32's size",
    shows="{smallest_size:.3f} to {largest_size:.3f} of fp32",
    depends="runtime",
)
def _(f):
    return a_quarter(f["smallest_size"]) and a_quarter(f["largest_size"])


@book.sentence(
    "4",
    "memory-far-less",
    "Every INT8 file needs far less peak memory than fp32 to load and run a batch of 64",
    shows="fp32 {fp32_peak_mb:.0f} MB, INT8 at most {int8_peak_mb:.0f} MB: {fp32_over_int8_peak:.1f}x",
    depends=("cpu", "runtime"),
)
def _(f):
    return far(f["fp32_over_int8_peak"])


def _b64(f, keys: list[str]) -> list:
    return [f[f"b64_{k}"] for k in keys]


@book.sentence(
    "4",
    "one-ranking",
    "At batch 64 the variants fall in one order: every U8S8 file faster than fp32, the S8S8 files slower, "
    "the dynamic file slowest of all",
    shows="U8S8 {b64_u8s8_pc}, S8S8 {b64_s8s8_pc}, dynamic {b64_dynamic}",
    scope=X86,
    depends="speed",
)
def _(f):
    dynamic = f["b64_dynamic"]
    others = [f[f"b64_{k}"] for k in KEYS.values() if k != "dynamic"]
    return all_of(
        all_of(faster(r) for r in _b64(f, U8S8)),
        all_of(slower(r) for r in _b64(f, S8S8)),
        all_of(_above(r, dynamic) for r in others),
    )


@book.sentence(
    "4",
    "dynamic-below-half",
    "The dynamic file runs at less than half fp32's speed at batch 64",
    shows="{b64_dynamic}",
    depends="speed",
)
def _(f):
    return below(f["b64_dynamic"], 0.5)


@book.sentence(
    "4",
    "batch-1-sides",
    "At batch 1 every U8S8 file runs faster than fp32, and the S8S8 and dynamic files slower",
    shows="U8S8 {b1_u8s8_pc}, S8S8 {b1_s8s8_pc}, dynamic {b1_dynamic}",
    scope=X86,
    depends="speed",
)
def _(f):
    return all_of(
        all_of(faster(f[f"b1_{k}"]) for k in U8S8),
        all_of(slower(f[f"b1_{k}"]) for k in [*S8S8, "dynamic"]),
    )


@book.sentence(
    "4",
    "u8s8-about-one-and-a-half",
    "At batch 64 the U8S8 per-channel file runs at about one and a half times fp32's speed",
    shows="{b64_u8s8_pc}",
    scope=X86,
    depends="speed",
)
def _(f):
    low, high = _ends(f["b64_u8s8_pc"])
    inside = about(low, 1.5) and about(high, 1.5)
    # beyond one edge of "about": neither end is about 1.5, and the interval does not reach across it
    outside = not about(low, 1.5) and not about(high, 1.5) and not low <= 1.5 <= high
    return all_of(inside or None, not outside)


# 5. U8S8 saturation -------------------------------------------------------------------------------------
@book.figures("5")
def _(sat: dict, first: str, parities: dict) -> dict:
    full = sum(s for (_, r), (s, _) in sat.items() if not r)
    total = sum(p for (_, r), (_, p) in sat.items() if not r)
    pc, rr = "static U8S8 per-channel", "static U8S8 per-channel reduce_range"
    return {
        "sat_pairs_full": full,
        "sat_pairs_total": total,
        "sat_pairs_first": sat[first, False][0],
        "sat_pairs_rr": sum(s for (_, r), (s, _) in sat.items() if r),
        "agreement_full": 100 * parities[pc].agreement,
        "agreement_rr": 100 * parities[rr].agreement,
        "full_minus_rr": change(parities[pc].compare(parities[rr], "agreement")),
    }


@book.sentence(
    "5",
    "some-saturate",
    "With full-range weights some pair sums saturate, most of them in the first convolution; with "
    "reduce_range none",
    shows="{sat_pairs_full:,} of {sat_pairs_total:,}, {sat_pairs_first:,} in the first convolution; "
    "{sat_pairs_rr:,} with reduce_range",
    depends=("weights", "data"),
)
def _(f):
    full = f["sat_pairs_full"]
    return full > 0 and most(f["sat_pairs_first"] / full) and f["sat_pairs_rr"] == 0


@book.sentence(
    "5",
    "saturation-costs-agreement",
    "Where U8S8 can saturate, the full-range file agrees with fp32 less than the reduce_range file, beyond "
    "the noise",
    shows="{full_minus_rr}",
    scope=SATURATING,
    depends=("cpu", "weights"),
)
def _(f):
    return not noise(f["full_minus_rr"]) and f["full_minus_rr"].value < 0


@book.sentence(
    "5",
    "full-range-safe",
    "Where U8S8 cannot saturate, the full-range file agrees with fp32 at least as well as the reduce_range file",
    shows="{full_minus_rr}",
    scope=NOT_SATURATING,
    depends=("cpu", "weights"),
)
def _(f):
    return noise(f["full_minus_rr"]) or f["full_minus_rr"].value > 0


@book.end
def _(paths: dict, timed: dict, parities: dict, memory: dict, threads: int) -> None:
    """Every INT8 variant against fp32 in the course's results store, for the report."""
    from course_machinery import results

    for name in list(paths)[1:]:
        c = timed[64][name]
        metrics = {
            "speedup": c.speedup,
            "speedup_low": c.speedup_low,
            "speedup_high": c.speedup_high,
            "speedup_b1": timed[1][name].speedup,
            "speedup_b64": c.speedup,
            "agreement": parities[name].agreement,
            "accuracy": parities[name].candidate_accuracy,
            "peak_memory_bytes": memory[name],
        }
        results.record(
            lesson="05",
            model="fashion_resnet18",
            variant=name,
            path=paths[name],
            metrics=metrics,
            options={"threads": threads},
        )
