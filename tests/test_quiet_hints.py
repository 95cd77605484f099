"""course_lib.pre_process.quiet_quantizer_hints: the quantizer's advice line dropped, nothing else."""

from __future__ import annotations

import logging

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import quantize_dynamic

import course_lib as cl
from course_lib import pre_process


@pytest.fixture
def root_filters():
    """Start with no root filters (earlier tests in this process, e.g. test_qat's, leave some) and
    leave the root logger's filters as they were."""
    root = logging.getLogger()
    before = list(root.filters)
    root.filters[:] = []
    yield root
    root.filters[:] = before


def matmul_model(path) -> str:
    w = numpy_helper.from_array(np.random.default_rng(0).normal(size=(8, 4)).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        [w],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return str(path)


def advice_lines(caplog, model, out) -> list[str]:
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        quantize_dynamic(model, out)
    return [r.getMessage() for r in caplog.records if "pre-process" in r.getMessage()]


def test_the_quantizers_advice_is_dropped_and_other_lines_are_kept(tmp_path, caplog, root_filters):
    model, out = matmul_model(tmp_path / "m.onnx"), str(tmp_path / "q.onnx")
    assert advice_lines(caplog, model, out), (
        "ONNX Runtime's quantizer no longer logs its pre-processing advice"
    )

    assert cl.quiet_quantizer_hints() == ("pre-process",)
    assert advice_lines(caplog, model, out) == []
    with caplog.at_level(logging.WARNING):
        logging.warning("a warning with other words")
    assert "a warning with other words" in caplog.messages


def test_calling_it_again_adds_phrases_to_one_filter(root_filters):
    before = len(root_filters.filters)
    pre_process.quiet_quantizer_hints()
    assert pre_process.quiet_quantizer_hints("pre-process", "out-of-range for weight") == (
        "out-of-range for weight",
        "pre-process",
    )
    assert len(root_filters.filters) == before + 1
    with pytest.raises(ValueError, match="non-empty strings"):
        pre_process.quiet_quantizer_hints("")
