"""Self-checks for lesson 03 (static QDQ and calibration)."""

from __future__ import annotations

import numpy as np

from .result import CheckResult


def check_quantize_linear_count(answer: int, qdq_path) -> CheckResult:
    """Exercise: how many QuantizeLinear nodes a static QDQ model holds (one per quantized tensor)."""
    from ..measure import model_facts

    if answer is None:
        return CheckResult(False, "No answer yet: replace None with your computation.")
    counts = model_facts(qdq_path).op_counts
    expected, deq = counts.get("QuantizeLinear", 0), counts.get("DequantizeLinear", 0)
    if int(answer) == expected:
        return CheckResult(
            True,
            f"{expected} QuantizeLinear nodes, one per activation tensor with a calibrated range; "
            f"{deq} DequantizeLinear nodes, because the weights (stored as int8) are only dequantized.",
        )
    hint = (
        " You counted the DequantizeLinear nodes: weights have those but no QuantizeLinear."
        if (int(answer) == deq)
        else ""
    )
    return CheckResult(False, f"Got {answer}, expected {expected}.{hint} Read op_counts['QuantizeLinear'].")


def check_integer_kernels(prediction: int, answer: int, qdq_path) -> CheckResult:
    """Exercise (predict, then check): how many compute ops of a quantized file run on integer
    kernels in the graph the session executes on this CPU."""
    from ..kernels import kernels
    from ..measure import model_facts

    if prediction is None:
        return CheckResult(False, "Write your guess in answer_4_guess first, before you count.")
    if answer is None:
        return CheckResult(False, "No answer yet: count them with kernels.kernels(path).integer_count.")
    ran = kernels(qdq_path)
    expected, total = ran.integer_count, ran.compute_count
    in_file = sum(q["op_type"] in ("Conv", "Gemm", "MatMul") for q in model_facts(qdq_path).quantized_nodes)
    if int(answer) != expected:
        if int(answer) == in_file:
            hint = (
                " That is what the *file* quantizes (model_facts reads the file); ask the graph the session "
                "runs: kernels.kernels(path).integer_count."
            )
        elif int(answer) == total:
            hint = " That is every compute op; count only those on integer kernels (integer_count)."
        else:
            hint = " Use kernels.kernels(path).integer_count."
        return CheckResult(False, f"Got {answer}, expected {expected}.{hint}")
    if int(prediction) == expected:
        verdict = "and you predicted it."
    elif expected < in_file:
        verdict = (
            f"you predicted {prediction}. The file quantizes {in_file}; ONNX Runtime's optimizer did not fuse the "
            f"{in_file - expected} others into integer kernels on this CPU, so they dequantize and run in float."
        )
    else:
        verdict = f"you predicted {prediction}: every quantized op found an integer kernel here."
    types = f" ({ran.types})" if ran.types else ""
    return CheckResult(
        True, f"{expected} of {total} compute ops run on integer kernels here{types}; {verdict}"
    )


def check_reader(reader, expected_reader) -> CheckResult:
    """Exercise: a hand-written CalibrationDataReader must feed exactly what `expected_reader` feeds."""
    if reader is None:
        return CheckResult(False, "No answer yet: create your reader.")
    if not callable(getattr(reader, "get_next", None)):
        return CheckResult(
            False, "A CalibrationDataReader needs a get_next() method returning a dict or None."
        )
    got, want = [], []
    for source, sink in ((reader, got), (expected_reader, want)):
        for _ in range(100_000):
            feed = source.get_next()
            if feed is None:
                break
            sink.append(feed)
        else:
            return CheckResult(False, "get_next() never returned None: return None when the data runs out.")
    if hasattr(expected_reader, "rewind"):
        expected_reader.rewind()
    if not got:
        return CheckResult(False, "get_next() returned None at once: the reader fed no data.")
    if not isinstance(got[0], dict):
        return CheckResult(
            False, f"get_next() returned a {type(got[0]).__name__}; return {{input_name: batch}}."
        )
    if list(got[0]) != list(want[0]):
        return CheckResult(False, f"Fed inputs {list(got[0])}; the model's input is {list(want[0])}.")
    name = next(iter(want[0]))
    a = np.concatenate([np.asarray(f[name]) for f in got])
    b = np.concatenate([np.asarray(f[name]) for f in want])
    if a.dtype != b.dtype:
        return CheckResult(False, f"Fed dtype {a.dtype}; the model expects {b.dtype}.")
    if a.shape != b.shape:
        return CheckResult(False, f"Fed {a.shape[0]} samples of shape {a.shape[1:]}; expected {b.shape}.")
    if not np.array_equal(a, b):
        return CheckResult(
            False, "Right shape and dtype, different values: feed the production preprocessing."
        )
    return CheckResult(
        True, f"Your reader fed {len(got)} batches, {a.shape[0]} samples, exactly as expected."
    )


def check_saturated_share(answer: float, values, qdq_path, tensor: str) -> CheckResult:
    """Exercise: the share of a tensor's real values outside the range a QDQ model stores for it."""
    from ..calibration import clipped_fraction, quantized_ranges

    if answer is None:
        return CheckResult(False, "No answer yet: replace None with your computation.")
    low, high = quantized_ranges(qdq_path)[tensor]
    expected = clipped_fraction(values, low, high)
    if np.isclose(float(answer), expected, atol=1e-9):
        above = float((np.asarray(values) > high).mean())
        return CheckResult(
            True,
            f"{expected:.2%} of the values saturate ({above:.2%} above {high:.3f}, the top of the stored range).",
        )
    if np.isclose(float(answer), 1 - expected, atol=1e-9):
        return CheckResult(False, f"{answer:.2%} is the share *inside* the range; take the rest.")
    return CheckResult(False, f"Got {answer}, expected {expected:.4%}: clipped_fraction(values, low, high).")
