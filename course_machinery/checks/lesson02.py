"""Self-checks for lesson 02 (dynamic quantization)."""

from __future__ import annotations

import numpy as np

from .result import CheckResult, invalid, needs_answer, wrong


@needs_answer("prediction", message="Write your guess in answer_3_guess first, before you count.")
@needs_answer("answer", hint="count them with measure.model_facts(path).op_counts['DynamicQuantizeLinear'].")
def check_dynamic_quantize_prediction(prediction: int, answer: int, int8_path) -> CheckResult:
    """Exercise (predict, then check): how many DynamicQuantizeLinear nodes quantize_dynamic added to
    a model in which some MatMuls read the same activation."""
    import onnx

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
        return wrong(f"Got {answer}; that is not the quantized file's count.{hint}", expected)
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


@needs_answer(
    "prediction", message='Write your prediction in answer_1_guess first: "less", "same" or "more".'
)
@needs_answer("answer", hint="compute the ratio of the two mean drifts, per-channel over per-tensor.")
def check_per_channel_drift(prediction: str, answer: float, pc_path, pt_path, fp32_path, feed) -> CheckResult:
    """Exercise (predict, then measure): the MLP's mean absolute logit drift against fp32 with
    per-channel weights, as a share of the per-tensor file's, against a prediction of "less",
    "same" (within a fifth either way) or "more"."""
    from pathlib import Path

    from course_lib.measure import make_session

    guess = str(prediction).strip().lower()
    if guess not in ("less", "same", "more"):
        return invalid(f'Got {prediction!r}; predict with one word: "less", "same" or "more".')
    if not Path(pc_path).is_file():
        return invalid(f"No file at {pc_path}: run quantize_dynamic(..., per_channel=True) into it first.")

    def run(path):
        return make_session(path).run(None, feed)[0]

    ref, pc, pt = run(fp32_path), run(pc_path), run(pt_path)
    if np.array_equal(pc, pt):
        return invalid(
            "Your file gives exactly the per-tensor file's logits: quantize with per_channel=True."
        )
    pc_drift, pt_drift = np.abs(pc - ref), np.abs(pt - ref)
    expected = float(pc_drift.mean() / pt_drift.mean())
    if np.isclose(float(answer), 1 / expected, rtol=1e-3):
        return wrong("That is per-tensor over per-channel: divide the other way round.", expected)
    if np.isclose(float(answer), float(pc_drift.max() / pt_drift.max()), rtol=1e-3):
        return wrong("That is the ratio of the largest drifts; take the mean of each.", expected)
    if not np.isclose(float(answer), expected, rtol=1e-3):
        return wrong(
            "Not the ratio of the mean drifts: np.abs(per-channel logits - ref_logits).mean() over "
            "np.abs(int8_logits - ref_logits).mean().",
            expected,
        )
    truth = "less" if expected < 0.8 else "more" if expected > 1.2 else "same"
    said = "as you predicted" if guess == truth else f"you predicted {guess!r}"
    why = {
        "same": "Per-channel scales only refine the weights. Most of the MLP's drift comes from its "
        "activations, which dynamic quantization quantizes with one range per tensor on each run; the "
        "encoder's came largely from its weights.",
        "less": "Here the weights' rounding was a large part of the drift, and per-channel scales cut it.",
        "more": "Per-channel scales cut the weights' rounding, but the total drift also depends on how "
        "the activations' roundings fall: per-channel weights are no guarantee.",
    }[truth]
    return CheckResult(
        True,
        f"Mean |drift| {pc_drift.mean():.4f} per-channel against {pt_drift.mean():.4f} per-tensor: "
        f"{expected:.2f} of it, {truth} ({said}). {why}",
    )


@needs_answer("guess", message="Write your prediction in answer_2_guess first (True or False).")
@needs_answer("answer", hint="read measure.model_facts(path).initializer_bytes.get('float32', 0).")
def check_float_copy(guess: bool, answer: int, int8_path, fp32_path) -> CheckResult:
    """Exercise (predict, then measure): does the float original of a shared weight stay in the
    quantized file when the *second* of its two consumers is kept in float?"""
    import onnx
    import onnx.numpy_helper

    from course_lib.measure import model_facts

    expected = model_facts(int8_path).initializer_bytes.get("float32", 0)
    if int(answer) != expected:
        hint = " Read the quantized file's initializer_bytes."
        if int(answer) == model_facts(fp32_path).initializer_bytes.get("float32", 0):
            hint = " That is the fp32 file's count: measure the quantized file."
        return wrong(f"Got {answer:,}; that is not the quantized file's float32 bytes.{hint}", expected)
    graph = onnx.load(str(int8_path), load_external_data=False).graph
    weights = [t for t in graph.initializer if t.data_type == onnx.TensorProto.FLOAT]
    copy_stays = any(onnx.numpy_helper.to_array(t).size >= 16 for t in weights)  # more than a scale
    dequantize = [n.input[0] for n in graph.node if n.op_type == "DequantizeLinear"]
    if copy_stays:
        how = "The float original stays: a float consumer that comes first in the graph still reads it."
    else:
        how = (
            "No float copy, only scales: the quantizer walks the graph in order, quantizes the weight for its "
            "first consumer, and hands the later float consumer a DequantizeLinear of the INT8 copy "
            f"({', '.join(dequantize)}), which turns the INT8 copy back into float values when the model runs."
        )
    verdict = "You predicted it." if bool(guess) == copy_stays else "Not what you predicted."
    return CheckResult(True, f"{expected:,} bytes of float32. {how} {verdict}")


@needs_answer("answer", hint="compute answer_1 from the two profiles' ms_per_run.")
def check_conv_kernel_swap(answer: float, faster: bool, fp32_profile, int8_profile) -> CheckResult:
    """Exercise (lesson 02b): the dynamic INT8 ResNet18's kernel time with its ConvInteger time replaced by
    fp32's convolution time, as a multiple of fp32's kernel time, and whether INT8 would then be faster."""
    int8, fp32 = int8_profile.ms_per_run, fp32_profile.ms_per_run
    conv = sum(ms for op, ms in fp32.items() if "Conv" in op)  # Conv, or FusedConv
    expected = (int8_profile.total_ms - int8.get("ConvInteger", 0.0) + conv) / fp32_profile.total_ms
    if not np.isclose(float(answer), expected, rtol=0.02):
        hints = {
            int8_profile.total_ms / fp32_profile.total_ms: " That is the INT8 run as measured: replace its "
            "ConvInteger time by fp32's convolution time first.",
            (int8_profile.total_ms - int8.get("ConvInteger", 0.0)) / fp32_profile.total_ms: " You removed "
            "ConvInteger without adding fp32's convolution time (conv_ms) back.",
            fp32_profile.total_ms / (int8_profile.total_ms - int8.get("ConvInteger", 0.0) + conv): " That is "
            "fp32 over INT8: invert it.",
        }
        hint = next(
            (text for value, text in hints.items() if np.isclose(float(answer), value, rtol=0.02)), ""
        )
        return wrong(
            f"Got {float(answer):.2f}; not the swapped run's multiple of fp32.{hint} Take the INT8 run's "
            "total, less its ConvInteger time, plus conv_ms, over fp32's total.",
            expected,
        )
    if faster is None:
        return invalid("The ratio is right. Now answer_1_faster: True or False?")
    is_faster = expected < 1.0
    if bool(faster) != is_faster:
        return wrong(
            "The ratio is right, the reading is not: below 1 would mean INT8 faster than fp32.", is_faster
        )
    rest = int8_profile.total_ms - int8.get("ConvInteger", 0.0)
    return CheckResult(
        True,
        f"{expected:.2f}x fp32's kernel time: with a convolution as fast as fp32's, the INT8 run's other ops "
        f"({rest:.1f} ms per run: the per-run quantization, the rescaling, the unfused ReLUs and adds) "
        + (
            "would still leave it slower than fp32, whose ReLU and residual adds run fused into each conv."
            if not is_faster
            else "would cost less than fp32's own non-convolution work."
        ),
    )


@needs_answer("answer", hint="replace None with your computation.")
def check_cosine_pass_share(
    answer: float, reference: np.ndarray, embeddings: np.ndarray, bound: float
) -> CheckResult:
    """Exercise (lesson 02): the share of sentences whose INT8 embedding has a cosine with its fp32
    embedding at or above `bound` (the audit's MIN_WORST_COSINE)."""
    cos = (np.asarray(reference) * np.asarray(embeddings)).sum(1)
    expected = float((cos >= bound).mean())
    if np.isclose(float(answer), expected, atol=1e-9):
        below = int((cos < bound).sum())
        return CheckResult(
            True,
            f"{expected:.1%} of {len(cos)} sentences reach a cosine of {bound}; {below} fall below it. "
            + (
                "Every sentence passes: the worst one sets the audit's per-sentence rule, and it holds."
                if below == 0
                else "The audit asks every sentence to pass, so one below is enough to fail its rule."
            ),
        )
    if np.isclose(float(answer), 1 - expected, atol=1e-9):
        return wrong("That is the share below the bound; the question asks the share at or above.", expected)
    if np.isclose(float(answer), 100 * expected, atol=1e-6):
        return wrong("That is a percentage; give the share as a fraction.", expected)
    return wrong(
        f"Got {answer}: not the share. Compare each sentence's cosine (the row sums of ref * emb) with the "
        "bound and take the mean of the comparison.",
        expected,
    )
