"""Self-checks for the exercises: each compares a learner's answer with one computed here and
says what passed or exactly what differed, with a hint that teaches.
"""

from __future__ import annotations

import numpy as np


class CheckResult:
    """Printed as ✅ or ❌ with feedback; truthy when the answer passed."""

    def __init__(self, passed: bool, message: str):
        self.passed, self.message = passed, message

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        return ("✅ " if self.passed else "❌ ") + self.message

    def _repr_markdown_(self) -> str:
        return ("✅ " if self.passed else "❌ ") + self.message


def check_normalised_pixel(answer: float, pixel: int, mean: float, std: float) -> CheckResult:
    """Exercise: the value the model sees for a raw pixel, (pixel / 255 - mean) / std."""
    expected = (pixel / 255 - mean) / std
    if answer is None:
        return CheckResult(False, "No answer yet: replace None with your computation.")
    if np.isclose(answer, expected, atol=1e-4):
        return CheckResult(True, f"Pixel {pixel} reaches the model as {expected:.4f}.")
    hint = ""
    if np.isclose(answer, pixel / 255, atol=1e-4):
        hint = " You scaled to [0, 1] but did not subtract the mean and divide by the std."
    elif np.isclose(answer, (pixel - mean) / std, atol=1e-3):
        hint = " Divide the pixel by 255 first: mean and std are on the [0, 1] scale."
    return CheckResult(False, f"Got {answer:.4f}, expected {expected:.4f}.{hint}")


def check_error_count(answer: int, predictions: np.ndarray, labels: np.ndarray) -> CheckResult:
    """Exercise: how many test images the model gets wrong."""
    expected = int((np.asarray(predictions) != np.asarray(labels)).sum())
    if answer is None:
        return CheckResult(False, "No answer yet: replace None with your computation.")
    if int(answer) == expected:
        return CheckResult(
            True, f"{expected} of {len(labels):,} wrong: accuracy {1 - expected / len(labels):.2%}."
        )
    if int(answer) == len(labels) - expected:
        return CheckResult(False, f"{answer} is the number of *correct* predictions; count the wrong ones.")
    return CheckResult(
        False, f"Got {answer}, expected {expected}. Compare predictions with labels: (preds != labels).sum()."
    )


# ---------------------------------------------------------------------------------------------------
# Lesson 01: affine encoding
# ---------------------------------------------------------------------------------------------------


def check_scale_zero_point(
    scale: float, zero_point: int, rmin: float = -1.0, rmax: float = 3.0, dtype: str = "uint8"
) -> CheckResult:
    """Exercise: the asymmetric scale and zero point that map [rmin, rmax] onto `dtype`."""
    from . import affine

    if scale is None or zero_point is None:
        return CheckResult(False, "No answer yet: replace None with your computation.")
    qmin, qmax = affine.qrange(dtype)
    expected_scale, expected_zp = affine.scale_zero_point(rmin, rmax, dtype)
    expected_scale, expected_zp = float(expected_scale), int(expected_zp)
    where = f"{dtype} asymmetric on [{rmin:g}, {rmax:g}]"
    if not np.isclose(float(scale), expected_scale, rtol=1e-4):
        hint = ""
        if np.isclose(float(scale), (rmax - rmin) / (qmax - qmin + 1), rtol=1e-4):
            hint = (
                f" You divided by the number of levels ({qmax - qmin + 1}); divide by the number of "
                f"steps between them, qmax - qmin = {qmax - qmin}."
            )
        return CheckResult(
            False,
            f"Your scale is {float(scale):.6g}; for {where} it should be {expected_scale:.6g}: "
            f"s = (max - min) / (qmax - qmin) = ({rmax:g} - ({rmin:g})) / ({qmax} - {qmin}).{hint}",
        )
    if float(zero_point) == expected_zp:
        return CheckResult(
            True,
            f"s = {expected_scale:.6g}, z = {expected_zp}: real 0 is the code {expected_zp} and decodes to "
            f"exactly {float(affine.dequantize(np.array([expected_zp]), expected_scale, expected_zp)[0])}.",
        )
    exact = qmin - rmin / expected_scale
    hint = f" z = round(qmin - min / scale) = round({qmin} - ({rmin:g}) / {expected_scale:.6g}) = round({exact:.4g})."
    if float(zero_point) != round(float(zero_point)):
        hint += (
            " The zero point must be an integer: it is the code that stands for real 0, so that padding "
            "and ReLU zeros come back as exactly 0."
        )
    elif int(zero_point) == -expected_zp:
        hint += " Check the sign: the minimum is negative, so -min / scale is positive."
    elif int(zero_point) in ((qmin + qmax) // 2, (qmin + qmax + 1) // 2):
        hint += " The middle of the codes is the symmetric convention; asymmetric places 0 where the range puts it."
    return CheckResult(
        False, f"Your zero point is {zero_point}; for {where} it should be {expected_zp}.{hint}"
    )


def check_decoded_value(
    answer: float, x: float = 7.0, scale: float = 0.05, zero_point: int = 0, dtype: str = "int8"
) -> CheckResult:
    """Exercise: what x comes back as after quantize and dequantize (it may be clipped)."""
    from . import affine

    if answer is None:
        return CheckResult(False, "No answer yet: replace None with your computation.")
    q = affine.quantize(np.float32([x]), scale, zero_point, dtype)
    expected = float(affine.dequantize(q, scale, zero_point)[0])
    clipped = bool(affine.clipped_mask(np.float32([x]), scale, zero_point, dtype)[0])
    lo, hi = affine.representable_range(scale, zero_point, dtype)
    qmin, qmax = affine.qrange(dtype)
    if np.isclose(float(answer), expected, atol=1e-5):
        return CheckResult(
            True,
            f"{x:g} comes back as {expected:.6g} (code {int(q[0])}); the error is {abs(x - expected):.4g}"
            + (", far more than half a step: it was clipped." if clipped else "."),
        )
    hint = ""
    unclipped = round(x / scale) + zero_point
    if np.isclose(float(answer), x, atol=1e-5):
        hint = (
            f" x / s + z = {x / scale + zero_point:g} is beyond qmax = {qmax}, so the code saturates at "
            f"{int(q[0])}: {dtype} with this scale covers only [{float(lo):g}, {float(hi):g}]."
        )
    elif float(answer) in (unclipped, float(q[0])):
        hint = f" {answer:g} is a code; decode it: x̂ = s · (q - z), with q clipped to [{qmin}, {qmax}]."
    return CheckResult(False, f"Got {answer:g}, expected {expected:.6g}.{hint}")


def check_codes(guess, answer, values, scale: float, zero_point: int, dtype: str = "int8") -> CheckResult:
    """Exercise (predict, then check): the codes `affine.quantize` gives `values`; the hints name the
    three usual slips: truncating instead of rounding, ties rounded away from zero, no saturation."""
    from . import affine

    if guess is None:
        return CheckResult(False, "Write your guess in answer_5_guess first, before you compute.")
    if answer is None:
        return CheckResult(False, "No answer yet: compute the codes with affine.quantize.")
    x = np.asarray(values, dtype=np.float32)
    expected = affine.quantize(x, scale, zero_point, dtype).astype(np.int64)
    qmin, qmax = affine.qrange(dtype)
    exact = x / np.float32(scale) + zero_point
    slips = {
        "truncated instead of rounded": np.trunc(exact),
        "rounded ties away from zero (ONNX rounds them to even)": np.sign(exact)
        * np.floor(np.abs(exact) + 0.5),
        f"not saturated to [{qmin}, {qmax}]": np.rint(exact),
    }

    def matches(candidate) -> bool:
        return np.shape(candidate) == expected.shape and np.array_equal(
            np.asarray(candidate, np.int64), expected
        )

    def slip_of(candidate) -> str:
        return next(
            (what for what, codes in slips.items() if np.array_equal(np.asarray(candidate), codes)), ""
        )

    if not matches(answer):
        slip = slip_of(answer)
        return CheckResult(
            False,
            f"Got {np.asarray(answer).tolist()}, expected {expected.tolist()}."
            + (f" Those are {slip}." if slip else ""),
        )
    if matches(guess):
        return CheckResult(True, f"Codes {expected.tolist()}, and you predicted them.")
    slip = slip_of(guess)
    return CheckResult(
        True,
        f"Codes {expected.tolist()}; you guessed {np.asarray(guess).tolist()}"
        + (
            f": {slip}."
            if slip
            else ". Compare them value by value: x / s + z, rounded half to even, saturated."
        ),
    )


def check_accumulator(answer: int, qa, a_zero_point: int, qb, b_zero_point: int) -> CheckResult:
    """Exercise: the int32 accumulator of a quantized dot product, sum((qa - za) * (qb - zb))."""
    if answer is None:
        return CheckResult(False, "No answer yet: replace None with your computation.")
    qa, qb = np.asarray(qa, dtype=np.int64), np.asarray(qb, dtype=np.int64)
    expected = int(np.sum((qa - a_zero_point) * (qb - b_zero_point)))
    if float(answer) != round(float(answer)):
        return CheckResult(
            False,
            f"Got {answer}: the accumulator is an integer sum of integer products ({expected}); "
            "multiply by the scales only afterwards, when you rescale.",
        )
    if int(answer) == expected:
        return CheckResult(
            True,
            f"{expected}: zero points subtracted, products summed in int32. The real value is "
            f"s_a · s_b · {expected}.",
        )
    hint = ""
    if int(answer) == int(np.sum(qa * qb)):
        hint = " You multiplied the raw codes: subtract each zero point first, (qa - za) · (qb - zb)."
    elif int(answer) == int(np.sum((qa - a_zero_point) * qb)) or int(answer) == int(
        np.sum(qa * (qb - b_zero_point))
    ):
        hint = " Subtract both zero points, the activation's and the weight's."
    return CheckResult(False, f"Got {answer}, expected {expected}.{hint}")


def check_packed_int4_bytes(answer: int, shape: tuple[int, ...], block_size: int = 32) -> CheckResult:
    """Exercise: bytes of a weight (output channels first) stored as symmetric int4, packed two per
    byte, with one float32 scale per block of `block_size` values within each output channel."""
    if answer is None:
        return CheckResult(False, "No answer yet: replace None with your computation.")
    n = int(np.prod(shape))
    per_channel = n // shape[0]
    n_blocks = shape[0] * -(-per_channel // block_size)
    payload, scales = -(-n // 2), 4 * n_blocks
    expected = payload + scales
    if int(answer) == expected:
        return CheckResult(
            True,
            f"{expected:,} bytes: {payload:,} of packed int4 values and {scales:,} of scales "
            f"({n_blocks:,} blocks × 4 bytes), that is {100 * scales / payload:.1f}% on top of the payload.",
        )
    hints = {
        n: "That is one byte per value, an int4 simulation held in int8; packing puts two values in a byte.",
        n + scales: "Right metadata, but pack the values: two 4-bit values per byte.",
        payload: f"Right payload; now add the metadata: one float32 scale (4 bytes) for each of the {n_blocks:,} blocks.",
        payload + n_blocks: "Each scale is a float32: 4 bytes, not 1.",
        payload
        + scales
        + n_blocks: "Symmetric int4 stores no zero points (they are all 0); count the scales only.",
        payload
        + 4
        * shape[0]: f"That is one scale per output channel; blocks of {block_size} give {n_blocks:,} scales.",
    }
    return CheckResult(False, f"Got {answer:,}, expected {expected:,}. " + hints.get(int(answer), ""))


# ---------------------------------------------------------------------------------------------------
# Lesson 02: dynamic quantization
# ---------------------------------------------------------------------------------------------------


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
    from .measure import model_facts

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


def check_quantize_linear_count(answer: int, qdq_path) -> CheckResult:
    """Exercise: how many QuantizeLinear nodes a static QDQ model holds (one per quantized tensor)."""
    from .measure import model_facts

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
    from .kernels import kernels
    from .measure import model_facts

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


def check_only_candidate_right(answer: int, reference_logits, candidate_logits, labels) -> CheckResult:
    """Exercise: how many images the INT8 model gets right that the fp32 model gets wrong."""
    if answer is None:
        return CheckResult(False, "No answer yet: replace None with your computation.")
    ref, cand, y = (
        np.asarray(reference_logits).argmax(1),
        np.asarray(candidate_logits).argmax(1),
        np.asarray(labels),
    )
    expected = int(((cand == y) & (ref != y)).sum())
    if int(answer) == expected:
        broke = int(((cand != y) & (ref == y)).sum())
        return CheckResult(
            True,
            f"INT8 fixed {expected} fp32 mistakes and made {broke} new ones: the accuracy change is "
            f"{expected - broke:+d} images, while {expected + broke} images count against agreement.",
        )
    if int(answer) == int(((cand != y) & (ref == y)).sum()):
        return CheckResult(False, f"{answer} is the other way round: images fp32 gets right and INT8 wrong.")
    if int(answer) == int((cand != ref).sum()):
        return CheckResult(
            False, f"{answer} counts every disagreement; keep those where INT8 matches the label."
        )
    return CheckResult(False, f"Got {answer}, expected {expected}: (int8 == label) & (fp32 != label).")


def check_acceptance(answer: bool, parity) -> CheckResult:
    """Exercise: apply the acceptance rule (within 0.5 points, agreement above 99 %) by hand."""
    from .measure import acceptance

    if answer is None:
        return CheckResult(False, "No answer yet: replace None with True or False.")
    verdict = acceptance(parity)
    if bool(answer) == verdict.passes:
        return CheckResult(
            True,
            f"Accuracy drop {verdict.drop_points:+.2f} points, agreement {verdict.agreement:.2%}: {verdict.advice}.",
        )
    return CheckResult(
        False,
        f"Check both conditions: the drop is {verdict.drop_points:+.2f} points (limit 0.5) and agreement "
        f"{verdict.agreement:.2%} (must exceed 99%).",
    )


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


def check_failing_variants(
    answer: dict[str, str] | str | None, verdicts: dict, saturates: bool | None = None
) -> CheckResult:
    """Exercise (predict, then check): which of lesson 04's variants fail the acceptance rule on this CPU,
    and why. `answer` maps each variant expected to fail to one of FAILURE_REASONS ({} for none fails);
    `verdicts` maps each variant to its measured `measure.acceptance` verdict; `saturates` is whether
    U8S8 can saturate on the CPU (default: this CPU's `hardware.u8s8_can_saturate()`)."""
    if answer is None:
        return CheckResult(
            False,
            'No answer yet: write your prediction as {variant: reason}, e.g. {"per-tensor": "per-tensor '
            'scale"}, or {} if you expect none to fail.',
        )
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
        from .hardware import u8s8_can_saturate

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


def check_feature_count(answer: int) -> CheckResult:
    """Exercise: how many of the INT8-relevant CPU features this machine has."""
    from .hardware import cpu_report

    if answer is None:
        return CheckResult(False, "No answer yet: replace None with your count.")
    features = cpu_report()["features"]
    present = [name for name, on in features.items() if on]
    if int(answer) == len(present):
        return CheckResult(True, f"{len(present)} of {len(features)}: {', '.join(present) or 'none'}.")
    return CheckResult(False, f"Got {answer}; count the True values of cpu_report()['features'].")


def check_pair_sum(answer: int, weight_bits: int = 7) -> CheckResult:
    """Exercise: the largest VPMADDUBSW pair sum, 2 x 255 x max|w|, and whether it fits in int16."""
    if answer is None:
        return CheckResult(False, "No answer yet: replace None with your computation.")
    max_w = 2 ** (weight_bits - 1)  # 7 bits: |w| <= 64, as ONNX Runtime's reduce_range stores them
    expected = 2 * 255 * max_w
    if int(answer) == expected:
        fits = expected <= 32767
        return CheckResult(
            True,
            f"{expected:,} {'fits' if fits else 'does not fit'} in a signed 16-bit sum (max 32,767): "
            + ("no pair can saturate." if fits else "pairs can saturate."),
        )
    if int(answer) == 2 * 255 * 127:
        return CheckResult(False, f"{answer:,} is for full 8-bit weights (|w| <= 127); use |w| <= {max_w}.")
    return CheckResult(False, f"Got {answer}, expected 2 x 255 x {max_w} = {expected:,}.")


def check_saturated_share(answer: float, values, qdq_path, tensor: str) -> CheckResult:
    """Exercise: the share of a tensor's real values outside the range a QDQ model stores for it."""
    from .calibration import clipped_fraction, quantized_ranges

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


def check_bottleneck(answer: str, profile, baseline_profile=None) -> CheckResult:
    """Exercise: name the op type that takes the largest share of a profile's kernel time."""
    if answer is None:
        return CheckResult(False, 'No answer yet: write the op type as a string, e.g. "Conv".')
    ranked = sorted(profile.ms_per_run, key=profile.ms_per_run.get, reverse=True)
    top = ranked[0]
    share = profile.ms_per_run[top] / profile.total_ms
    if str(answer) == top:
        return CheckResult(
            True, f"{top}: {share:.0%} of the kernel time of {profile.model}, where INT8 has to win."
        )
    if (
        baseline_profile is not None
        and str(answer) in baseline_profile.ms_per_run
        and str(answer) not in ranked
    ):
        return CheckResult(
            False,
            f"{answer} is in the fp32 profile; this one does not run it. Read the INT8 profile's table.",
        )
    if str(answer) in ranked:
        place = ranked.index(str(answer)) + 1
        return CheckResult(
            False, f"{answer} ranks {place} by time; look for the op type with the largest share."
        )
    return CheckResult(
        False, f"{answer!r} did not run in this profile; its op types are: {', '.join(ranked)}."
    )


def check_capstone(answer, fp32_path, x: np.ndarray, labels: np.ndarray) -> CheckResult:
    """Capstone: a statically quantized (QDQ) copy of a model the course did not build, accepted by
    the acceptance rule on (x, labels) against the fp32 file."""
    from pathlib import Path

    from .kernels import kernels
    from .measure import acceptance, logits, model_facts, parity

    if answer is None:
        return CheckResult(False, "No answer yet: set answer_4 to the path of your quantized file.")
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


# ---------------------------------------------------------------------------------------------------
# Lesson 06: past W8A8
# ---------------------------------------------------------------------------------------------------


def _nbits_node(path, node_name: str):
    import onnx

    graph = onnx.load(str(path)).graph
    nodes = {n.name: n for n in graph.node if n.op_type == "MatMulNBits"}
    if node_name not in nodes:
        raise ValueError(
            f"{node_name!r} is not a MatMulNBits node of {path}; its MatMulNBits nodes include "
            f"{', '.join(list(nodes)[:3])} …"
        )
    node = nodes[node_name]
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    stored = {t.name: t for t in graph.initializer}
    sizes = [
        int(np.prod(stored[name].dims)) * (4 if stored[name].data_type == onnx.TensorProto.FLOAT else 1)
        for name in node.input[1:4]
        if name in stored
    ]
    return attrs, sizes


def check_nbits_bytes(answer, path, node_name: str) -> CheckResult:
    """Exercise (by hand, then check): the bytes a MatMulNBits node's weight takes in the file:
    its packed 4-bit codes, float32 scales and (asymmetric) packed 4-bit zero points."""
    if answer is None:
        return CheckResult(False, "No answer yet: codes + scales + zero points, in bytes.")
    attrs, sizes = _nbits_node(path, node_name)
    K, N, block = attrs["K"], attrs["N"], attrs["block_size"]
    blocks = -(-K // block)
    expected = sum(sizes)
    codes = N * blocks * block // 2
    scales = N * blocks * 4
    if int(answer) == expected:
        return CheckResult(
            True,
            f"{expected:,} bytes: {expected / (K * N):.3f} bytes per weight, "
            f"{K * N * 4 / expected:.1f}x smaller than float32's {K * N * 4:,}.",
        )
    slips = {
        codes: "those are the codes alone; every block also stores a float32 scale",
        K * N: "a 4-bit code takes half a byte: two codes share one byte",
        codes + N * blocks * 2: "the scales are float32 here, 4 bytes each, not 2",
        codes
        + scales: "this file is asymmetric: it also stores one 4-bit zero point per block, two per byte",
        codes
        + scales
        + N * blocks: "zero points are 4-bit too, packed two per byte (a row's count rounded up)",
    }
    hint = slips.get(int(answer), f"count the codes (K·N/2), the scales (4 bytes per block of {block})")
    return CheckResult(False, f"Got {int(answer):,}, expected {expected:,}: {hint}.")


def _weight_scale(path, weight: str) -> float:
    """The scale a QDQ file stores for the quantized weight `weight` (one scale per tensor)."""
    import onnx

    stored = {t.name: t for t in onnx.load(str(path)).graph.initializer}
    name = f"{weight}_scale"
    if name not in stored:
        scales = [n.removesuffix("_scale") for n in stored if n.endswith("weight_scale")]
        raise ValueError(
            f"{path} has no scale for a weight named {weight!r}; its quantized weights include "
            f"{', '.join(scales[:3])} …"
        )
    scale = onnx.numpy_helper.to_array(stored[name])
    if scale.size != 1:
        raise ValueError(
            f"{weight!r} has {scale.size} scales (per channel); this exercise needs one per tensor."
        )
    return float(scale.reshape(()))


def check_int4_scale(answer, path, weight: str) -> CheckResult:
    """Exercise (by hand, then check): the scale `quantize_static` stores for a symmetric INT4
    weight with one scale per tensor and `reduce_range`, from the weight's largest |value|."""
    if answer is None:
        return CheckResult(False, "No answer yet: the scale, from the weight's largest |value|.")
    expected = _weight_scale(path, weight)
    absmax = expected * 3.5
    if np.isclose(float(answer), expected, rtol=1e-5):
        return CheckResult(
            True,
            f"scale {expected:.6g} = 2·max|w| / 7: with reduce_range the range is [−4, 3], 7 steps, so "
            f"the largest weight ({absmax:.4g}) sits 3.5 steps from zero and rounds to the code ±4.",
        )
    slips = {
        absmax
        / 7.5: "that is the scale without reduce_range: [−8, 7] has 15 steps; reduce_range takes [−4, 3]",
        absmax / 7: "that is the symmetric ±7 of lesson 01; ONNX Runtime's reduce_range range is [−4, 3]",
        absmax / 8: "INT4's most negative code is −8, but reduce_range takes the range [−4, 3]",
        absmax / 4: "the range is [−4, 3], and the scale is 2·max|w| / (qmax − qmin) = 2·max|w| / 7",
        absmax / 3: "the range is [−4, 3], and the scale is 2·max|w| / (qmax − qmin) = 2·max|w| / 7",
    }
    hint = next(
        (why for value, why in slips.items() if np.isclose(float(answer), value, rtol=1e-5)),
        "start from max|w|, the weight's largest magnitude, and the range [−4, 3]",
    )
    return CheckResult(False, f"Got {float(answer):.6g}, expected {expected:.6g}: {hint}.")
