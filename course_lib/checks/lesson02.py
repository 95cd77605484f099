"""Self-checks for lesson 02 (dynamic quantization)."""

from __future__ import annotations

import numpy as np

from .result import CheckResult


def check_size_ratio(answer: float, int8_path, fp32_path) -> CheckResult:
    """Exercise: the INT8 file's size as a fraction of the fp32 file's."""
    from pathlib import Path

    if answer is None:
        return CheckResult(False, "No answer yet: replace None with your computation.")
    q, f = Path(int8_path).stat().st_size, Path(fp32_path).stat().st_size
    expected = q / f
    if np.isclose(float(answer), expected, rtol=1e-3):
        return CheckResult(
            True,
            f"{expected:.3f}: the INT8 file is {1 / expected:.2f}x smaller. Not exactly 4x: the biases, "
            "LayerNorm parameters and scales stay float32, and the graph itself takes bytes too.",
        )
    if np.isclose(float(answer), f / q, rtol=1e-3):
        return CheckResult(
            False, f"{answer:.3f} is fp32 / int8; the question asks int8 / fp32 = {expected:.3f}."
        )
    return CheckResult(
        False,
        f"Got {answer}, expected {expected:.3f}: Path(int8).stat().st_size / Path(fp32).stat().st_size.",
    )


def check_dynamic_quantize_count(answer: int, int8_path) -> CheckResult:
    """Exercise: how many DynamicQuantizeLinear nodes a dynamically quantized model holds."""
    from ..measure import model_facts

    if answer is None:
        return CheckResult(False, "No answer yet: replace None with your computation.")
    counts = model_facts(int8_path).op_counts
    expected = counts.get("DynamicQuantizeLinear", 0)
    if int(answer) == expected:
        integer = counts.get("ConvInteger", 0) + counts.get("MatMulInteger", 0)
        return CheckResult(
            True,
            f"{expected} range measurements per run for {integer} integer ops: ops that read the same "
            "activation share one DynamicQuantizeLinear.",
        )
    hint = ""
    if int(answer) == counts.get("ConvInteger", 0) + counts.get("MatMulInteger", 0):
        hint = " You counted the integer ops; several of them share one quantized input."
    return CheckResult(
        False, f"Got {answer}, expected {expected}.{hint} Read op_counts['DynamicQuantizeLinear']."
    )


def check_dynamic_quantize_prediction(prediction: int, answer: int, int8_path) -> CheckResult:
    """Exercise (predict, then check): how many DynamicQuantizeLinear nodes quantize_dynamic added to
    a model in which some MatMuls read the same activation."""
    import onnx

    if prediction is None:
        return CheckResult(False, "Write your guess in answer_4_guess first, before you count.")
    if answer is None:
        return CheckResult(
            False,
            "No answer yet: count them with measure.model_facts(path).op_counts['DynamicQuantizeLinear'].",
        )
    graph = onnx.load(str(int8_path), load_external_data=False).graph
    quantizers = [n for n in graph.node if n.op_type == "DynamicQuantizeLinear"]
    integer_ops = [n for n in graph.node if n.op_type in ("MatMulInteger", "ConvInteger")]
    expected, ops = len(quantizers), len(integer_ops)
    if int(answer) != expected:
        hint = " Read op_counts['DynamicQuantizeLinear'] of the quantized file."
        if int(answer) == ops:
            hint = f" {ops} is the number of integer ops; some of them read the same quantized tensor."
        elif int(answer) == 0:
            hint = " 0 is the float model's count; count in the quantized file (tiny_int8)."
        return CheckResult(False, f"Got {answer}, expected {expected}.{hint}")
    readers = {q.input[0]: sum(op.input[0] == q.output[0] for op in integer_ops) for q in quantizers}
    shared = ", ".join(f"{tensor} (read by {n})" for tensor, n in readers.items())
    weights = {t.name for t in graph.initializer}
    graph_inputs = [i.name for i in graph.input if i.name not in weights]
    if int(prediction) == expected:
        verdict = "You predicted it."
    elif int(prediction) == ops:
        verdict = (
            f"You predicted one per MatMul ({ops}): the quantizer quantizes each activation once, and every "
            "integer op that reads it reuses the same codes, scale and zero point."
        )
    elif int(prediction) == 0:
        verdict = (
            "You predicted none: dynamic quantization stores only the weights as integers. The activations "
            "stay float in the file, and a DynamicQuantizeLinear node quantizes each one on every run."
        )
    elif int(prediction) == len(graph_inputs):
        verdict = (
            f"You predicted one per graph input ({len(graph_inputs)}): tensors computed inside the graph are "
            "float too, and each one an integer op reads gets its own DynamicQuantizeLinear."
        )
    else:
        verdict = f"You predicted {prediction}: count the distinct activation tensors the MatMuls read."
    return CheckResult(
        True,
        f"{expected} DynamicQuantizeLinear nodes for {ops} integer ops, one per activation they read: "
        f"{shared}. {verdict}",
    )


def check_max_abs_drift(answer: float, int8_path, fp32_path, inputs: np.ndarray) -> CheckResult:
    """Exercise: the maximum absolute logit difference between an INT8 model and its fp32 source."""
    from pathlib import Path

    import onnxruntime as ort

    if answer is None:
        return CheckResult(False, "No answer yet: replace None with your computation.")
    if not Path(int8_path).is_file():
        return CheckResult(
            False, f"No file at {int8_path}: run quantize_dynamic(..., {str(int8_path)!r}) first."
        )

    def run(path):
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        return session.run(None, {session.get_inputs()[0].name: np.asarray(inputs, dtype=np.float32)})[0]

    diff = np.abs(run(int8_path) - run(fp32_path))
    expected = float(diff.max())
    if np.isclose(float(answer), expected, rtol=1e-4, atol=1e-7):
        return CheckResult(
            True, f"Max |drift| {expected:.4f} (mean {diff.mean():.4f}) across {diff.size:,} logits."
        )
    if np.isclose(float(answer), float(diff.mean()), rtol=1e-4):
        return CheckResult(False, f"{answer:.4f} is the mean; take the maximum, {expected:.4f}.")
    return CheckResult(False, f"Got {answer}, expected {expected:.4f}: np.abs(int8 - fp32).max().")
