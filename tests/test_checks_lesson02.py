"""Lesson 02's self-checks: each passes the right answer and teaches on the wrong answers it knows."""

from __future__ import annotations

import numpy as np
import pytest

from course_lib.kernels import Profile
from course_machinery import checks

OPSET = 17


# ---------------------------------------------------------------------------------------------------
# Exercise 1: the MLP quantized per channel, its mean logit drift against the per-tensor file's
# ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_gemm(tmp_path_factory):
    """A one-Gemm fp32 model, its dynamic INT8 copies (per tensor, per channel) and inputs."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from onnxruntime.quantization import QuantType, quantize_dynamic

    folder = tmp_path_factory.mktemp("drift")
    rng = np.random.default_rng(0)
    columns = np.array([[0.01, 1.0, 10.0]], dtype=np.float32)  # output columns of very different ranges
    w = numpy_helper.from_array(rng.standard_normal((4, 3), dtype=np.float32) * columns, "w")
    b = numpy_helper.from_array(rng.standard_normal(3, dtype=np.float32), "b")
    node = helper.make_node("Gemm", ["x", "w", "b"], ["y"], name="gemm")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 3])
    graph = helper.make_graph([node], "gemm", [x], [y], [w, b])
    fp32, int8, pc = folder / "gemm.onnx", folder / "gemm.int8.onnx", folder / "gemm.pc.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]), str(fp32))
    quantize_dynamic(fp32, int8, weight_type=QuantType.QInt8)
    quantize_dynamic(fp32, pc, weight_type=QuantType.QInt8, per_channel=True)
    inputs = rng.standard_normal((50, 4)).astype(np.float32)
    return fp32, int8, pc, {"x": inputs}


def drift(fp32, int8, feed):
    import onnxruntime as ort

    def run(path):
        return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feed)[0]

    return np.abs(run(int8) - run(fp32))


def test_per_channel_drift_passes_the_ratio_and_reads_the_prediction(tiny_gemm):
    fp32, int8, pc, feed = tiny_gemm
    pc_drift, pt_drift = drift(fp32, pc, feed), drift(fp32, int8, feed)
    ratio = float(pc_drift.mean() / pt_drift.mean())
    truth = "less" if ratio < 0.8 else "more" if ratio > 1.2 else "same"
    right = checks.check_per_channel_drift(truth, ratio, pc, int8, fp32, feed)
    assert right and "as you predicted" in right.message and f"{ratio:.2f} of it" in right.message
    other = next(g for g in ("less", "same", "more") if g != truth)
    missed = checks.check_per_channel_drift(other, ratio, pc, int8, fp32, feed)
    assert missed and f"you predicted {other!r}" in missed.message


def test_per_channel_drift_fails_each_wrong_answer_without_giving_it_away(tiny_gemm):
    fp32, int8, pc, feed = tiny_gemm
    pc_drift, pt_drift = drift(fp32, pc, feed), drift(fp32, int8, feed)
    ratio = float(pc_drift.mean() / pt_drift.mean())
    inverted = checks.check_per_channel_drift("less", 1 / ratio, pc, int8, fp32, feed)
    assert not inverted and "divide the other way round" in inverted.message
    largest = float(pc_drift.max() / pt_drift.max())
    by_max = checks.check_per_channel_drift("less", largest, pc, int8, fp32, feed)
    assert not by_max and "largest drifts" in by_max.message
    other = checks.check_per_channel_drift("less", ratio + 1.0, pc, int8, fp32, feed)
    assert not other and "ratio of the mean drifts" in other.message


def test_per_channel_drift_wants_a_prediction_a_file_and_a_per_channel_one(tiny_gemm, tmp_path):
    fp32, int8, pc, feed = tiny_gemm
    assert "answer_1_guess first" in checks.check_per_channel_drift(None, 1.0, pc, int8, fp32, feed).message
    assert "No answer yet" in checks.check_per_channel_drift("same", None, pc, int8, fp32, feed).message
    word = checks.check_per_channel_drift("smaller", 1.0, pc, int8, fp32, feed)
    assert not word and '"less", "same" or "more"' in word.message
    missing = checks.check_per_channel_drift("same", 1.0, tmp_path / "mlp_pc.onnx", int8, fp32, feed)
    assert not missing and "per_channel=True" in missing.message
    same_file = checks.check_per_channel_drift("same", 1.0, int8, int8, fp32, feed)
    assert not same_file and "per-tensor file's logits" in same_file.message


# ---------------------------------------------------------------------------------------------------
# Exercise 3: a weight shared by two MatMuls, one kept in float
# ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def shared_weight(tmp_path_factory):
    """The fp32 model with one weight read by two MatMuls, quantized with each layer kept float."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from onnxruntime.quantization import quantize_dynamic

    folder = tmp_path_factory.mktemp("shared")
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((32, 32), dtype=np.float32), "w")
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["a"], name="layer_1"),
        helper.make_node("Relu", ["a"], ["r"], name="relu"),
        helper.make_node("MatMul", ["r", "w"], ["y"], name="layer_2"),
    ]
    io = [helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, 32]) for name in ("x", "y")]
    graph = helper.make_graph(nodes, "shared", io[:1], io[1:], [w])
    fp32 = folder / "shared.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]), str(fp32))
    files = {}
    for layer in ("layer_1", "layer_2"):
        files[layer] = folder / f"shared.{layer}_float.onnx"
        quantize_dynamic(fp32, files[layer], nodes_to_exclude=[layer])
    return fp32, files


def float_bytes(path) -> int:
    from course_lib.measure import model_facts

    return model_facts(path).initializer_bytes.get("float32", 0)


def test_float_copy_asks_for_the_guess_first_and_then_the_bytes(shared_weight):
    fp32, files = shared_weight
    assert "answer_2_guess first" in checks.check_float_copy(None, 4, files["layer_2"], fp32).message
    assert "No answer yet" in checks.check_float_copy(False, None, files["layer_2"], fp32).message


def test_float_copy_teaches_on_each_wrong_count(shared_weight):
    fp32, files = shared_weight
    source = checks.check_float_copy(False, float_bytes(fp32), files["layer_2"], fp32)
    assert not source and "the fp32 file's count" in source.message
    other = checks.check_float_copy(False, 12345, files["layer_2"], fp32)
    assert not other and "initializer_bytes" in other.message


def test_float_copy_explains_the_later_float_consumer(shared_weight):
    fp32, files = shared_weight
    answer = float_bytes(files["layer_2"])
    right = checks.check_float_copy(False, answer, files["layer_2"], fp32)
    assert right and "No float copy" in right.message and "You predicted it" in right.message
    wrong_guess = checks.check_float_copy(True, answer, files["layer_2"], fp32)
    assert wrong_guess and "Not what you predicted" in wrong_guess.message


def test_float_copy_explains_the_earlier_float_consumer(shared_weight):
    fp32, files = shared_weight
    answer = float_bytes(files["layer_1"])
    stays = checks.check_float_copy(True, answer, files["layer_1"], fp32)
    assert stays and "The float original stays" in stays.message and "You predicted it" in stays.message


# ---------------------------------------------------------------------------------------------------
# Section 6: the names quantize_dynamic looks for (course_lib.nodes.dynamic_node_names)
# ---------------------------------------------------------------------------------------------------
def test_dynamic_node_names_keeps_a_gemm_float_where_its_own_name_does_not(tiny_gemm, tmp_path):
    from onnxruntime.quantization import quantize_dynamic

    from course_lib.measure import model_facts
    from course_lib.nodes import dynamic_node_names

    fp32 = tiny_gemm[0]
    own_name, checked = tmp_path / "own_name.onnx", tmp_path / "checked.onnx"
    quantize_dynamic(fp32, own_name, nodes_to_exclude=["gemm"])
    assert model_facts(own_name).op_counts.get("MatMulInteger") == 1  # the Gemm's name matched nothing
    names = dynamic_node_names(fp32, ["gemm"])
    assert names == ["gemm", "gemm_MatMul"]
    quantize_dynamic(fp32, checked, nodes_to_exclude=names)
    assert "MatMulInteger" not in model_facts(checked).op_counts


def test_dynamic_node_names_refuses_a_typo_and_passes_other_names_as_they_are(shared_weight):
    from course_lib.nodes import dynamic_node_names

    fp32, _ = shared_weight
    assert dynamic_node_names(fp32, ["layer_1"]) == ["layer_1"]
    with pytest.raises(ValueError, match="did you mean 'layer_1'"):
        dynamic_node_names(fp32, ["layer_1 "])


# ---------------------------------------------------------------------------------------------------
# Lesson 02b, exercise 1: the ResNet18's profile with ConvInteger as fast as fp32's Conv
# ---------------------------------------------------------------------------------------------------
FP32 = Profile("fp32", 3, {"Conv": 10.0, "ReorderOutput": 1.0}, {"Conv": 20, "ReorderOutput": 1})
INT8 = Profile(
    "int8",
    3,
    {"ConvInteger": 80.0, "DynamicQuantizeLinear": 3.0, "Cast": 1.0, "Mul": 2.0, "Add": 2.0, "Relu": 1.0},
    {"ConvInteger": 20, "DynamicQuantizeLinear": 18, "Cast": 21, "Mul": 42, "Add": 29, "Relu": 17},
)
SWAPPED = (89.0 - 80.0 + 10.0) / 11.0  # 1.73: INT8's other ops plus fp32's Conv time, over fp32's total


def test_conv_kernel_swap_passes_the_right_ratio_and_reading():
    right = checks.check_conv_kernel_swap(SWAPPED, False, FP32, INT8)
    assert right and "1.73x fp32's kernel time" in right.message and "still leave it slower" in right.message


def test_conv_kernel_swap_fails_a_wrong_ratio_and_a_wrong_reading():
    assert "No answer yet" in checks.check_conv_kernel_swap(None, None, FP32, INT8).message
    measured = checks.check_conv_kernel_swap(89.0 / 11.0, False, FP32, INT8)
    assert not measured and "replace its ConvInteger time" in measured.message
    dropped = checks.check_conv_kernel_swap(9.0 / 11.0, True, FP32, INT8)
    assert not dropped and "without adding fp32's convolution time" in dropped.message
    no_reading = checks.check_conv_kernel_swap(SWAPPED, None, FP32, INT8)
    assert not no_reading and "answer_1_faster" in no_reading.message
    wrong = checks.check_conv_kernel_swap(SWAPPED, True, FP32, INT8)
    assert not wrong and "the reading is not" in wrong.message
    for failed in (measured, dropped, wrong):
        assert (
            "1.73" not in failed.message
        )  # the right ratio is never given away (result.wrong checks it too)


# ---------------------------------------------------------------------------------------------------
# Lesson 02, exercise 2: the share of sentences at or above the audit's worst-cosine bound
# ---------------------------------------------------------------------------------------------------
def _embeddings(cosines):
    """Unit reference vectors e1 and candidates at the given cosines with them."""
    cos = np.asarray(cosines, dtype=np.float64)
    ref = np.zeros((len(cos), 2))
    ref[:, 0] = 1.0
    emb = np.stack([cos, np.sqrt(1 - cos**2)], axis=1)
    return ref, emb


def test_cosine_pass_share_passes_the_right_share():
    ref, emb = _embeddings([0.999, 0.99, 0.985, 0.97])
    right = checks.check_cosine_pass_share(0.75, ref, emb, 0.98)
    assert right and "1 fall below it" in right.message
    all_pass = checks.check_cosine_pass_share(1.0, *_embeddings([0.999, 0.99]), 0.98)
    assert all_pass and "Every sentence passes" in all_pass.message


def test_cosine_pass_share_fails_a_wrong_answer():
    ref, emb = _embeddings([0.999, 0.99, 0.985, 0.97])
    assert "No answer yet" in checks.check_cosine_pass_share(None, ref, emb, 0.98).message
    below = checks.check_cosine_pass_share(0.25, ref, emb, 0.98)
    assert not below and "share below the bound" in below.message
    percent = checks.check_cosine_pass_share(75, ref, emb, 0.98)
    assert not percent and "percentage" in percent.message
    wrong = checks.check_cosine_pass_share(0.5, ref, emb, 0.98)
    assert not wrong and "take the mean of the comparison" in wrong.message
    for failed in (below, percent, wrong):
        assert "0.75" not in failed.message and "75" not in failed.message  # result.wrong checks it too
