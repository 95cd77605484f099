"""Lesson 06c's sentences about its results, and the figures each section's check cell measures.

Each sentence here is written once in the lesson's markdown, with `<!-- claim: name -->` after it.
"""

from __future__ import annotations

from typing import Any

from course_lib.names import RESNET18

from ..claims import X86, Book, far, faster, interval, most
from ..claims import speed as ratio

book = Book("06c")

MAX_DROP_POINTS = 0.5  # lesson 04's acceptance rule: at most half a point of accuracy lost


def _points_lost(parity: Any) -> tuple[float, float, float]:
    """Accuracy lost against fp32, in points, with the ends of its paired interval."""
    low, high = parity.accuracy_change_interval()
    change = 100 * (parity.candidate_accuracy - parity.reference_accuracy)
    return -change, -high, -low


# 1. Rounding after training ----------------------------------------------------------------------------
@book.figures("1")
def _(a8: Any, ptq: Any) -> dict:
    lost, low, high = _points_lost(ptq.parity)
    return {
        "ptq_points_lost": lost,
        "ptq_over_allowed": interval(
            lost / MAX_DROP_POINTS, low / MAX_DROP_POINTS, high / MAX_DROP_POINTS, "x"
        ),
        "ptq_accuracy": ptq.parity.candidate_accuracy,
        "a8w8_accuracy": a8.parity.candidate_accuracy,
        "resnet_images": ptq.parity.n,
    }


@book.sentence(
    "1",
    "ptq-costs-far-more",
    "Rounding the weights to 4 bits after training costs far more accuracy than lesson 04's rule allows",
    shows="{ptq_points_lost:.2f} points lost: {ptq_over_allowed} the half point allowed",
    depends="weights",
)
def _(f):
    return far(f["ptq_over_allowed"])


# 3. The QAT file ---------------------------------------------------------------------------------------
@book.figures("3")
def _(scored: dict, differ: int, total: int, train_seconds: float) -> dict:
    from course_lib.measure import acceptance

    a8, ptq, qat = (
        next(s for name, s in scored.items() if name.startswith(p)) for p in ("A8W8", "PTQ", "QAT")
    )
    lost = 100 * (ptq.parity.reference_accuracy - ptq.parity.candidate_accuracy)
    won = 100 * (qat.parity.candidate_accuracy - ptq.parity.candidate_accuracy)
    c = qat.latency
    verdicts = {"qat": acceptance(qat.parity), "a8w8": acceptance(a8.parity)}
    return {
        "codes_differing": differ,
        "codes": total,
        "ptq_points_lost": lost,
        "qat_points_won": won,
        "qat_accuracy": qat.parity.candidate_accuracy,
        "qat_train_seconds": train_seconds,
        "qat_passes": verdicts["qat"].passes,
        "qat_advice": verdicts["qat"].advice,
        "a8w8_passes": verdicts["a8w8"].passes,
        "a8w8_advice": verdicts["a8w8"].advice,
        "qat_b64": ratio(c),
        "int4_qat_speedup_b64": c.speedup,
        "fp32_over_qat": interval(1 / c.speedup, 1 / c.speedup_high, 1 / c.speedup_low, "x"),
        "a8w8_b64": ratio(a8.latency),
    }


@book.sentence(
    "3",
    "codes-match",
    "Every INT4 code in the file matches the training's fake quantizer",
    shows="{codes_differing} of {codes:,} differ",
    depends="runtime",
)
def _(f):
    return f["codes"] > 0 and f["codes_differing"] == 0


@book.sentence(
    "3",
    "qat-wins-most",
    "Ten steps of QAT win back most of the accuracy PTQ lost",
    shows="{qat_points_won:.2f} of {ptq_points_lost:.2f} points",
    depends="weights",
)
def _(f):
    return most(f["qat_points_won"] / f["ptq_points_lost"])


@book.sentence(
    "3",
    "qat-fails-rule",
    "The QAT file still fails lesson 04's acceptance rule",
    shows="{qat_advice}",
    depends="weights",
)
def _(f):
    return not f["qat_passes"]


@book.sentence(
    "3",
    "qat-far-slower",
    "The QAT file runs far slower than fp32 at batch 64",
    shows="fp32 {fp32_over_qat} as fast",
    depends="speed",
)
def _(f):
    return far(f["fp32_over_qat"])


@book.sentence(
    "3",
    "a8w8-passes-rule",
    "Lesson 03's 8-bit file passes lesson 04's rule on the same images",
    shows="{a8w8_advice}",
    depends=("weights", "cpu"),
)
def _(f):
    return f["a8w8_passes"]


@book.sentence(
    "3",
    "a8w8-faster",
    "Lesson 03's 8-bit file runs faster than fp32 at batch 64",
    shows="{a8w8_b64}",
    scope=X86,
    depends="speed",
)
def _(f):
    return faster(f["a8w8_b64"])


@book.end
def _(scored: dict, differ: int, total: int, train_seconds: float) -> None:
    """The 4-bit files in the course's results store: for the report and lesson 06's table."""
    from course_machinery import results

    int4 = {"threads": 2, "weights": "int4, per-tensor, reduce_range", "activations": "uint8"}
    for name, s in scored.items():
        if name.startswith("A8W8"):
            continue  # lesson 03's file, made again: lesson 03 records it
        p, c = s.parity, s.latency
        metrics = {
            "accuracy": p.candidate_accuracy,
            "fp32_accuracy": p.reference_accuracy,
            "agreement": p.agreement,
            "size_ratio": s.size_ratio,
            "images": p.n,
            "speedup_b64": c and c.speedup,
            "speedup_b64_low": c and c.speedup_low,
            "speedup_b64_high": c and c.speedup_high,
            "train_seconds": train_seconds if name.startswith("QAT") else None,
            "codes_differing": differ if name.startswith("QAT") else None,
            "codes": total if name.startswith("QAT") else None,
        }
        results.record("06c", RESNET18, name, metrics, options=int4, path=s.path)
