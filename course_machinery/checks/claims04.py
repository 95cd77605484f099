"""Lesson 04's sentences about its results, and the figures each section's check cell measures.

Each sentence here is written once in the lesson's markdown, with `<!-- claim: name -->` after it.
"""

from __future__ import annotations

import math
from typing import Any

from ..claims import (
    X86,
    Book,
    all_of,
    at_least,
    below,
    change,
    far,
    faster,
    interval,
    noise,
    not_measured,
    several_times,
    slower,
    speed,
)

book = Book("04")
WEAK = "weak calibration"


# 2. The parity check -------------------------------------------------------------------------------
def _unpaired_halfwidth(p: Any) -> float:
    """95 % half-width, in points, of candidate minus reference accuracy as if the two came from
    different images: both accuracies' variances added."""
    pr, pc, n = p.reference_accuracy, p.candidate_accuracy, p.labelled
    return 100 * 1.959964 * math.sqrt((pr * (1 - pr) + pc * (1 - pc)) / n)


@book.figures("2")
def _(parity: dict, verdicts: dict, main: str) -> dict:
    p, weak = parity[main], parity[WEAK]
    low, high = p.accuracy_change_interval()
    return {
        "production_choice": main,
        "variants": len(parity),
        "allclose_passed": sum(bool(q.allclose) for q in parity.values()),
        "main_within": p.within_atol,
        "weak_within": weak.within_atol,
        "main_agreement_interval": interval(p.agreement, *p.agreement_interval(), "%"),
        "main_agreement": 100 * p.agreement,
        "weak_agreement": 100 * weak.agreement,
        "weak_vs_main": change(weak.compare(p)),
        "unpaired_halfwidth": _unpaired_halfwidth(p),
        "paired_halfwidth": (high - low) / 2,
        "main_passes": verdicts[main].passes,
        "main_drop": verdicts[main].drop_points,
        "weak_passes": verdicts[WEAK].passes,
        "weak_drop": verdicts[WEAK].drop_points,
        "per_tensor_vs_main": change(parity["per-tensor"].compare(p)),
    }


@book.sentence(
    "2",
    "no-whole-set-allclose",
    "No variant passes a whole-set allclose at atol=5e-2",
    shows="{allclose_passed} of {variants} pass",
    depends=("weights", "cpu"),
)
def _(f):
    return f["allclose_passed"] == 0


@book.sentence(
    "2",
    "within-atol-far",
    "The production choice keeps far more test images within atol than weak calibration",
    shows="{main_within:.1%} against {weak_within:.1%}",
    depends=("weights", "cpu"),
)
def _(f):
    return far(f["main_within"] / max(f["weak_within"], 1e-9))


@book.sentence(
    "2",
    "main-agrees-above-99",
    "The production choice agrees with fp32 on more than 99 % of the test images",
    shows="{main_agreement_interval}",
    depends=("weights", "cpu"),
)
def _(f):
    return at_least(f["main_agreement_interval"], 0.99)


@book.sentence(
    "2",
    "weak-agrees-less",
    "Weak calibration agrees with fp32 on clearly fewer test images than the production choice",
    shows="{weak_vs_main}",
    depends=("weights", "cpu"),
)
def _(f):
    return below(f["weak_vs_main"], 0)


@book.sentence(
    "2",
    "pairing-several-times",
    "On the same test images, pairing narrows the interval of the difference several times over",
    shows="unpaired ±{unpaired_halfwidth:.2f}, paired ±{paired_halfwidth:.2f} points",
    depends=("weights", "cpu"),
)
def _(f):
    return several_times(f["unpaired_halfwidth"] / max(f["paired_halfwidth"], 1e-9))


@book.sentence(
    "2",
    "main-passes",
    "The production choice passes the acceptance rule",
    shows="drop {main_drop:+.2f} points, agreement {main_agreement:.2f} %",
    depends=("weights", "cpu"),
)
def _(f):
    return f["main_passes"]


@book.sentence(
    "2",
    "weak-fails-past-one-point",
    "Weak calibration fails the acceptance rule, past one point of loss",
    shows="drop {weak_drop:+.2f} points, agreement {weak_agreement:.2f} %",
    depends=("weights", "cpu"),
)
def _(f):
    return not f["weak_passes"] and f["weak_drop"] > 1


@book.sentence(
    "2",
    "per-tensor-no-better",
    "One scale per layer agrees no better than one scale per channel: on the same images, their "
    "difference in agreement lies within the noise or below zero",
    shows="per-tensor minus the production choice: {per_tensor_vs_main}",
    depends=("weights", "cpu"),
)
def _(f):
    return noise(f["per_tensor_vs_main"]) or f["per_tensor_vs_main"].value < 0


# 3. Agreement is not correctness -----------------------------------------------------------------------
def _accuracy_change(p: Any) -> dict:
    low, high = p.accuracy_change_interval()
    return interval(100 * (p.candidate_accuracy - p.reference_accuracy), low, high, "points")


@book.figures("3")
def _(parity: dict, main: str) -> dict:
    p, weak = parity[main], parity[WEAK]
    return {
        "main_change": _accuracy_change(p),
        "weak_change": _accuracy_change(weak),
        "weak_broken": weak.only_reference_right,
        "weak_fixed": weak.only_candidate_right,
        "main_same_wrong": p.both_wrong_same,
    }


@book.sentence(
    "3",
    "main-change-noise",
    "The production choice's accuracy change is within the noise",
    shows="{main_change}",
    depends=("weights", "cpu"),
)
def _(f):
    return noise(f["main_change"])


@book.sentence(
    "3",
    "weak-real-loss",
    "Weak calibration breaks more of fp32's right answers than it fixes: a real loss",
    shows="{weak_change}; {weak_broken} broken, {weak_fixed} fixed",
    depends=("weights", "cpu"),
)
def _(f):
    return below(f["weak_change"], 0)


@book.sentence(
    "3",
    "same-wrong-hundreds",
    "Hundreds of test images are wrong the same way in both models",
    shows="{main_same_wrong} images (the production choice)",
    depends=("weights", "cpu"),
)
def _(f):
    return 100 <= f["main_same_wrong"] < 1000


# 4. Layers kept in float ---------------------------------------------------------------------------------
@book.figures("4")
def _(parity: dict, ran: dict, main: str) -> dict:
    alone = next(k for name, k in ran.items() if name.endswith("excluded alone"))
    floated = ran[f"{main}, 2 layers in float"]
    return {
        "alone_float_ops": sum(alone.float_compute.values()),
        "float_file_float_ops": sum(floated.float_compute.values()),
        "pt_float_vs_main": change(parity["per-tensor, 2 layers in float"].compare(parity[main])),
    }


@book.sentence(
    "4",
    "alone-runs-int8",
    "A layer excluded alone, between quantized layers, runs in INT8 after all",
    shows="{alone_float_ops} float compute ops run",
    depends="runtime",
)
def _(f):
    return f["alone_float_ops"] == 0


@book.sentence(
    "4",
    "float-layers-no-gain",
    "Two layers in float buy no agreement that per-channel scales do not: the per-tensor file with two "
    "float layers agrees no better with fp32 than the production choice",
    shows="{pt_float_vs_main}",
    depends=("weights", "cpu"),
)
def _(f):
    return noise(f["pt_float_vs_main"]) or f["pt_float_vs_main"].value < 0


# 5. The verdict ----------------------------------------------------------------------------------------------
@book.figures("5")
def _(targets: dict, timings: dict, size: dict, main: str) -> dict:
    from course_lib.measure import bootstrap_ratio_interval

    def timed(name: str) -> dict:
        if name not in timings:
            return not_measured(f"{name} fails the acceptance rule here, so it was not timed")
        return speed(timings[name])

    if main in timings and "per-tensor" in timings:
        a, b = timings[main].latency[main].samples_ms, timings["per-tensor"].latency["per-tensor"].samples_ms
        pt_over_main = interval(
            timings[main].latency[main].median_ms / timings["per-tensor"].latency["per-tensor"].median_ms,
            *bootstrap_ratio_interval(a, b),
            "x",
        )
    else:
        pt_over_main = not_measured("per-tensor or the production choice fails the acceptance rule here")
    floats = [name for name in size if name.endswith("2 layers in float")]
    return {
        "main_target": targets[main].mark,
        "main_accurate": targets[main].accurate,
        "main_small": targets[main].small,
        "main_size": size[main],
        "main_b64": timed(main),
        "per_tensor_over_main": pt_over_main,
        "float_size_min": min(size[name] for name in floats),
        "float_size_max": max(size[name] for name in floats),
        "max_size_ratio": 0.26,
    }


@book.sentence(
    "5",
    "main-meets-targets",
    "The production choice meets the accuracy, agreement and size targets",
    shows="{main_size:.3f} of fp32's bytes",
    depends=("weights", "cpu"),
)
def _(f):
    return f["main_accurate"] and f["main_small"]


@book.sentence(
    "5",
    "main-faster-under-2x",
    "The production choice runs faster than fp32 at batch 64, but less than twice as fast",
    shows="{main_b64}",
    scope=X86,
    depends="speed",
)
def _(f):
    return all_of(faster(f["main_b64"]), slower(f["main_b64"], 2.0))


@book.sentence(
    "5",
    "per-tensor-not-10-faster",
    "Per-tensor runs less than 10% faster than per-channel, timed in turn with it",
    shows="per-tensor's speed over the production choice's: {per_tensor_over_main}",
    depends="speed",
)
def _(f):
    return below(f["per_tensor_over_main"], 1.1)


@book.sentence(
    "5",
    "float-files-too-large",
    "The files with float layers miss the size target",
    shows="{float_size_min:.3f} to {float_size_max:.3f} of fp32's bytes, target at most {max_size_ratio}",
    depends=("weights", "cpu"),
)
def _(f):
    return f["float_size_min"] > f["max_size_ratio"]


@book.end
def _(variants: dict, parity: dict, targets: dict, speed: dict) -> None:
    """One entry per ResNet18 variant in the course's results store, for the report and lesson 06's table."""
    from course_machinery import results

    for name, path in variants.items():
        p, t = parity[name], targets[name]
        metrics = {
            "accuracy": p.candidate_accuracy,
            "fp32_accuracy": p.reference_accuracy,
            "agreement": p.agreement,
            "size_ratio": t.size_ratio,
            "speedup_b64": speed[name].speedup if name in speed else None,
            "passes_acceptance": t.verdict.passes,
            "meets_course_target": t.mark == "✔",
        }
        results.record(lesson="04", model="fashion_resnet18", variant=name, path=path, metrics=metrics)
