"""Self-checks for lesson 04 (parity)."""

from __future__ import annotations

import math

import numpy as np

from .result import CheckResult, invalid, needs_answer, wrong

# Exercise 2: the reasons a learner may give for a variant failing the acceptance rule.
FAILURE_REASONS = {
    "U8S8 saturation": (
        "full 8-bit weights on an x86 CPU without VNNI, where the U8S8 kernel (VPMADDUBSW) adds each pair "
        "of u8 × s8 products into a 16-bit sum that saturates; reduce_range's 7-bit weights prevent it"
    ),
    "per-tensor scale": "one weight scale per layer, so the channel with the widest weights sets the step for all",
    "calibration data": (
        "calibration data unlike the real inputs (10 images, the wrong normalisation), so the stored ranges "
        "clip or waste codes from the model's input on"
    ),
    "7-bit weights": "reduce_range keeps 7 bits of each weight, one bit of precision given up",
    "none of these": "it is this CPU's production choice: no setting was changed to break it",
}
_ALIASES = {"calibration": "calibration data"}  # the earlier name of the reason


def _failure_cause(variant: str, saturates: bool) -> str:
    """The reason lesson 04's `variant` would fail: the one setting it changes from the production choice
    (full 8-bit per-channel weights where U8S8 cannot saturate, reduce_range where it can)."""
    if variant == "weak calibration":
        return "calibration data"
    if variant == "per-tensor":
        return "per-tensor scale"
    if variant == "per-channel" and saturates:
        return "U8S8 saturation"
    if variant == "per-channel, reduce_range" and not saturates:
        return "7-bit weights"
    return "none of these"


@needs_answer(
    "answer",
    hint='write your prediction in section 1 as {variant: reason}, e.g. {"per-tensor": "per-tensor '
    'scale"}, or {} if you expect no variant to fail.',
)
def check_failing_variants(
    answer: dict[str, str] | str | None, verdicts: dict, saturates: bool | None = None
) -> CheckResult:
    """Exercise (predict, before the verdicts): which of lesson 04's variants fail the acceptance rule on
    this CPU, and why. `answer` maps each variant expected to fail to one of FAILURE_REASONS ({}: none);
    `verdicts` maps each variant to its measured `measure.acceptance` verdict; `saturates` is whether
    U8S8 can saturate on the CPU (default: this CPU's `hardware.u8s8_can_saturate()`).

    A wrong prediction's feedback says how many variants it got wrong and where to look, never which
    variants fail or why (the verdicts table shows the first; the reasoning is the exercise)."""
    if isinstance(answer, str) and answer.strip().lower() in ("none", "none fails"):
        answer = {}
    if not isinstance(answer, dict):
        return invalid(
            f"Got a {type(answer).__name__}; write a dict that gives each variant you expect to fail its "
            'reason, e.g. {"per-tensor": "per-tensor scale"}, or {} if you expect no failure.'
        )
    unknown = [name for name in answer if name not in verdicts]
    if unknown:
        return invalid(f"{unknown[0]!r} is not one of the variants: {', '.join(map(repr, verdicts))}.")
    reasons = {reason.lower(): reason for reason in FAILURE_REASONS} | _ALIASES
    odd = [reason for reason in answer.values() if str(reason).strip().lower() not in reasons]
    if odd:
        return invalid(f"{odd[0]!r} is not one of the reasons: {', '.join(map(repr, FAILURE_REASONS))}.")
    if saturates is None:
        from course_machinery.hardware import u8s8_can_saturate

        saturates = u8s8_can_saturate()
    guess = {name: reasons[str(reason).strip().lower()] for name, reason in answer.items()}
    failing = [name for name, v in verdicts.items() if not v.passes]
    cpu = (
        "This CPU is x86 without VNNI: its U8S8 kernel can saturate."
        if saturates
        else "This CPU has VNNI (or is not x86): its U8S8 kernel cannot saturate."
    )
    look = (
        "For each variant that fails, ask which one setting it changes from the production choice "
        "(section 1) and what lesson 03 said that setting does on this CPU."
    )
    if set(guess) != set(failing):
        passing = [name for name in guess if name not in failing]
        missed = [name for name in failing if name not in guess]
        parts = []
        if passing:
            parts.append(
                f"{len(passing)} of the variants you predicted to fail pass{'es' if len(passing) == 1 else ''} here"
            )
        if missed:
            parts.append(
                f"{len(missed)} that fail{'s' if len(missed) == 1 else ''} here {'is' if len(missed) == 1 else 'are'} missing"
            )
        causes = [_failure_cause(name, saturates) for name in missed]
        return wrong(
            f"Not what this run measured: {' and '.join(parts)}. Section 2's table shows which variants "
            f"pass. {cpu} {look}",
            *missed,
            *causes,
        )
    off = [name for name in failing if guess[name] != _failure_cause(name, saturates)]
    if off:
        return wrong(
            f"Right variants, but the reason is not right for {', '.join(off)}. {look} {cpu}",
            *(_failure_cause(name, saturates) for name in off),
        )

    def why(name: str) -> str:  # a measured failure and its cause
        cause, v = _failure_cause(name, saturates), verdicts[name]
        text = (
            f"{name} fails (drop {v.drop_points:+.2f} points, agreement {v.agreement:.2%}) from {cause!r}: "
            f"{FAILURE_REASONS[cause]}"
        )
        if cause == "calibration data" and "calibration" not in v.advice:
            text += f"; the rule's advice ({v.advice!r}) is only a first guess"
        return text + "."

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

    from course_lib.kernels import kernels
    from course_lib.measure import acceptance, logits, model_facts, parity

    path = Path(answer)
    if not path.is_file():
        return invalid(f"Found no file at {path}: pass the output path you gave quantize_static.")
    facts = model_facts(path)
    if facts.quant_format == "float":
        return invalid(f"{path.name} holds no quantized op: pass quantize_static's output, not its input.")
    if "dynamic" in facts.quant_format:
        return invalid(
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
    return wrong(f"Not accepted: {figures}; {verdict.advice}.{hint}")


@needs_answer("prediction", message="Write your guess in answer_1_guess first: a number of test images.")
@needs_answer("answer", hint="compute the number of images in answer_1.")
def check_unpaired_images(prediction, answer, parity) -> CheckResult:
    """Exercise (predict, then compute): how many test images the unpaired comparison of a candidate's
    accuracy with the reference's would need to be as narrow as the paired interval is on these images:
    n × (unpaired half-width / paired half-width)², since an interval narrows with the square root of
    the number of images."""
    try:
        got = float(answer)
    except (TypeError, ValueError):
        return invalid(f"Give a number of images; got {answer!r:.60}.")
    try:
        guess = float(prediction)
    except (TypeError, ValueError):
        return invalid(f"answer_1_guess is a number of images; got {prediction!r:.60}.")
    n, pr, pc = parity.labelled, parity.reference_accuracy, parity.candidate_accuracy
    low, high = parity.accuracy_change_interval()
    paired = (high - low) / 2
    if paired <= 0:
        return invalid(
            "On these images no image is right in one model only: the paired interval has no width, and no "
            "number of images makes an unpaired one as narrow. Use the test set."
        )
    z = 1.959964
    unpaired = 100 * z * math.sqrt((pr * (1 - pr) + pc * (1 - pc)) / n)
    single = 100 * z * math.sqrt(pr * (1 - pr) / n)
    ratio = unpaired / paired
    expected = n * ratio**2

    def near(value: float) -> bool:
        return value > 0 and abs(got / value - 1) <= 0.03

    if not near(expected):
        hints = [
            (
                near(n * ratio),
                "That scales the images by the ratio of the two widths. A width falls with the square root of "
                "the number of images: a k times narrower interval takes k² times the images.",
            ),
            (
                near(ratio**2),
                "That is how many times the test set; the question asks for images: multiply by the number "
                "of test images.",
            ),
            (
                near(expected * 1e4) or near(expected / 1e4),
                "One half-width is in fractions and the other in points: put both in points (× 100).",
            ),
            (
                near(n * (single / paired) ** 2),
                "That uses one accuracy's interval. The unpaired difference of two accuracies adds both their "
                "variances: p1(1 - p1) + p2(1 - p2).",
            ),
        ]
        hint = next(
            (text for hit, text in hints if hit),
            "Compute both half-widths in points, divide the unpaired one by the paired one, square the ratio, "
            "and scale the number of test images by it.",
        )
        return wrong(f"Got {got:,.0f} images: not this run's number. {hint}", expected)
    factor = max(guess, 1.0) / expected
    if 0.5 <= factor <= 2:
        said = f"you guessed {guess:,.0f}, within a factor of two"
    else:
        said = f"you guessed {guess:,.0f}, {'over' if factor > 1 else 'under'} by a factor of {max(factor, 1 / factor):,.0f}"
    b, c = parity.only_reference_right, parity.only_candidate_right
    return CheckResult(
        True,
        f"Right: about {expected:,.0f} images, {ratio**2:,.0f} times the {n:,} test images; {said}. That is "
        f"what pairing is worth here: the paired interval (±{paired:.2f} points) rests on the {b + c} images "
        f"on which exactly one model is right, while the unpaired one (±{unpaired:.2f}) carries the "
        "uncertainty of both accuracies.",
    )
