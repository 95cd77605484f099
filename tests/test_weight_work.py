"""measure.weight_work: weights and multiply-adds per run, counted from a float graph (lesson 05b, section 4)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from course_lib import measure


def small_graph(path):
    """input (N, 1, 5, 5) -> Conv 2x1x3x3 -> (N, 2, 3, 3) -> Flatten -> MatMul 18x4 -> (N, 4)."""
    conv_w = numpy_helper.from_array(np.ones((2, 1, 3, 3), np.float32), "conv_w")
    fc_w = numpy_helper.from_array(np.ones((18, 4), np.float32), "fc_w")
    nodes = [
        helper.make_node("Conv", ["input", "conv_w"], ["c"], kernel_shape=[3, 3], name="conv"),
        helper.make_node("Flatten", ["c"], ["f"], axis=1, name="flatten"),
        helper.make_node("MatMul", ["f", "fc_w"], ["output"], name="fc"),
    ]
    graph = helper.make_graph(
        nodes,
        "small",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 1, 5, 5])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["N", 4])],
        [conv_w, fc_w],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, path)
    return path


def test_weight_work_counts_weights_and_multiply_adds_per_run(tmp_path):
    path = small_graph(tmp_path / "small.onnx")
    one = measure.weight_work(path, {"input": (1, 1, 5, 5)})
    # Conv: 18 weights, used at 3 x 3 = 9 output positions; MatMul: 72 weights, used once per row.
    assert one.weights == 18 + 72
    assert one.multiply_adds == 9 * 18 + 1 * 72
    four = measure.weight_work(path, {"input": (4, 1, 5, 5)})
    assert four.multiply_adds == 4 * one.multiply_adds  # every weight is used once more per image
    assert four.uses_per_weight == pytest.approx(four.multiply_adds / 90)
    assert four.weight_bytes(32) == 360 and four.weight_bytes(8) == 90
    assert four.intensity(8) == pytest.approx(4 * four.intensity(32))
    assert four.to_dict()["uses_per_weight"] == pytest.approx(four.uses_per_weight)


def test_weight_work_names_an_unknown_input(tmp_path):
    path = small_graph(tmp_path / "small.onnx")
    with pytest.raises(ValueError, match=r"no input named \['x'\]; its inputs are \['input'\]"):
        measure.weight_work(path, {"x": (1, 1, 5, 5)})
