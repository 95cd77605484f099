"""Self-checks for lesson 05c (a second runtime: OpenVINO).

Where OpenVINO is not installed, each check passes with the line that says how to install it: the
lesson runs there, and its exercises wait for the package."""

from __future__ import annotations

from .result import CheckResult, invalid, needs_answer, speedup_interval, wrong


def _without_openvino() -> CheckResult | None:
    from course_machinery.runtimes import INSTALL_HINT, openvino_or_none

    if openvino_or_none() is not None:
        return None
    return CheckResult(
        True,
        f"OpenVINO is not installed here, so this exercise has nothing to compile: {INSTALL_HINT}; then "
        "restart the kernel and run the notebook again.",
    )


def _integer_convs(compiled) -> tuple[int, int]:
    from course_machinery.runtimes import kernel_precision, runtime_layers

    convs = [lay for lay in runtime_layers(compiled) if lay.layer_type == "Convolution"]
    integer = [
        lay
        for lay in convs
        if lay.runtime_precision in ("u8", "i8") and kernel_precision(lay.primitive) in ("u8", "i8", "")
    ]
    return len(integer), len(convs)


@needs_answer("guess", message='Write your prediction in answer_1_guess first: "integer" or "float".')
def check_pinned_integer_convs(guess: str, answer, path, threads: int, compiled=None) -> CheckResult:
    """Exercise (predict, then check, lesson 05c): the U8S8 file at `path` compiled by OpenVINO with f32
    pinned. `guess`: "integer" or "float", whether its convolutions still run on integer kernels;
    `answer`: how many of its convolution layers run on integer kernels. The check compiles the file
    itself (or reads `compiled`, a model compiled so)."""
    skipped = _without_openvino()
    if skipped is not None:
        return skipped
    said = str(guess).strip().lower()
    if said not in ("integer", "float"):
        return invalid(f'Got {guess!r} as the prediction; write "integer" or "float".')
    if answer is None:
        return invalid(
            "No answer yet: compile the U8S8 file with f32 pinned and count its integer convolutions "
            "(integer_convs)."
        )
    try:
        got = int(answer)
    except (TypeError, ValueError):
        return invalid(f"Got {answer!r}; give one whole number, a count of convolution layers.")
    if compiled is None:
        from course_machinery.runtimes import require_openvino

        compiled = (
            require_openvino()
            .Core()
            .compile_model(
                str(path), "CPU", {"INFERENCE_NUM_THREADS": threads, "INFERENCE_PRECISION_HINT": "f32"}
            )
        )
    expected, convs = _integer_convs(compiled)
    if got != expected:
        return wrong(
            f"Got {got}: count the Convolution layers of the f32-pinned compile that run on integer kernels "
            "(an integer runtime precision, and a kernel whose name does not end in a float type), as "
            "integer_convs does.",
            expected,
        )
    actual = "integer" if expected == convs else "float" if expected == 0 else "mixed"
    verdict = "as you predicted" if said == actual else f"you predicted {said!r}"
    why = {
        "integer": "Pinning f32 sets the type of the float layers only: the file's FakeQuantize ranges still "
        "ask for integers, and this CPU has integer kernels for them with f32 around them. The refused S8S8 "
        "file's retry on an AMX Xeon did not keep them: the kernel a runtime finds depends on the file, the "
        "precision and the CPU together.",
        "float": "Pinning f32 moved the convolutions to float kernels, as the refused S8S8 file's retry did on "
        "an AMX Xeon: on this CPU the U8S8 file's INT8 speed rests on OpenVINO's default precision.",
        "mixed": "Some convolutions kept integer kernels and some did not: read the kernels, not the label.",
    }[actual]
    return CheckResult(
        True,
        f"{expected} of {convs} convolutions ran on integer kernels with f32 pinned ({actual}); {verdict}. {why}",
    )


@needs_answer(
    "guess", message='Write your prediction in answer_2_guess first: "larger", "smaller" or "same".'
)
def check_batch_one_gain(guess: str, answer, at_64) -> CheckResult:
    """Exercise (predict, then measure, lesson 05c): OpenVINO's U8S8 run timed in turn with ONNX Runtime's
    fp32 at batch 1 (`answer`, a LatencyComparison, fp32 first), against the same pair at batch 64
    (`at_64`). `guess`: "larger", "smaller" or "same", the gain at batch 1 against the gain at 64."""
    skipped = _without_openvino()
    if skipped is not None:
        return skipped
    words = ("larger", "smaller", "same")
    said = str(guess).strip().lower()
    if said not in words:
        return invalid(f'Got {guess!r} as the prediction; write "larger", "smaller" or "same".')
    if answer is None:
        return invalid("No answer yet: time the pair in turn at batch 1 with measure.compare_latency.")
    if not hasattr(answer, "speedup_at_least"):
        return invalid(
            f"Got {type(answer).__name__}; give the LatencyComparison that compare_latency returns."
        )
    if "openvino" in answer.baseline.lower():
        return invalid(
            "Put ONNX Runtime's fp32 file first in the dict you time, so the ratio is fp32's time over OpenVINO's."
        )
    if any(lat.batch_size != 1 for lat in answer.latency.values()):
        return invalid('Time it at batch 1: the feed {"input": x[:1]}.')
    if at_64 is None:
        return CheckResult(
            True,
            f"{speedup_interval(answer)} at batch 1; section 3 has no batch-64 U8S8 run to set it beside.",
        )
    if answer.speedup_high < at_64.speedup_low:
        actual = "smaller"
    elif answer.speedup_low > at_64.speedup_high:
        actual = "larger"
    else:
        actual = "same"
    verdict = "as you predicted" if said == actual else f"you predicted {said!r}"
    why = {
        "smaller": "At batch 1 each weight is used a few times per run: the run waits on memory and on fixed "
        "costs per layer, where OpenVINO's INT8 convolution kernels have little arithmetic to speed up "
        "(lesson 05b, section 4).",
        "larger": "At batch 1 the smaller weights and OpenVINO's fused layers paid more than its kernels did at "
        "batch 64 on this CPU: the gain follows the CPU's memory and cache, not only its instructions.",
        "same": "The two intervals overlap: at these settings the run cannot tell the two gains apart.",
    }[actual]
    return CheckResult(
        True,
        f"{actual.capitalize()}: {speedup_interval(answer)} at batch 1 against {speedup_interval(at_64)} at "
        f"batch 64; {verdict}. {why}",
    )
