"""Lesson 03's sentences about its results, and the figures each section's check cell measures.

Each sentence here is written once in the lesson's markdown, with `<!-- claim: name -->` after it.
"""

from __future__ import annotations

from typing import Any

from ..claims import (
    NOT_SATURATING,
    SATURATING,
    X86,
    Book,
    a_quarter,
    about,
    change,
    faster,
    interval,
    noise,
    several_times,
    slower,
    speed,
)

book = Book("03")


# 1. Pre-process first ---------------------------------------------------------------------------
@book.figures("1")
def _(graphs: tuple, same: Any, outcome: dict) -> dict:
    export_summary, pre_summary, step_rows = graphs  # the course's export, pre-processed, the legacy steps
    legacy, optimized = step_rows[0], step_rows[-1]
    return {
        "export_ops": sum(export_summary["ops"].values()),
        "ops_changed": sum(
            abs(export_summary["ops"].get(op, 0) - pre_summary["ops"].get(op, 0))
            for op in {*export_summary["ops"], *pre_summary["ops"]}
        ),
        "export_shapes": export_summary["shapes"],
        "pre_shapes": pre_summary["shapes"],
        "legacy_batchnorms": legacy["BatchNorm"],
        "batchnorms_left": optimized["BatchNorm"],
        "legacy_max_diff": float(same.max()),
        "default_written": outcome["default"].startswith("written"),
        "skip_written": outcome["skip_symbolic_shape=True"].startswith("written"),
    }


@book.sentence(
    "1",
    "no-node-changed",
    "Pre-processing changes no node of the course's export",
    shows="{ops_changed} of {export_ops} nodes changed",
    depends="runtime",
)
def _(f):
    return f["ops_changed"] == 0


@book.sentence(
    "1",
    "fewer-shapes",
    "Pre-processing leaves fewer tensors of the course's export with a known shape",
    shows="{export_shapes} before, {pre_shapes} after",
    depends="runtime",
)
def _(f):
    return f["pre_shapes"] < f["export_shapes"]


@book.sentence(
    "1",
    "batchnorm-folded",
    "The optimization step removes every BatchNorm of the legacy export",
    shows="{legacy_batchnorms} before, {batchnorms_left} after",
    depends="runtime",
)
def _(f):
    return f["legacy_batchnorms"] > 0 and f["batchnorms_left"] == 0


@book.sentence(
    "1",
    "same-logits",
    "The two pre-processed models' logits differ by float rounding only",
    shows="max |difference| {legacy_max_diff:.1e}",
    depends="runtime",
)
def _(f):
    return f["legacy_max_diff"] < 1e-3


@book.sentence(
    "1", "custom-op-fails", "quant_pre_process fails on the custom op by default", depends="runtime"
)
def _(f):
    return not f["default_written"]


@book.sentence("1", "skip-gets-past", "skip_symbolic_shape=True gets past it", depends="runtime")
def _(f):
    return f["skip_written"]


# 3. quantize_static in QDQ format ------------------------------------------------------------------
@book.figures("3")
def _(scored: dict, ran: dict) -> dict:
    u8, rr, s8 = scored["QDQ U8S8"], scored["QDQ U8S8, reduce_range"], scored["QDQ S8S8"]
    k_u8, k_s8 = ran["QDQ U8S8"], ran["QDQ S8S8"]
    return {
        "smallest_size": min(s.size_ratio for s in scored.values()),
        "largest_size": max(s.size_ratio for s in scored.values()),
        "u8s8_b64": speed(u8.latency),
        "u8s8_rr_b64": speed(rr.latency),
        "s8s8_b64": speed(s8.latency),
        "u8s8_speedup_b64": u8.speedup,
        "u8s8_rr_speedup_b64": rr.speedup,
        "s8s8_speedup_b64": s8.speedup,
        "u8s8_agreement": 100 * u8.parity.agreement,
        "u8s8_rr_agreement": 100 * rr.parity.agreement,
        "s8s8_agreement": 100 * s8.parity.agreement,
        "rr_gain": change(rr.parity.compare(u8.parity, "agreement")),
        "u8s8_integer_ops": k_u8.integer_count,
        "s8s8_integer_ops": k_s8.integer_count,
        "compute_ops": k_u8.compute_count,
    }


@book.sentence(
    "3",
    "quarter-size",
    "Each of the three files is about a quarter of fp32's size",
    shows="{smallest_size:.3f} to {largest_size:.3f} of fp32",
    depends="runtime",
)
def _(f):
    return a_quarter(f["smallest_size"]) and a_quarter(f["largest_size"])


@book.sentence(
    "3",
    "u8s8-faster",
    "U8S8 runs faster than fp32 at batch 64",
    shows="{u8s8_b64}",
    scope=X86,
    depends="speed",
)
def _(f):
    return faster(f["u8s8_b64"])


@book.sentence(
    "3",
    "s8s8-slower",
    "S8S8 runs slower than fp32 at batch 64",
    shows="{s8s8_b64}",
    scope=X86,
    depends="speed",
)
def _(f):
    return slower(f["s8s8_b64"])


@book.sentence(
    "3",
    "rr-keeps-agreement",
    "reduce_range keeps agreement that full-range weights lose",
    shows="{rr_gain}",
    scope=SATURATING,
    depends=("cpu", "weights"),
)
def _(f):
    return not noise(f["rr_gain"]) and f["rr_gain"].value > 0


@book.sentence(
    "3",
    "rr-no-gain",
    "reduce_range does not raise agreement",
    shows="{rr_gain}",
    scope=NOT_SATURATING,
    depends=("cpu", "weights"),
)
def _(f):
    return noise(f["rr_gain"]) or f["rr_gain"].value < 0


@book.sentence(
    "3",
    "u8s8-all-integer",
    "Every U8S8 compute op runs on an integer kernel",
    shows="{u8s8_integer_ops} of {compute_ops}",
    scope=X86,
    depends=("cpu", "runtime"),
)
def _(f):
    return f["u8s8_integer_ops"] == f["compute_ops"]


@book.sentence(
    "3",
    "s8s8-half-integer",
    "About half of S8S8's compute ops run on integer kernels",
    shows="{s8s8_integer_ops} of {compute_ops}",
    scope=X86,
    depends=("cpu", "runtime"),
)
def _(f):
    return about(f["s8s8_integer_ops"] / f["compute_ops"], 0.5)


# 4. The silent killer --------------------------------------------------------------------------------
@book.figures("4")
def _(trap: dict, narrow_scored: dict, narrow_share: dict) -> dict:
    right, wrong = trap["preprocess"], trap["not_normalised"]
    low, high = wrong.parity.accuracy_change_interval()
    sandals, drawn = narrow_scored["sandals only"], narrow_scored["first images of the pool"]
    return {
        "trap_not_normalised_accuracy": 100 * wrong.parity.candidate_accuracy,
        "trap_production_accuracy": 100 * right.parity.candidate_accuracy,
        "not_normalised_cost": interval(
            100 * (wrong.parity.candidate_accuracy - wrong.parity.reference_accuracy), low, high, "points"
        ),
        "augmented_change": change(trap["augmented"].parity.compare(right.parity, "agreement")),
        "narrow_share": narrow_share["sandals only"],
        "drawn_share": narrow_share["first images of the pool"],
        "narrow_change": change(sandals.parity.compare(drawn.parity)),
    }


@book.sentence(
    "4",
    "unnormalised-costs",
    "Calibrating without normalisation costs accuracy",
    shows="{not_normalised_cost}",
    depends=("weights", "data"),
)
def _(f):
    return f["not_normalised_cost"].high < 0


@book.sentence(
    "4",
    "augmented-small",
    "Augmented calibration moves agreement by less than a point either way",
    shows="{augmented_change}",
    depends=("weights", "data"),
)
def _(f):
    return f["augmented_change"].low > -1 and f["augmented_change"].high < 1


@book.sentence(
    "4",
    "one-class-saturates",
    "Calibrating on one class lets more real values saturate",
    shows="{narrow_share:.4%} against {drawn_share:.4%}",
    depends=("weights", "data"),
)
def _(f):
    return f["narrow_share"] > f["drawn_share"]


@book.sentence(
    "4",
    "one-class-noise",
    "Calibrating on one class moves agreement by no more than the noise",
    shows="{narrow_change}",
    depends=("weights", "data", "cpu"),
)
def _(f):
    return noise(f["narrow_change"])


# 5. Dynamic or static --------------------------------------------------------------------------------
@book.figures("5")
def _(dynamic: Any, prod: Any, production: str) -> dict:
    d, s = dynamic.latency, prod.latency
    return {
        "production": production,
        "dynamic_b64": speed(d),
        "static_b64": speed(s),
        "dynamic_speedup_b64": d.speedup,
        "static_speedup_b64": s.speedup,
        # static's speed over dynamic's, and fp32's over dynamic's, with the ends of the two intervals
        "static_over_dynamic": interval(
            s.speedup / d.speedup, s.speedup_low / d.speedup_high, s.speedup_high / d.speedup_low, "x"
        ),
        "fp32_over_dynamic": interval(1 / d.speedup, 1 / d.speedup_high, 1 / d.speedup_low, "x"),
    }


@book.sentence(
    "5",
    "static-several-times-dynamic",
    "Static INT8 runs several times faster than dynamic INT8 on the ResNet18",
    shows="{static_over_dynamic}",
    depends="speed",
)
def _(f):
    return several_times(f["static_over_dynamic"])


@book.sentence(
    "5",
    "dynamic-several-times-slower",
    "Dynamic INT8 runs several times slower than fp32 on the ResNet18",
    shows="fp32 {fp32_over_dynamic} as fast",
    depends="speed",
)
def _(f):
    return several_times(f["fp32_over_dynamic"])


@book.end
def _(named: dict) -> None:
    """One entry per ResNet18 variant in the course's results store, for the report and lesson 06's table."""
    from course_machinery import results

    for name, s in named.items():
        options = {key: getattr(value, "name", value) for key, value in s.options.items()}
        metrics = {
            "accuracy": s.parity.candidate_accuracy,
            "fp32_accuracy": s.parity.reference_accuracy,
            "agreement": s.parity.agreement,
            "size_ratio": s.size_ratio,
            "speedup_b64": s.speedup,
        }
        results.record("03", "fashion_resnet18", name, metrics, options=options, path=s.path)
