"""The parity check: how far a candidate's logits drift from the reference's, who is right, and
whether the candidate is accepted.

    parity       drift, top-1 agreement and, with labels, who is right (`Parity`), with intervals
    Difference   two paired rates on the same inputs (two variants' agreement or accuracy): signal or noise
    _wilson_interval   an interval for a rate such as agreement, right even near 100 %
    acceptance   the acceptance rule applied to a parity (`Verdict`); `Verdict.target` weighs an accepted
                 model against a deployment target: accuracy, agreement, size and speed (`Target`)
    softmax, margin   probabilities, and the gap between the two most probable classes
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

# Floor of the denominator of the relative drift |ref - cand| / max(|ref|, eps). Logits are of
# order 1; below 1e-3 a relative error says nothing useful, and without a floor a logit that
# happens to sit at 0 would give an infinite drift. Near-zero logits still dominate the maximum,
# which is why the lessons lead with absolute drift and top-1 agreement.
RELATIVE_DRIFT_EPS = 1e-3


def _z(confidence: float) -> float:
    return statistics.NormalDist().inv_cdf(0.5 + confidence / 2)


def _wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """An interval for a rate (successes / n), as fractions: Wilson's score interval.

    Unlike the textbook p ± z·sqrt(p(1-p)/n) it stays inside [0, 1] and does not shrink to nothing
    when every row agrees, which is where agreement usually is (99.8 % of 10,000 images)."""
    if n <= 0:
        raise ValueError(f"A rate needs at least one row; got n={n}.")
    z, p = _z(confidence), successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class Difference:
    """Rate a minus rate b, in points, measured on the same rows, with its paired interval.

    Only the rows where exactly one of the two succeeds move the difference: with `only_a` rows
    where a succeeds and b does not, and `only_b` the other way, out of n, the difference is
    (only_a - only_b) / n with the paired (McNemar) standard error."""

    what: str
    points: float
    low: float
    high: float
    only_a: int
    only_b: int
    n: int
    confidence: float = 0.95

    @property
    def is_noise(self) -> bool:
        """True when the interval includes 0: this many rows cannot tell the two apart."""
        return self.low <= 0 <= self.high

    def __str__(self) -> str:
        verdict = "within the noise" if self.is_noise else ("higher" if self.points > 0 else "lower")
        return (
            f"{self.what} {self.points:+.2f} points ({self.low:+.2f} to {self.high:+.2f}, "
            f"{self.confidence:.0%} paired interval; {self.only_a} rows against {self.only_b} of {self.n:,}): "
            f"{verdict}"
        )


def _paired_difference(a: Any, b: Any, what: str = "rate", confidence: float = 0.95) -> Difference:
    """Rate of `a` minus rate of `b`, two boolean arrays over the same rows (e.g. agrees with fp32)."""
    a, b = np.asarray(a, dtype=bool).reshape(-1), np.asarray(b, dtype=bool).reshape(-1)
    if a.shape != b.shape or a.size == 0:
        raise ValueError(
            f"A paired difference needs two equally long, non-empty arrays over the same rows; got {a.size} "
            f"and {b.size}. Compare two variants on the same inputs, in the same order."
        )
    n, only_a, only_b = a.size, int((a & ~b).sum()), int((~a & b).sum())
    change = (only_a - only_b) / n
    se = math.sqrt(max(only_a + only_b - (only_a - only_b) ** 2 / n, 0.0)) / n
    z = _z(confidence)
    return Difference(
        what, 100 * change, 100 * (change - z * se), 100 * (change + z * se), only_a, only_b, n, confidence
    )


@dataclass
class Parity:
    """How a candidate (e.g. int8) matches a reference (e.g. fp32) on the same inputs.

    Agreement is not correctness: when labels are given, the counts split the labelled rows
    into both right, both wrong with the same answer, both wrong with different answers, only
    the reference right and only the candidate right (they add up to `labelled`). Rows labelled
    -1 (no ground truth) count for agreement and drift only.
    """

    n: int
    agreement: float  # fraction with the same top-1 class
    disagreements: int
    max_abs_drift: float
    mean_abs_drift: float
    max_rel_drift: float  # |ref - cand| / max(|ref|, eps)
    allclose: bool  # np.allclose(cand, ref, rtol, atol): |cand - ref| <= atol + rtol * |ref|
    atol: float
    rtol: float
    eps: float
    within_atol: float | None = None  # share of rows whose every value is within that tolerance
    labelled: int | None = None  # rows with a label >= 0; accuracies and counts are over these
    reference_accuracy: float | None = None
    candidate_accuracy: float | None = None
    both_right: int | None = None
    both_wrong_same: int | None = None
    both_wrong_different: int | None = None
    only_reference_right: int | None = None
    only_candidate_right: int | None = None
    # Per row: same top-1 class as the reference; candidate right (labelled rows). Kept for paired
    # comparisons between two candidates (`compare`), left out of to_dict.
    same_top1: np.ndarray | None = field(default=None, repr=False, compare=False)
    candidate_right: np.ndarray | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if k not in ("same_top1", "candidate_right")}

    def agreement_interval(self, confidence: float = 0.95) -> tuple[float, float]:
        """Wilson interval for the agreement, as fractions: what n rows can say about it."""
        return _wilson_interval(self.n - self.disagreements, self.n, confidence)

    def accuracy_interval(self, which: str = "candidate", confidence: float = 0.95) -> tuple[float, float]:
        """Wilson interval for the candidate's (or the reference's) accuracy, as fractions."""
        accuracy = self.candidate_accuracy if which == "candidate" else self.reference_accuracy
        if accuracy is None:
            raise ValueError("accuracy_interval needs labels: pass labels to measure.parity(...).")
        return _wilson_interval(round(accuracy * self.labelled), self.labelled, confidence)

    def accuracy_text(self, which: str = "candidate", confidence: float = 0.95) -> str:
        """'91.53 % (91.0–92.1)': an accuracy with its interval, for a table cell."""
        low, high = self.accuracy_interval(which, confidence)
        accuracy = self.candidate_accuracy if which == "candidate" else self.reference_accuracy
        return f"{accuracy:.2%} ({100 * low:.1f}–{100 * high:.1f})"

    def agreement_text(self, confidence: float = 0.95) -> str:
        """'99.76 % (99.65–99.84)': the agreement with its interval, for a table cell."""
        low, high = self.agreement_interval(confidence)
        return f"{self.agreement:.2%} ({100 * low:.2f}–{100 * high:.2f})"

    def compare(self, other: Parity, what: str = "agreement", confidence: float = 0.95) -> Difference:
        """This candidate's agreement (or accuracy) minus `other`'s, paired over the same rows."""
        if what not in ("agreement", "accuracy"):
            raise ValueError(f"what must be 'agreement' or 'accuracy'; got {what!r}")
        attribute = "same_top1" if what == "agreement" else "candidate_right"
        mine, theirs = getattr(self, attribute), getattr(other, attribute)
        if mine is None or theirs is None:
            raise ValueError(
                f"compare({what!r}) needs both parities computed on the same rows by measure.parity"
                + (" with labels" if what == "accuracy" else "")
                + "."
            )
        return _paired_difference(mine, theirs, what, confidence)

    def accuracy_change_interval(self, confidence: float = 0.95) -> tuple[float, float]:
        """An interval for candidate minus reference accuracy, in points, on these labelled rows.

        Both models saw the same images, so only the images on which exactly one of them is right
        move the difference: with b rows only the reference right and c only the candidate right
        out of n, the change is (c - b) / n with the paired (McNemar) standard error
        sqrt(b + c - (c - b)^2 / n) / n, far smaller than either accuracy's own uncertainty.
        """
        if self.labelled is None:
            raise ValueError("accuracy_change_interval needs labels: pass labels to measure.parity(...).")
        n, b, c = self.labelled, self.only_reference_right, self.only_candidate_right
        change = (c - b) / n
        se = math.sqrt(max(b + c - (c - b) ** 2 / n, 0.0)) / n
        z = _z(confidence)
        return 100 * (change - z * se), 100 * (change + z * se)


def _as_logits(name: str, logits: Any) -> np.ndarray:
    a = np.asarray(logits, dtype=np.float64)
    if a.ndim == 1:
        a = a[None, :]
    if a.ndim != 2 or a.shape[0] == 0:
        raise ValueError(
            f"{name} must be logits of shape (N, classes); got shape {np.shape(logits)}. "
            "Pass the model's output for a batch, e.g. session.run(None, feed)[0]."
        )
    return a


def parity(
    reference_logits: Any,
    candidate_logits: Any,
    labels: Any = None,
    *,
    atol: float = 5e-2,
    rtol: float = 0.0,
    eps: float = RELATIVE_DRIFT_EPS,
) -> Parity:
    """Compare candidate logits with reference logits, and with the labels when given.

    `rtol` defaults to 0 so that `allclose` reads "every logit within atol of the reference";
    pass rtol to allow a relative slack as well (np.allclose's rule).
    """
    ref, cand = (
        _as_logits("reference_logits", reference_logits),
        _as_logits("candidate_logits", candidate_logits),
    )
    if ref.shape != cand.shape:
        raise ValueError(
            f"Reference and candidate logits must have the same shape; got {ref.shape} and {cand.shape}. "
            "Run both models on the same inputs, in the same order."
        )
    drift = np.abs(cand - ref)
    close = drift <= atol + rtol * np.abs(ref)  # np.isclose's rule, value by value
    ref_top, cand_top = ref.argmax(1), cand.argmax(1)
    same = ref_top == cand_top
    result = Parity(
        n=len(ref),
        agreement=float(same.mean()),
        disagreements=int((~same).sum()),
        max_abs_drift=float(drift.max()),
        mean_abs_drift=float(drift.mean()),
        max_rel_drift=float((drift / np.maximum(np.abs(ref), eps)).max()),
        allclose=bool(close.all()),
        within_atol=float(close.all(axis=1).mean()),
        atol=atol,
        rtol=rtol,
        eps=eps,
        same_top1=same,
    )
    if labels is None:
        return result
    y = np.asarray(labels).reshape(-1)
    if len(y) != len(ref):
        raise ValueError(
            f"Got {len(y)} labels for {len(ref)} rows of logits; pass one label per row (in the same order)."
        )
    known = y >= 0  # label -1: no ground truth (e.g. two-moons points outside the training range)
    result.labelled = int(known.sum())
    if not result.labelled:
        return result
    ref_ok, cand_ok, same = (ref_top == y)[known], (cand_top == y)[known], same[known]
    result.reference_accuracy = float(ref_ok.mean())
    result.candidate_accuracy = float(cand_ok.mean())
    result.both_right = int((ref_ok & cand_ok).sum())
    result.both_wrong_same = int((~ref_ok & ~cand_ok & same).sum())
    result.both_wrong_different = int((~ref_ok & ~cand_ok & ~same).sum())
    result.only_reference_right = int((ref_ok & ~cand_ok).sum())
    result.only_candidate_right = int((~ref_ok & cand_ok).sum())
    result.candidate_right = cand_ok
    return result


# Deciding: the acceptance rule, and how sure each model was of its answer.
@dataclass
class Verdict:
    """The acceptance rule applied to one candidate (seed 000's thresholds by default)."""

    passes: bool
    drop_points: float  # reference accuracy minus candidate accuracy, in percentage points
    agreement: float
    advice: str

    def to_dict(self) -> dict:
        return asdict(self)

    def target(
        self,
        size_ratio: float,
        speed: Any = None,
        *,
        max_drop_points: float = 0.3,
        min_agreement: float = 0.995,
        max_size_ratio: float = 0.26,
        min_speedup: float = 1.5,
    ) -> Target:
        """This model against a deployment target, on top of the acceptance rule: an accuracy drop of
        at most `max_drop_points`, top-1 agreement of at least `min_agreement`, a file at most
        `max_size_ratio` of the reference's bytes, and at least `min_speedup` times its throughput.

        `speed` is the model's `compare_latency` against the reference (None: not timed). A timing is
        noisy, so the speed condition is met only when the ratio's whole interval lies at or above
        `min_speedup`, missed only when it lies wholly below, and unsettled otherwise
        (`LatencyComparison.speedup_at_least`). A model the acceptance rule rejects is rejected here too.

        Marks: "✔" meets every condition; "trade" passes the acceptance rule and meets the speed
        target but misses a condition (the file's size, or the stricter accuracy or agreement), which
        the advice names: a deployment that can give that up may ship it; "unsettled" meets the rest
        while its speed interval straddles the target; "✘" rejected by the acceptance rule, or its speed
        lies below the target; "—" accepted but not timed.
        """
        missed = []
        if self.drop_points > max_drop_points:
            missed.append(
                f"its accuracy drop is {self.drop_points:+.2f} points (target at most {max_drop_points:g})"
            )
        if self.agreement < min_agreement:
            missed.append(f"its agreement is {self.agreement:.2%} (target at least {min_agreement:.1%})")
        if size_ratio > max_size_ratio:
            missed.append(f"the file is {size_ratio:.2f} of fp32's (target at most {max_size_ratio:g})")
        fast = None if speed is None else speed.speedup_at_least(min_speedup)
        ratio = "" if speed is None else str(speed)
        but = f"; {' and '.join(missed)}" if missed else ""
        if not self.passes:
            mark, advice = "✘", f"don't ship: {self.advice}"
        elif speed is None:
            mark, advice = "—", f"not timed: time it against fp32 before choosing{but}"
        elif fast is False:
            mark, advice = "✘", f"misses the speed target: {ratio} lies below {min_speedup:g}x{but}"
        elif fast is None:
            mark, advice = (
                "unsettled",
                f"time it again, on the deployment machine: {ratio} reaches both sides of {min_speedup:g}x{but}",
            )
        elif missed:
            mark, advice = "trade", f"a trade: {ratio} meets the speed target, but {' and '.join(missed)}"
        else:
            mark, advice = "✔", f"ship it: it meets every target at {ratio}"
        return Target(
            mark=mark,
            advice=advice,
            accurate=self.drop_points <= max_drop_points and self.agreement >= min_agreement,
            small=size_ratio <= max_size_ratio,
            fast=fast,
            timed=speed is not None,
            size_ratio=size_ratio,
            speed=ratio,
            verdict=self,
        )


@dataclass(frozen=True)
class Target:
    """A model weighed against a deployment target (`Verdict.target`): the mark for a table, what to
    do with the model, and each condition: `accurate` (accuracy drop and agreement), `small` (file
    size), `fast` (True / False / None while the speed interval straddles the target, None when not
    `timed`)."""

    mark: str
    advice: str
    accurate: bool
    small: bool
    fast: bool | None
    timed: bool
    size_ratio: float
    speed: str  # the timed ratio with its interval, "" when not timed
    verdict: Verdict  # the acceptance rule's, which the target builds on

    def to_dict(self) -> dict:
        return asdict(self)

    def row(self, name: str) -> dict[str, str]:
        """One row of a verdict table (`measure.markdown_table`): the figures and both verdicts."""
        return {
            "variant": name,
            "accuracy drop": f"{self.verdict.drop_points:+.2f}",
            "agreement": f"{self.verdict.agreement:.2%}",
            "size": f"{self.size_ratio:.3f}",
            "speed b64": self.speed or "—",
            "acceptance rule": "✔" if self.verdict.passes else "✘",
            "course target": self.mark,
            "what to do": self.advice,
        }


def acceptance(
    p: Parity,
    *,
    max_drop_points: float = 0.5,
    min_agreement: float = 0.99,
    review_points: float = 1.0,
    per_channel_points: float = 3.0,
) -> Verdict:
    """Pass when accuracy drops at most `max_drop_points` and top-1 agreement exceeds
    `min_agreement`. Over `review_points` of drop: review the calibration set first; over
    `per_channel_points`: per_channel is often missing. Needs a Parity computed with labels."""
    if p.reference_accuracy is None or p.candidate_accuracy is None:
        raise ValueError(
            "acceptance needs accuracies: compute the parity with labels, parity(ref, cand, labels)."
        )
    drop = 100 * (p.reference_accuracy - p.candidate_accuracy)
    passes = drop <= max_drop_points and p.agreement > min_agreement
    if passes:
        advice = "passes"
    elif drop > per_channel_points:
        advice = f"drop over {per_channel_points:g} points: per_channel is often missing"
    elif drop > review_points:
        advice = f"drop over {review_points:g} point: review the calibration set first"
    elif drop > max_drop_points:
        advice = f"drop over {max_drop_points:g} points: not accepted"
    else:
        advice = f"agreement {p.agreement:.2%} not above {min_agreement:.0%}: the models decide differently"
    return Verdict(passes=passes, drop_points=drop, agreement=p.agreement, advice=advice)


def softmax(logits: Any) -> np.ndarray:
    z = np.asarray(logits, dtype=np.float64)
    z = np.exp(z - z.max(axis=-1, keepdims=True))
    return z / z.sum(axis=-1, keepdims=True)


def margin(logits: Any) -> np.ndarray:
    """Per row: probability of the top class minus that of the runner-up (0: a coin toss, 1: sure)."""
    p = np.sort(softmax(logits), axis=-1)
    return p[..., -1] - p[..., -2]
