"""Measuring one variant against fp32: quality (with labels or without), speed, memory, kernels.

Quality           the quality rule's verdict and the figures behind it, with their intervals
labelled_quality  lesson 04: measure.parity against fp32 and the labels, measure.acceptance
float_quality     outputs that are not class scores: cosine and relative error against fp32
outputs           a model's chosen output for every evaluation row, in batches, one row per sample
speed             measure.compare_latency against fp32 at each batch size, runs sized to a time budget
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .. import measure

# Without labels: every evaluation sample's output within this cosine of fp32's, and the mean
# above MIN_MEAN_COSINE. The lessons judge the text encoder by its worst sentence's cosine
# (lessons 02 and 06); 0.98 is where its dynamic and static INT8 files sit.
MIN_WORST_COSINE = 0.98
MIN_MEAN_COSINE = 0.99
# One value per sample (a regression): the relative error of 95 % of samples at most this.
MAX_RELATIVE_ERROR = 0.05


@dataclass
class Quality:
    """How close a variant's outputs are to fp32's on the evaluation samples.

    `mode`: "labels" (lesson 04's parity and acceptance rule) or "fp32" (cosine, relative error);
    `score`: higher is closer to fp32 (agreement, or mean cosine), for ranking ties;
    `figures`: the numbers, each interval as (low, high); `text`: one cell for the table."""

    mode: str
    passes: bool
    advice: str
    score: float
    text: str
    figures: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "mode": self.mode,
            "passes": self.passes,
            "advice": self.advice,
            "score": self.score,
            "text": self.text,
            **self.figures,
        }


def rule_text(mode: str) -> str:
    """The quality rule, in words, for the report."""
    if mode == "labels":
        return (
            "lesson 04's acceptance rule: accuracy at most 0.5 points below fp32's and top-1 agreement with "
            "fp32 above 99 %, on the evaluation samples"
        )
    return (
        f"without labels, the outputs against fp32's: every evaluation sample's cosine at least "
        f"{MIN_WORST_COSINE} and the mean cosine at least {MIN_MEAN_COSINE} (lessons 02 and 06 judge the text "
        f"encoder by its worst sentence's cosine); for one value per sample, 95 % of relative errors at most "
        f"{MAX_RELATIVE_ERROR:.0%}"
    )


def outputs(
    path: Path, feed: Mapping[str, np.ndarray], output: str, *, batch: int, threads: int | None
) -> np.ndarray:
    """The output `output` for every row of `feed`, `batch` rows per run, one row per sample."""
    got = measure.logits(path, dict(feed), batch=batch, threads=threads, output=output)
    return got.reshape(len(got), -1).astype(np.float64)


def _pct(low_high: tuple[float, float]) -> str:
    return f"{100 * low_high[0]:.2f}–{100 * low_high[1]:.2f}"


def labelled_quality(reference: np.ndarray, candidate: np.ndarray, labels: np.ndarray) -> Quality:
    """Lesson 04: agreement and accuracy against fp32 and the labels, the acceptance rule."""
    p = measure.parity(reference, candidate, labels)
    if p.labelled:
        verdict = measure.acceptance(p)
        change = p.accuracy_change_interval()
        passes, advice = verdict.passes, verdict.advice
        accuracy = (
            f"; accuracy {p.candidate_accuracy:.2%} ({_pct(p.accuracy_interval())}) against fp32's "
            f"{p.reference_accuracy:.2%}, change {-verdict.drop_points:+.2f} points "
            f"({change[0]:+.2f} to {change[1]:+.2f})"
        )
    else:  # every label is -1: agreement alone
        passes = p.agreement > 0.99
        advice = "passes" if passes else f"agreement {p.agreement:.2%} not above 99%"
        change, accuracy = None, ""
    figures = {
        "n": p.n,
        "agreement": p.agreement,
        "agreement_interval": p.agreement_interval(),
        "reference_accuracy": p.reference_accuracy,
        "candidate_accuracy": p.candidate_accuracy,
        "accuracy_interval": p.accuracy_interval() if p.labelled else None,
        "accuracy_change_points": None
        if p.labelled is None
        else 100 * (p.candidate_accuracy - p.reference_accuracy),
        "accuracy_change_interval": change,
        "max_abs_drift": p.max_abs_drift,
    }
    text = f"agreement {p.agreement_text()}{accuracy}"
    return Quality("labels", passes, advice, p.agreement, text, figures)


def float_quality(reference: np.ndarray, candidate: np.ndarray, *, seed: int = 0) -> Quality:
    """Outputs without labels (embeddings, regression): per sample, the cosine with fp32's output
    and the relative error |candidate - fp32| / |fp32|; the mean cosine's interval by bootstrap."""
    ref, cand = np.asarray(reference, np.float64), np.asarray(candidate, np.float64)
    norm_ref, norm_cand = np.linalg.norm(ref, axis=1), np.linalg.norm(cand, axis=1)
    tiny = 1e-12 + 1e-6 * float(np.abs(ref).mean())
    relative = np.linalg.norm(cand - ref, axis=1) / np.maximum(norm_ref, tiny)
    if ref.shape[1] == 1:  # one value per sample: a cosine of two numbers only says "same sign"
        p95 = float(np.quantile(relative, 0.95))
        passes = p95 <= MAX_RELATIVE_ERROR
        advice = (
            "passes" if passes else f"95 % of relative errors reach {p95:.1%}, above {MAX_RELATIVE_ERROR:.0%}"
        )
        text = f"relative error median {np.median(relative):.2%}, 95th percentile {p95:.2%}"
        figures = {
            "n": len(ref),
            "relative_error_median": float(np.median(relative)),
            "relative_error_p95": p95,
        }
        return Quality("fp32", passes, advice, -p95, text, figures)
    cosine = (ref * cand).sum(1) / np.maximum(norm_ref * norm_cand, tiny * tiny)
    idx = np.random.default_rng(seed).integers(0, len(cosine), size=(1000, len(cosine)))
    low, high = np.quantile(cosine[idx].mean(axis=1), [0.025, 0.975])
    worst, mean = float(cosine.min()), float(cosine.mean())
    passes = worst >= MIN_WORST_COSINE and mean >= MIN_MEAN_COSINE
    if passes:
        advice = "passes"
    elif mean < MIN_MEAN_COSINE:
        advice = f"mean cosine {mean:.4f} below {MIN_MEAN_COSINE}"
    else:
        below = int((cosine < MIN_WORST_COSINE).sum())
        advice = f"worst cosine {worst:.4f}: {below} sample(s) below {MIN_WORST_COSINE}"
    text = (
        f"cosine mean {mean:.4f} ({low:.4f}–{high:.4f}), worst {worst:.4f}; relative error median "
        f"{np.median(relative):.2%}, worst {relative.max():.2%}"
    )
    figures = {
        "n": len(ref),
        "cosine_mean": mean,
        "cosine_mean_interval": (float(low), float(high)),
        "cosine_worst": worst,
        "cosine_p1": float(np.quantile(cosine, 0.01)),
        "relative_error_median": float(np.median(relative)),
        "relative_error_max": float(relative.max()),
    }
    return Quality("fp32", passes, advice, mean, text, figures)


def feed_at(feed: Mapping[str, np.ndarray], batch: int) -> dict[str, np.ndarray]:
    """The first `batch` rows of every input (repeated when there are fewer rows)."""
    count = len(next(iter(feed.values())))
    index = np.arange(batch) % count
    return {name: np.ascontiguousarray(array[index]) for name, array in feed.items()}


def runs_for(seconds_per_run: float, budget_s: float) -> int:
    """Timed runs per model for a comparison of two models to take about `budget_s`: between 10
    and 50 (each turn of 5 timed runs adds one untimed switch-over run)."""
    return int(np.clip(budget_s / (2 * 1.2 * max(seconds_per_run, 1e-4)), 10, 50))


def speed(
    fp32: Path,
    variant: Path,
    feeds: Mapping[int, Mapping[str, np.ndarray]],
    runs: Mapping[int, int],
    *,
    name: str,
    threads: int | None,
) -> dict[int, measure.LatencyComparison]:
    """fp32 and the variant timed in turn (`measure.compare_latency`) at each batch size."""
    return {
        batch: measure.compare_latency(
            {"fp32": fp32, name: variant},
            dict(feed),
            threads=threads,
            runs=runs[batch],
            warmup=max(2, min(10, runs[batch] // 5)),
        )
        for batch, feed in feeds.items()
    }


def seconds_per_run(path: Path, feed: Mapping[str, np.ndarray], threads: int | None) -> float:
    """A quick median of a few runs: only to size the real measurements."""
    return measure.measure_latency(path, dict(feed), threads=threads, warmup=1, runs=3).median_ms / 1e3


def batches_checked(batch: Any, fixed: int | None) -> tuple[list[int], str]:
    """The batch sizes to time, sorted, and a note when the model's fixed batch overrides them."""
    from .inputs import AuditError

    values: Sequence[Any] = [batch] if isinstance(batch, int) else list(batch)
    if not values or any(not isinstance(b, int) or isinstance(b, bool) or b < 1 for b in values):
        raise AuditError(
            f"Expected batch sizes as whole numbers >= 1, e.g. batch=(1, 32) or --batch 1,32; got {batch!r}. "
            "Pass the batch sizes your deployment runs.",
            expected="ints >= 1",
            found=batch,
        )
    sizes = sorted(set(values))
    if fixed == 1 and sizes != [1]:
        return [
            1
        ], f"the model was exported with a fixed batch of 1, so it is timed at batch 1 only (asked: {sizes})"
    return sizes, ""
