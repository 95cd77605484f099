"""nodes_to_exclude with a name that is not in the graph: ONNX Runtime ignores it; the course refuses it."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import QuantType, quantize_dynamic

from course_lib import nodes


@pytest.fixture
def two_matmuls(tmp_path):
    rng = np.random.default_rng(0)
    w = [numpy_helper.from_array(rng.normal(size=(8, 8)).astype(np.float32), f"w{i}") for i in (1, 2)]
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w1"], ["h"], name="fc1"),
            helper.make_node("MatMul", ["h", "w2"], ["y"], name="fc2"),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])],
        w,
    )
    path = tmp_path / "two.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_onnx_runtime_silently_ignores_a_misspelled_name(two_matmuls, tmp_path):
    out = tmp_path / "q.onnx"
    quantize_dynamic(two_matmuls, out, weight_type=QuantType.QInt8, nodes_to_exclude=["fc_1"])
    ops = [n.op_type for n in onnx.load(out).graph.node]
    assert ops.count("MatMulInteger") == 2  # the layer meant to stay float was quantized anyway


def test_the_course_refuses_it_and_names_the_close_match(two_matmuls):
    assert nodes.node_names(two_matmuls) == {"fc1": "MatMul", "fc2": "MatMul"}
    assert nodes.checked_node_names(two_matmuls, ("fc2",)) == ["fc2"]
    with pytest.raises(ValueError, match=r"'fc_1': did you mean 'fc1'") as err:
        nodes.checked_node_names(two_matmuls, ["fc_1", "fc2", "attention"])
    assert "2 of the 3 names" in str(err.value) and "'attention': no close name" in str(err.value)
    with pytest.raises(TypeError, match="list of node names"):
        nodes.checked_node_names(two_matmuls, "fc1")
