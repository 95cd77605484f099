"""Self-checks for lesson 04b (where errors gather: debugging with qdq_loss_debug, drift at the edges)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .result import CheckResult, invalid, needs_answer, wrong


def _low_margin_share(reference_logits, candidate_logits) -> tuple[float, float, int]:
    """(share of the candidate's disagreements with the reference that sit in the tenth of the rows where
    the reference's margin is lowest, share of those rows on which it disagrees, number of disagreements)."""
    from course_lib.measure import margin

    ref, cand = np.asarray(reference_logits), np.asarray(candidate_logits)
    m = margin(ref)
    low = m <= np.quantile(m, 0.1)
    disagree = cand.argmax(1) != ref.argmax(1)
    total = int(disagree.sum())
    return (float(disagree[low].sum() / total) if total else 0.0), float(disagree[low].mean()), total


@needs_answer("prediction", message="Write your guess in answer_1_guess first: a share between 0 and 1.")
@needs_answer("answer", hint="compute the share of weak calibration's disagreements in the least sure tenth.")
def check_low_margin_share(
    prediction, answer, reference_logits, weak_logits, production_logits
) -> CheckResult:
    """Exercise (lesson 04b, predict then compute): of weak calibration's disagreements with fp32, the share
    that sits in the tenth of the test images where fp32's margin is lowest, against the production
    choice's share. `prediction` and `answer` are shares between 0 and 1."""
    try:
        guess, found = float(prediction), float(answer)
    except (TypeError, ValueError):
        return invalid(f"Got {prediction!r} and {answer!r}; both are shares: numbers between 0 and 1.")
    if not 0 <= guess <= 1:
        return invalid(f"Your guess {guess} is not a share between 0 and 1 (write 0.3 for 30 %).")
    expected, rate, total = _low_margin_share(reference_logits, weak_logits)
    production, _, production_total = _low_margin_share(reference_logits, production_logits)
    if total == 0:
        return invalid(
            "These weak-calibration logits never disagree with fp32: pass logits['weak calibration']."
        )
    if abs(found - expected) <= 0.01:
        off = guess - expected
        said = "close to what you guessed" if abs(off) <= 0.15 else f"you guessed {guess:.0%}"
        return CheckResult(
            True,
            f"{expected:.0%} of weak calibration's {total} disagreements sit in the least sure tenth ({said}), "
            f"against {production:.0%} of the production choice's {production_total}, and the tenth that chance "
            "would put there. Quantization noise tips only decisions fp32 barely made; a wrong input range moves "
            "every logit, so it tips confident decisions too. A disagreement on a confident image points at a "
            "fault, not at noise: browse them first.",
        )
    if 1 < found <= 100 and abs(found / 100 - expected) <= 0.01:
        return wrong("That looks like a percentage: give the share as a fraction, not in per cent.", expected)
    if abs(found - rate) <= 0.01:
        return wrong(
            "That is the share of the least sure images on which weak calibration disagrees. The question is the "
            "other way round: of its disagreements, which share sits in the least sure tenth?",
            expected,
        )
    if abs(found - production) <= 0.01:
        return wrong(
            "That is the production choice's share; compute it for logits['weak calibration'].", expected
        )
    if abs(found - (1 - expected)) <= 0.01:
        return wrong("That is the share *outside* the least sure tenth; take the rest.", expected)
    return wrong(
        "Not the share: mark weak calibration's disagreements with fp32 (the argmax differs), mark the tenth "
        "of the images with the lowest fp32 margin (measure.margin(ref) at or below its 10th percentile), "
        "then divide the disagreements inside that tenth by all the disagreements.",
        expected,
    )


def _grid_drift(fp32_path, int8_path, grid: np.ndarray) -> np.ndarray:
    """Per grid point, the largest |int8 logit - fp32 logit| of a two-input model."""
    from course_lib.measure import logits

    return np.abs(logits(int8_path, grid, threads=1) - logits(fp32_path, grid, threads=1)).max(axis=1)


@needs_answer("answer", hint="set answer_2 to the path of your quantized MLP.")
def check_edge_calibration(answer, fp32_path, lesson_path, grid, inside) -> CheckResult:
    """Exercise (write code, then measure): the two-moons MLP quantized statically with the edge set in its
    calibration data. Passes when its largest drift over the grid points outside the training range
    (`inside` False) falls to less than half of the lesson's file's (`lesson_path`, calibrated on the training
    points alone); the feedback gives both files' drift inside and outside the range."""
    from course_lib.measure import model_facts

    path = Path(answer)
    if not path.is_file():
        return invalid(f"Found no file at {path}: pass the output path you gave quantize_static.")
    facts = model_facts(path)
    if facts.quant_format != "QDQ":
        return invalid(
            f"{path.name} is {facts.quant_format!r}, not static QDQ: quantize it with quantize_static and a "
            "reader, as section 5 does."
        )
    grid, inside = np.asarray(grid, dtype=np.float32), np.asarray(inside, dtype=bool)
    yours, lessons = _grid_drift(fp32_path, path, grid), _grid_drift(fp32_path, lesson_path, grid)
    figures = (
        f"largest drift outside the training range {lessons[~inside].max():.2f} → {yours[~inside].max():.2f}, "
        f"inside it {lessons[inside].max():.2f} → {yours[inside].max():.2f} (the lesson's file → yours)"
    )
    if yours[~inside].max() >= 0.5 * lessons[~inside].max():
        return wrong(
            f"Not yet: {figures}. Calibrate on the training points and the edge set together "
            "(np.vstack([moons.x_train, moons.x_edge])), so that the calibrated ranges reach where the edge "
            "points go.",
        )
    return CheckResult(
        True,
        f"Calibrated on the edge set too: {figures}. Static quantization clips every activation to the range "
        "it saw in calibration; with the edge points in the calibration data the ranges reach past the training "
        "points, so little is clipped out there. The same 256 levels now cover a wider range, each step coarser: "
        "the drift inside the range says whether that cost anything here.",
    )
