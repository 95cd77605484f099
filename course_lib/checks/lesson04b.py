"""Self-checks for lesson 04b (where errors gather: debugging with qdq_loss_debug, drift at the edges)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .result import CheckResult, needs_answer

# Exercise 1: which of the weak calibration's two planted faults breaks it.
CALIBRATION_FAULTS = ("the 10 images", "the normalisation", "both")


def _input_range(path, input_name: str) -> tuple[float, float] | None:
    """The float range the input's QuantizeLinear can represent, or None if the input is not quantized."""
    import onnx
    from onnx import numpy_helper

    graph = onnx.load(str(path), load_external_data=False).graph
    weights = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "QuantizeLinear" and node.input[0] == input_name:
            scale = float(np.asarray(weights[node.input[1]]).reshape(-1)[0])
            zero = np.asarray(weights[node.input[2]])
            info = np.iinfo(zero.dtype)
            z = int(zero.reshape(-1)[0])
            return (info.min - z) * scale, (info.max - z) * scale
    return None


@needs_answer(
    "guess",
    hint=f"write your prediction in answer_1_guess first, one of {', '.join(map(repr, CALIBRATION_FAULTS))}.",
)
def check_calibration_cause(guess: str | None, answer, reference_logits, x, labels) -> CheckResult:
    """Exercise (predict, then measure): which of the weak calibration's faults (10 images, the wrong
    normalisation) breaks it. `guess`: one of CALIBRATION_FAULTS; `answer`: the path of a model quantized
    with 10 images through the production preprocessing; `reference_logits`: the fp32 model's on `x`,
    which holds production-preprocessed inputs with their `labels`."""
    from ..measure import acceptance, logits, model_facts, parity

    if str(guess).strip().lower() not in CALIBRATION_FAULTS:
        return CheckResult(False, f"{guess!r} is not one of {', '.join(map(repr, CALIBRATION_FAULTS))}.")
    guess = str(guess).strip().lower()
    if answer is None:
        return CheckResult(
            False,
            "Now measure: quantize with cl.DatasetReader(fp32, count=10) (the production preprocessing) and set "
            "answer_1 to the file's path.",
        )
    path = Path(answer)
    if not path.is_file():
        return CheckResult(False, f"Found no file at {path}: pass the output path you gave quantize_static.")
    facts = model_facts(path)
    if facts.quant_format != "QDQ":
        return CheckResult(
            False,
            f"{path.name} is {facts.quant_format!r}, not static QDQ: quantize it as section 1 does (`quantize`).",
        )
    import onnx

    name = onnx.load(str(path), load_external_data=False).graph.input[0].name
    found, want = _input_range(path, name), (float(np.min(x)), float(np.max(x)))
    span = want[1] - want[0]
    if found is None or abs(found[0] - want[0]) > 0.1 * span or abs(found[1] - want[1]) > 0.1 * span:
        shown = "not quantized" if found is None else f"[{found[0]:.2f}, {found[1]:.2f}]"
        return CheckResult(
            False,
            f"Your file's input range is {shown}, the production preprocessing's [{want[0]:.2f}, {want[1]:.2f}]. "
            "Calibrate through the production preprocessing (DatasetReader's default transform), not "
            "half_normalised: only the count should change.",
        )
    p = parity(reference_logits, logits(path, x), labels)
    verdict = acceptance(p)
    figures = f"accuracy change {-verdict.drop_points:+.2f} points, agreement {p.agreement_text()}"
    if verdict.passes:
        truth = (
            f"Ten images through the production preprocessing pass the acceptance rule ({figures}): the count "
            "was not what broke the weak calibration, the normalisation was. MinMax keeps each tensor's smallest "
            "and largest value, and ten images already reach the input's whole range (every Fashion-MNIST image has "
            "a black background, and nearly all reach full white). The wrong normalisation calibrated the input on [-1, 1], while the model sees "
            f"[{want[0]:.2f}, {want[1]:.2f}]: every pixel the production preprocessing maps above 1 is clipped "
            "at the first layer, the low first-layer SQNR of section 3."
        )
        note = {
            "the normalisation": "You predicted it.",
            "the 10 images": "You blamed the count: a common guess, and here a wrong one.",
            "both": "You blamed both: the normalisation alone is enough to break it.",
        }[guess]
    else:
        truth = (
            f"Ten images through the production preprocessing still fail here ({figures}, {verdict.advice}): "
            "the count matters on this model too. Whether the normalisation alone would also break it takes "
            "the other experiment: 200 images, half-normalised."
        )
        note = {
            "the normalisation": "You blamed only the normalisation: the count fails it here as well.",
            "the 10 images": "You blamed the count: this run agrees.",
            "both": "You blamed both: this run shows the count matters.",
        }[guess]
    return CheckResult(True, f"{truth} {note}")


def _grid_drift(fp32_path, int8_path, grid: np.ndarray) -> np.ndarray:
    """Per grid point, the largest |int8 logit - fp32 logit| of a two-input model."""
    from ..measure import logits

    return np.abs(logits(int8_path, grid, threads=1) - logits(fp32_path, grid, threads=1)).max(axis=1)


@needs_answer("answer", hint="set answer_2 to the path of your quantized MLP.")
def check_edge_calibration(answer, fp32_path, lesson_path, grid, inside) -> CheckResult:
    """Exercise (write code, then measure): the two-moons MLP quantized statically with the edge set in its
    calibration data. Passes when its largest drift over the grid points outside the training range
    (`inside` False) falls to less than half of the lesson's file's (`lesson_path`, calibrated on the training
    points alone); the feedback gives both files' drift inside and outside the range."""
    from ..measure import model_facts

    path = Path(answer)
    if not path.is_file():
        return CheckResult(False, f"Found no file at {path}: pass the output path you gave quantize_static.")
    facts = model_facts(path)
    if facts.quant_format != "QDQ":
        return CheckResult(
            False,
            f"{path.name} is {facts.quant_format!r}, not static QDQ: quantize it with quantize_static and a "
            "reader, as section 5 does.",
        )
    grid, inside = np.asarray(grid, dtype=np.float32), np.asarray(inside, dtype=bool)
    yours, lessons = _grid_drift(fp32_path, path, grid), _grid_drift(fp32_path, lesson_path, grid)
    figures = (
        f"largest drift outside the training range {lessons[~inside].max():.2f} → {yours[~inside].max():.2f}, "
        f"inside it {lessons[inside].max():.2f} → {yours[inside].max():.2f} (the lesson's file → yours)"
    )
    if yours[~inside].max() >= 0.5 * lessons[~inside].max():
        return CheckResult(
            False,
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
