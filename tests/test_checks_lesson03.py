"""Lesson 03: the new self-checks (each passes the right answer and teaches on each wrong
one it recognises), and the small modules the lessons added: course_lib.scoring and
course_lib.pre_process.

The older lesson 03 checks (reader, saturated share, integer kernels) are tested in tests/test_checks.py."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import (
    CalibrationDataReader,
    QuantFormat,
    QuantType,
    quantize_static,
)

from course_lib import pre_process, scoring
from course_machinery import checks


class Rows(CalibrationDataReader):
    def __init__(self, x, name="x", batch=8):
        self.feeds = [{name: x[i : i + batch]} for i in range(0, len(x), batch)]
        self.rewind()

    def get_next(self):
        return next(self.it, None)

    def rewind(self):
        self.it = iter(self.feeds)


def _classifier(path, rng):
    """x (N, 6) -> MatMul -> Relu -> MatMul -> logits (N, 4)."""
    w1 = rng.standard_normal((6, 16)).astype(np.float32)
    w2 = rng.standard_normal((16, 4)).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"], name="fc1"),
        helper.make_node("Relu", ["h"], ["r"], name="relu"),
        helper.make_node("MatMul", ["r", "w2"], ["y"], name="fc2"),
    ]
    graph = helper.make_graph(
        nodes,
        "classifier",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def _static(model, out, x, **options):
    quantize_static(
        model,
        out,
        Rows(x),
        quant_format=QuantFormat.QDQ,
        activation_type=QuantType.QUInt8,
        weight_type=QuantType.QInt8,
        **options,
    )
    return out


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    """(fp32 path, MinMax QDQ path, test set of 400 rows labelled by fp32's own answer)."""
    rng = np.random.default_rng(0)
    folder = tmp_path_factory.mktemp("classifier")
    fp32 = _classifier(folder / "fp32.onnx", rng)
    x = rng.standard_normal((400, 6)).astype(np.float32)
    minmax = _static(fp32, folder / "minmax.onnx", x[:64])
    from course_lib import measure

    labels = measure.logits(fp32, {"x": x}, threads=1).argmax(1)
    test = scoring.TestSet.of(fp32, x, labels, threads=1, input_name="x")
    return fp32, minmax, test, x


# ---------------------------------------------------------------------------------------------------
# course_lib.scoring
# ---------------------------------------------------------------------------------------------------


def test_score_compares_a_variant_with_fp32_on_the_same_rows(classifier):
    fp32, minmax, test, _ = classifier
    assert len(test) == 400 and test.fp32_logits.shape == (400, 4)
    same = scoring.score("fp32 again", fp32, test)
    assert same.parity.agreement == 1.0 and same.size_ratio == 1.0 and same.speedup is None
    s = scoring.score("minmax", minmax, test, n=100, seconds=1.5, method="MinMax")
    assert len(s.logits) == 100
    assert s.options == {"method": "MinMax"} and s.cell("calibration s") == "1.5"
    assert set(s.row()) == {"variant", "MB", "size", "accuracy", "Δ points", "agreement", "calibration s"}
    assert s.row("variant", "agreement")["variant"] == "minmax"
    paired = scoring.score("minmax", minmax, test).parity_on(test, 100)
    assert paired.compare(s.parity, "agreement").is_noise  # the same model on the same rows


def test_score_times_the_variant_against_fp32_when_asked(classifier):
    fp32, minmax, test, _ = classifier
    s = scoring.score("minmax", minmax, test, n=50, timed_batch=16, runs=3)
    assert s.speedup > 0 and "x (" in s.cell("speed b64")


def test_score_and_test_set_refuse_what_they_cannot_use(classifier):
    fp32, minmax, test, x = classifier
    with pytest.raises(ValueError, match="one label per input"):
        scoring.TestSet.of(fp32, x, np.zeros(3), threads=1, input_name="x")
    with pytest.raises(ValueError, match="between 1 and"):
        scoring.score("minmax", minmax, test, n=0)
    with pytest.raises(ValueError, match="Unknown column"):
        scoring.score("minmax", minmax, test, n=10).cell("latency")


# ---------------------------------------------------------------------------------------------------
# course_lib.pre_process
# ---------------------------------------------------------------------------------------------------


def test_the_contrib_op_model_stops_symbolic_shape_inference_and_skipping_it_gets_past(tmp_path):
    model = pre_process.contrib_op_model(tmp_path / "contrib.onnx")
    assert pre_process.graph_summary(model)["ops"] == {"Inverse": 1, "MatMul": 1}
    tries = {"default": {}, "skip": {"skip_symbolic_shape": True}}
    outcome = pre_process.pre_process_tries(model, tmp_path, tries)
    assert "Incomplete symbolic shape inference" in outcome["default"]
    assert outcome["skip"].startswith("written")
    assert (tmp_path / "sym_shape_infer_temp.onnx").exists()  # ONNX Runtime's leftover, kept in the folder


def test_pre_process_steps_writes_one_file_per_step_and_refuses_unknown_flags(tmp_path):
    model = _classifier(tmp_path / "c.onnx", np.random.default_rng(0))
    written = pre_process.pre_process_steps(
        model, tmp_path, {"shapes": {"skip_optimization": True}, "all": {}}
    )
    assert list(written) == ["shapes", "all"] and all(p.exists() for p in written.values())
    assert pre_process.graph_summary(written["shapes"])["shapes"] >= 2  # h and r now have shapes
    assert pre_process.tensors_of(model, ("Relu",)) == ["r"]
    with pytest.raises(ValueError, match="does not take"):
        pre_process.pre_process_steps(model, tmp_path, {"bad": {"skip_fusion": True}})


# ---------------------------------------------------------------------------------------------------
# Lesson 03, exercise 1: quantizing without pre-processing
# ---------------------------------------------------------------------------------------------------


def _conv_batchnorm(path, rng):
    """x -> Conv -> BatchNormalization -> Relu -> y, as an export that keeps its BatchNorm."""
    c = 4
    inits = [
        numpy_helper.from_array((0.3 * rng.standard_normal((c, 3, 3, 3))).astype(np.float32), "w"),
        numpy_helper.from_array(rng.uniform(0.5, 1.5, c).astype(np.float32), "gamma"),
        numpy_helper.from_array(rng.standard_normal(c).astype(np.float32), "beta"),
        numpy_helper.from_array(rng.standard_normal(c).astype(np.float32), "mean"),
        numpy_helper.from_array(rng.uniform(0.5, 1.5, c).astype(np.float32), "var"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "gamma", "beta", "mean", "var"], ["b"], name="bn"),
        helper.make_node("Relu", ["b"], ["y"], name="relu"),
    ]
    graph = helper.make_graph(
        nodes,
        "conv_bn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", c, 8, 8])],
        inits,
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


@pytest.fixture(scope="module")
def conv_bn_files(tmp_path_factory):
    """(quantized without pre-processing, quantized after pre-processing) of one Conv-BatchNorm model."""
    from onnxruntime.quantization.shape_inference import quant_pre_process

    rng = np.random.default_rng(0)
    folder = tmp_path_factory.mktemp("conv_bn")
    model = _conv_batchnorm(folder / "conv_bn.onnx", rng)
    x = rng.standard_normal((16, 3, 8, 8)).astype(np.float32)
    raw = _static(model, folder / "raw.int8.onnx", x)
    quant_pre_process(str(model), str(folder / "pre.onnx"))
    processed = _static(folder / "pre.onnx", folder / "pre.int8.onnx", x)
    return raw, processed, model


def test_check_unprocessed_quantization_passes_and_says_what_the_extra_nodes_cost(conv_bn_files):
    raw, processed, _ = conv_bn_files
    right = checks.check_unprocessed_quantization("more", raw, processed)
    assert (
        right and "more (as you predicted)" in repr(right) and "BatchNorms stay in the graph" in repr(right)
    )
    other = checks.check_unprocessed_quantization("fewer", raw, processed)
    assert other and "you predicted 'fewer'" in repr(other)


def test_check_unprocessed_quantization_teaches_on_each_wrong_answer(conv_bn_files, tmp_path):
    raw, processed, model = conv_bn_files
    assert "answer_1_guess first" in repr(checks.check_unprocessed_quantization(None, raw, processed))
    assert "one word" in repr(checks.check_unprocessed_quantization("lots", raw, processed))
    assert "No answer yet" in repr(checks.check_unprocessed_quantization("more", None, processed))
    missing = checks.check_unprocessed_quantization("more", tmp_path / "nothing.onnx", processed)
    assert not missing and "does not exist" in repr(missing)
    float_model = checks.check_unprocessed_quantization("more", model, processed)
    assert not float_model and "no QuantizeLinear" in repr(float_model)
    pre_processed = checks.check_unprocessed_quantization("more", processed, processed)
    assert not pre_processed and "no BatchNormalization" in repr(pre_processed)
