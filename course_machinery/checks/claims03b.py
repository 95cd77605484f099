"""Lesson 03b's sentences about its results, and the figures each section's check cell measures.

Each sentence here is written once in the lesson's markdown, with `<!-- claim: name -->` after it.
"""

from __future__ import annotations

from typing import Any

from ..claims import Book, about, change, far, most, noise

book = Book("03b")


def _narrower(ranges: dict, label: str) -> int:
    """How many tensors `label`'s range leaves narrower than MinMax's (it clips them)."""
    count = 0
    for found in ranges.values():
        low, high = found[label]
        mm_low, mm_high = found["MinMax"]
        if high - low < mm_high - mm_low:
            count += 1
    return count


# 1. MinMax, Entropy, Percentile ----------------------------------------------------------------------
@book.figures("1")
def _(ranges: dict, by_method: dict) -> dict:
    minmax, percentile = by_method["MinMax"], by_method["Percentile 99.999"]
    entropy, fine = by_method["Entropy"], by_method["Entropy, 2048 bins"]
    return {
        "tensors": len(ranges),
        "entropy_same_as_minmax": sum(r["Entropy"] == r["MinMax"] for r in ranges.values()),
        "entropy2048_same_as_minmax": sum(r["Entropy, 2048 bins"] == r["MinMax"] for r in ranges.values()),
        "percentile_same_as_minmax": sum(r["Percentile"] == r["MinMax"] for r in ranges.values()),
        "entropy2048_narrower": _narrower(ranges, "Entropy, 2048 bins"),
        "percentile_narrower": _narrower(ranges, "Percentile"),
        "entropy_same_model": bool((entropy.logits == minmax.logits).all()),
        "minmax_agreement": 100 * minmax.parity.agreement,
        "percentile_agreement": 100 * percentile.parity.agreement,
        "entropy2048_agreement": 100 * fine.parity.agreement,
        "percentile_vs_minmax": change(percentile.parity.compare(minmax.parity, "agreement")),
        "entropy2048_vs_minmax": change(fine.parity.compare(minmax.parity, "agreement")),
        "minmax_seconds": minmax.seconds,
        "entropy2048_seconds": fine.seconds,
        "entropy2048_time_ratio": fine.seconds / minmax.seconds,
    }


@book.sentence(
    "1",
    "entropy-128-same-ranges",
    "Entropy with its default 128 bins picks exactly MinMax's range for every tensor",
    shows="{entropy_same_as_minmax} of {tensors} tensors",
    depends=("runtime", "weights"),
)
def _(f):
    return f["entropy_same_as_minmax"] == f["tensors"]


@book.sentence(
    "1",
    "entropy-2048-narrows-most",
    "Entropy with 2,048 bins narrows most tensors' ranges",
    shows="{entropy2048_narrower} of {tensors} tensors",
    depends=("runtime", "weights"),
)
def _(f):
    return most(f["entropy2048_narrower"] / f["tensors"])


@book.sentence(
    "1",
    "percentile-narrows-most",
    "Percentile 99.999 narrows most tensors' ranges",
    shows="{percentile_narrower} of {tensors} tensors",
    depends=("runtime", "weights"),
)
def _(f):
    return most(f["percentile_narrower"] / f["tensors"])


@book.sentence(
    "1",
    "entropy-same-model",
    "Entropy through quantize_static gives exactly the MinMax model",
    shows="identical logits: {entropy_same_model}",
    depends="runtime",
)
def _(f):
    return f["entropy_same_model"]


@book.sentence(
    "1",
    "percentile-at-least-minmax",
    "Percentile 99.999 agrees with fp32 at least as often as MinMax (within the noise, or more often)",
    shows="{percentile_vs_minmax}",
    depends=("weights", "cpu"),
)
def _(f):
    return noise(f["percentile_vs_minmax"]) or f["percentile_vs_minmax"].value > 0


@book.sentence(
    "1",
    "entropy-2048-loses",
    "Entropy with 2,048 bins loses agreement against MinMax",
    shows="{entropy2048_vs_minmax}",
    depends=("weights", "cpu"),
)
def _(f):
    return f["entropy2048_vs_minmax"].high < 0


@book.sentence(
    "1",
    "entropy-2048-far-slower",
    "The 2,048-bin Entropy search takes far longer than MinMax's whole quantize_static call",
    shows="{entropy2048_seconds:.1f} s against {minmax_seconds:.1f} s ({entropy2048_time_ratio:.1f}x)",
    depends=("speed", "runtime"),
)
def _(f):
    return far(f["entropy2048_time_ratio"])


# 2. How many calibration images, and how much memory? -----------------------------------------------
@book.figures("2")
def _(by_size: dict, share: dict, peak_mb: dict) -> dict:
    default = by_size[200]
    return {
        "ten_share": share[10],
        "five_hundred_share": share[500],
        "fifty_vs_default": change(by_size[50].parity.compare(default.parity, "agreement")),
        "five_hundred_vs_default": change(by_size[500].parity.compare(default.parity, "agreement")),
        "mm_mb_50": peak_mb[("MinMax", 50, False)],
        "mm_mb_500": peak_mb[("MinMax", 500, False)],
        "pct_mb_50": peak_mb[("Percentile", 50, False)],
        "pct_mb_500": peak_mb[("Percentile", 500, False)],
        "pct_mb_50_strided": peak_mb[("Percentile", 50, True)],
        "pct_mb_500_strided": peak_mb[("Percentile", 500, True)],
    }


@book.sentence(
    "2",
    "ten-saturates-more",
    "Ten calibration images let more real values saturate than 500",
    shows="{ten_share:.4%} against {five_hundred_share:.4%}",
    depends=("weights", "data"),
)
def _(f):
    return f["ten_share"] > f["five_hundred_share"]


@book.sentence(
    "2",
    "from-50-steady",
    "From 50 images on, agreement stays within the noise of the 200-image default",
    shows="50 images: {fifty_vs_default}; 500: {five_hundred_vs_default}",
    depends=("weights", "cpu"),
)
def _(f):
    return noise(f["fifty_vs_default"]) and noise(f["five_hundred_vs_default"])


@book.sentence(
    "2",
    "minmax-memory-flat",
    "MinMax's peak memory hardly grows with the set size (by less than a tenth of Percentile's growth)",
    shows="50 → 500 images: MinMax {mm_mb_50:.0f} → {mm_mb_500:.0f} MB, Percentile {pct_mb_50:.0f} → {pct_mb_500:.0f} MB",
    depends="runtime",
)
def _(f):
    return f["mm_mb_500"] - f["mm_mb_50"] < 0.1 * (f["pct_mb_500"] - f["pct_mb_50"])


@book.sentence(
    "2",
    "percentile-memory-grows",
    "Without a stride, Percentile's peak memory grows with the set size (by more than 100 MB from 50 to 500 images)",
    shows="50 → 500 images: {pct_mb_50:.0f} → {pct_mb_500:.0f} MB",
    depends="runtime",
)
def _(f):
    return f["pct_mb_500"] - f["pct_mb_50"] > 100


@book.sentence(
    "2",
    "strided-flat",
    "CalibStridedMinMax keeps Percentile's peak memory flat (its growth under a tenth of the unstrided one)",
    shows="50 → 500 images: {pct_mb_50_strided:.0f} → {pct_mb_500_strided:.0f} MB strided, "
    "{pct_mb_50:.0f} → {pct_mb_500:.0f} MB not",
    depends="runtime",
)
def _(f):
    return f["pct_mb_500_strided"] - f["pct_mb_50_strided"] < 0.1 * (f["pct_mb_500"] - f["pct_mb_50"])


# 3. QDQ versus QOperator -----------------------------------------------------------------------------
@book.figures("3")
def _(qdq: Any, qop: Any, ran: dict) -> dict:
    from pathlib import Path

    return {
        "qoperator_size_ratio": Path(qop).stat().st_size / Path(qdq).stat().st_size,
        "qdq_integer_ops": ran["QDQ"].integer_count,
        "qop_integer_ops": ran["QOperator"].integer_count,
        "compute_ops": ran["QDQ"].compute_count,
    }


@book.sentence(
    "3",
    "same-size",
    "The QDQ and QOperator files are about the same size (within 2 %)",
    shows="QOperator {qoperator_size_ratio:.3f} of QDQ",
    depends="runtime",
)
def _(f):
    return about(f["qoperator_size_ratio"], 1.0, tolerance=0.02)


@book.sentence(
    "3",
    "same-integer-kernels",
    "The session runs the QDQ file on as many integer kernels as the QOperator file",
    shows="QDQ {qdq_integer_ops}, QOperator {qop_integer_ops} of {compute_ops}",
    depends=("cpu", "runtime"),
)
def _(f):
    return f["qdq_integer_ops"] == f["qop_integer_ops"] and f["qdq_integer_ops"] > 0


@book.end
def _(by_method: dict, by_size: dict, qop_scored: Any, production: str) -> None:
    """One entry per variant in the course's results store; the QOperator file under lesson 03, where
    lesson 06's table looks for it."""
    from course_machinery import results

    for s in [*by_method.values(), *by_size.values()]:
        metrics = {
            "accuracy": s.parity.candidate_accuracy,
            "fp32_accuracy": s.parity.reference_accuracy,
            "agreement": s.parity.agreement,
            "size_ratio": s.size_ratio,
            "calibration_s": s.seconds,
        }
        results.record(
            "03b", "fashion_resnet18", f"{production}, {s.name}", metrics, options=s.options, path=s.path
        )
    q = qop_scored
    metrics = {
        "accuracy": q.parity.candidate_accuracy,
        "fp32_accuracy": q.parity.reference_accuracy,
        "agreement": q.parity.agreement,
        "size_ratio": q.size_ratio,
        "speedup_b64": q.speedup,
    }
    results.record(
        "03", "fashion_resnet18", q.name, metrics, options={"quant_format": "QOperator"}, path=q.path
    )
