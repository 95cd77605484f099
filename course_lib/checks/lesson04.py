"""Self-checks for lesson 04 (parity)."""

from __future__ import annotations

import numpy as np

from .result import CheckResult, needs_answer

# Lesson 04, exercise 3: the reasons a learner may give for a variant failing the acceptance rule.
FAILURE_REASONS = {
    "U8S8 saturation": (
        "full 8-bit weights on an x86 CPU without VNNI, where the U8S8 kernel (VPMADDUBSW) adds each pair "
        "of u8 × s8 products into a 16-bit sum that saturates; reduce_range's 7-bit weights prevent it"
    ),
    "per-tensor scale": "one weight scale per layer, so the channel with the widest weights sets the step for all",
    "calibration": (
        "calibration data unlike the real inputs (10 images, the wrong normalisation), so the stored ranges "
        "clip or waste codes from the model's input on"
    ),
    "7-bit weights": "reduce_range keeps 7 bits of each weight, one bit of precision given up",
    "none of these": "it is this CPU's production choice: no setting was changed to break it",
}


def _failure_cause(variant: str, saturates: bool) -> str:
    """The reason lesson 04's `variant` would fail: the one setting it changes from the production choice
    (full 8-bit per-channel weights where U8S8 cannot saturate, reduce_range where it can)."""
    if variant == "weak calibration":
        return "calibration"
    if variant == "per-tensor":
        return "per-tensor scale"
    if variant == "per-channel" and saturates:
        return "U8S8 saturation"
    if variant == "per-channel, reduce_range" and not saturates:
        return "7-bit weights"
    return "none of these"


@needs_answer(
    "answer",
    hint='write your prediction as {variant: reason}, e.g. {"per-tensor": "per-tensor '
    'scale"}, or {} if you expect none to fail.',
)
def check_failing_variants(
    answer: dict[str, str] | str | None, verdicts: dict, saturates: bool | None = None
) -> CheckResult:
    """Exercise (predict, then check): which of lesson 04's variants fail the acceptance rule on this CPU,
    and why. `answer` maps each variant expected to fail to one of FAILURE_REASONS ({} for none fails);
    `verdicts` maps each variant to its measured `measure.acceptance` verdict; `saturates` is whether
    U8S8 can saturate on the CPU (default: this CPU's `hardware.u8s8_can_saturate()`)."""
    if isinstance(answer, str) and answer.strip().lower() in ("none", "none fails"):
        answer = {}
    if not isinstance(answer, dict):
        return CheckResult(
            False,
            f"Got a {type(answer).__name__}; write a dict that gives each variant you expect to fail its "
            'reason, e.g. {"per-tensor": "per-tensor scale"}, or {} if none fails.',
        )
    unknown = [name for name in answer if name not in verdicts]
    if unknown:
        return CheckResult(
            False, f"{unknown[0]!r} is not one of the variants: {', '.join(map(repr, verdicts))}."
        )
    reasons = {reason.lower(): reason for reason in FAILURE_REASONS}
    odd = [reason for reason in answer.values() if str(reason).strip().lower() not in reasons]
    if odd:
        return CheckResult(
            False, f"{odd[0]!r} is not one of the reasons: {', '.join(map(repr, FAILURE_REASONS))}."
        )
    if saturates is None:
        from ..hardware import u8s8_can_saturate

        saturates = u8s8_can_saturate()
    guess = {name: reasons[str(reason).strip().lower()] for name, reason in answer.items()}
    failing = [name for name, v in verdicts.items() if not v.passes]
    cpu = (
        "This CPU is x86 without VNNI: its U8S8 kernel can saturate."
        if saturates
        else "This CPU has VNNI (or is not x86): its U8S8 kernel cannot saturate."
    )

    def figures(name: str) -> str:
        v = verdicts[name]
        return f"drop {v.drop_points:+.2f} points, agreement {v.agreement:.2%}"

    def why(name: str) -> str:  # a measured failure and its cause
        cause = _failure_cause(name, saturates)
        text = f"{name} fails ({figures(name)}) from {cause!r}: {FAILURE_REASONS[cause]}"
        if cause == "calibration" and "calibration" not in verdicts[name].advice:
            text += f"; the rule's advice ({verdicts[name].advice!r}) is only a first guess"
        return text + "."

    def not_that(name: str) -> str:  # why the learner's reason cannot be the cause of `name`, or ""
        cause, note = _failure_cause(name, saturates), ""
        if guess.get(name) == "U8S8 saturation" and cause != "U8S8 saturation":
            note = f" {name} stores 7-bit weights here, which cannot saturate." if saturates else f" {cpu}"
        if cause == "none of these":
            note += " It is this CPU's production choice: no setting was changed to break it."
        return note

    measured = f"Measured here: {'; '.join(failing) or 'none'} fail{'s' if len(failing) == 1 else ''}."
    if set(guess) != set(failing):
        notes = [f"You missed: {why(name)}" for name in failing if name not in guess]
        for name in (n for n in guess if n not in failing):
            reason = not_that(name) or " What it changes costs precision, but too little to break the rule."
            notes.append(f"{name} passes ({figures(name)}).{reason}")
        return CheckResult(False, " ".join([measured, *notes]))
    wrong = [name for name in failing if guess[name] != _failure_cause(name, saturates)]
    if wrong:
        notes = [f"For {name} you said {guess[name]!r}, but {why(name)}{not_that(name)}" for name in wrong]
        return CheckResult(False, " ".join([measured, "Right variants, wrong reason.", *notes]))
    elsewhere = (
        "On a CPU with VNNI the answer differs: nothing saturates there, and full 8-bit per-channel "
        "weights are the production choice."
        if saturates
        else "On an x86 CPU without VNNI the answer can differ: full 8-bit weights may saturate there, and "
        "reduce_range is the production choice."
    )
    explained = " ".join(why(name) for name in failing) or "Every variant passes."
    return CheckResult(True, f"Right. {cpu} {explained} {elsewhere}")


@needs_answer("answer", hint="set answer_3 to the path of your quantized file.")
def check_capstone(answer, fp32_path, x: np.ndarray, labels: np.ndarray) -> CheckResult:
    """Capstone: a statically quantized (QDQ) copy of a model the course did not build, accepted by
    the acceptance rule on (x, labels) against the fp32 file."""
    from pathlib import Path

    from ..kernels import kernels
    from ..measure import acceptance, logits, model_facts, parity

    path = Path(answer)
    if not path.is_file():
        return CheckResult(False, f"Found no file at {path}: pass the output path you gave quantize_static.")
    facts = model_facts(path)
    if facts.quant_format == "float":
        return CheckResult(
            False, f"{path.name} holds no quantized op: pass quantize_static's output, not its input."
        )
    if "dynamic" in facts.quant_format:
        return CheckResult(
            False,
            f"{path.name} is dynamically quantized; the capstone asks for static QDQ: quantize_static with a "
            "CalibrationDataReader and quant_format=QuantFormat.QDQ.",
        )
    p = parity(logits(fp32_path, x), logits(path, x), labels)  # a scikit-learn export's probabilities
    verdict = acceptance(p)
    figures = (
        f"accuracy {p.reference_accuracy:.2%} → {p.candidate_accuracy:.2%} ({-verdict.drop_points:+.2f} points), "
        f"agreement {p.agreement:.2%}"
    )
    if verdict.passes:
        ran = kernels(path)
        return CheckResult(
            True,
            f"Accepted: {figures}; {ran.integer_count} of {ran.compute_count} compute ops on integer kernels "
            f"here ({ran.types}), {facts.file_bytes / Path(fp32_path).stat().st_size:.0%} of the fp32 file.",
        )
    if p.agreement < 0.9:
        hint = (
            " Agreement this low means the ranges do not fit the data: calibrate with the model's own "
            "preprocessing (flattened, scaled to [0, 1]), the wrong-preprocessing trap of lesson 03."
        )
    else:
        quantized = sorted({q["op_type"] for q in facts.quantized_nodes})
        hint = (
            f" Your file quantizes {', '.join(quantized)}. Two things to try, measuring after each: calibrate on "
            "representative inputs with the model's own preprocessing (lesson 03); and on a small MLP quantize "
            "only the matrix products (op_types_to_quantize=['MatMul']), since each re-quantized output (after "
            "the bias Add, the Softmax) costs agreement."
        )
    return CheckResult(False, f"Not accepted: {figures}; {verdict.advice}.{hint}")


def _paired_change(parity) -> tuple[float, float, float, int, int, int]:
    """(change, standard error, z, b, c, n) of candidate minus reference accuracy, in fractions: b images
    only the reference gets right, c only the candidate, out of n (the paired, McNemar, interval)."""
    import math

    n, b, c = parity.labelled, parity.only_reference_right, parity.only_candidate_right
    change = (c - b) / n
    return change, math.sqrt(max(b + c - (c - b) ** 2 / n, 0.0)) / n, 1.959964, b, c, n


@needs_answer("interval", hint="set answer_1 to (low, high), in points.")
def check_paired_interval(interval, within_noise, parity) -> CheckResult:
    """Exercise (write code, then interpret): the 95 % paired interval of a candidate's accuracy minus the
    reference's, in points, computed by hand from the counts; and whether the change is within the noise."""
    try:
        low, high = (float(v) for v in interval)
    except (TypeError, ValueError):
        return CheckResult(
            False, f"Give the interval as two numbers, (low, high) in points; got {interval!r:.60}."
        )
    change, se, z, b, c, n = _paired_change(parity)
    want = (100 * (change - z * se), 100 * (change + z * se))
    tol = max(0.01, 0.02 * (want[1] - want[0]))

    def near(lo: float, hi: float) -> bool:
        return abs(low - lo) <= tol and abs(high - hi) <= tol

    if low > high:
        low, high = high, low
    if not near(*want):
        pa, pb = parity.candidate_accuracy, parity.reference_accuracy
        unpaired = 100 * z * ((pa * (1 - pa) + pb * (1 - pb)) / n) ** 0.5
        hints = [
            (
                abs(low - want[0] / 100) <= tol / 100 and abs(high - want[1] / 100) <= tol / 100,
                "Those are fractions; the interval is asked in points: multiply by 100.",
            ),
            (
                near(-want[1], -want[0]),
                "The sign is the other way round: the change is candidate minus reference, (c - b) / n, "
                f"with c = {c} images only INT8 gets right and b = {b} only fp32 gets right.",
            ),
            (
                near(100 * (change - se), 100 * (change + se)),
                "That is one standard error either side; a 95 % interval is 1.96 standard errors either side.",
            ),
            (
                near(100 * change - unpaired, 100 * change + unpaired),
                f"That is the unpaired interval (±{unpaired:.2f} points), as if the two accuracies came from "
                "different images. Both models saw the same images: use only the b + c images on which exactly one "
                "is right, sqrt(b + c - (c - b)²/n) / n.",
            ),
        ]
        hint = next(
            (text for hit, text in hints if hit),
            "Use (c - b)/n ± 1.96·sqrt(b + c - (c - b)²/n)/n, times 100.",
        )
        return CheckResult(
            False, f"Got ({low:+.3f}, {high:+.3f}), expected ({want[0]:+.3f}, {want[1]:+.3f}). {hint}"
        )
    noise = want[0] <= 0 <= want[1]
    if within_noise is None:
        return CheckResult(
            False, "The interval is right. Now answer_1_noise: is the change within the noise?"
        )
    if bool(within_noise) != noise:
        reason = (
            "The interval contains 0: a change of zero is as consistent with these images as the one measured."
            if noise
            else "The interval lies wholly on one side of 0: these images resolve a real change."
        )
        return CheckResult(False, f"The interval is right, the reading is not. {reason}")
    verdict = (
        "within the noise: on these images the INT8 model's accuracy cannot be told from fp32's"
        if noise
        else f"a real {'gain' if change > 0 else 'loss'}: the whole interval lies on one side of 0"
    )
    return CheckResult(
        True,
        f"Right: {want[0]:+.2f} to {want[1]:+.2f} points, {verdict}. Only {b + c} of the {n:,} images moved it "
        f"({c} only INT8 right, {b} only fp32 right); the images both get right or both get wrong cancel out.",
    )
