"""course_lib.kernels on small hand-built models: what ONNX Runtime runs, profiles and drawings."""

from __future__ import annotations

import json
import os
import platform
import re

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import (
    CalibrationDataReader,
    QuantFormat,
    QuantType,
    quantize_dynamic,
    quantize_static,
)

from course_lib import kernels

CHANNELS, SIZE = 8, 12


def conv_block(path, rng):
    """x -> Conv -> Relu -> Conv -> Add(with the Relu's output) -> Relu -> y: a residual block."""
    w1 = (0.3 * rng.standard_normal((CHANNELS, 3, 3, 3))).astype(np.float32)
    w2 = (0.3 * rng.standard_normal((CHANNELS, CHANNELS, 3, 3))).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "W1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "W2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c2", "r1"], ["s"], name="residual"),
        helper.make_node("Relu", ["s"], ["y"], name="relu2"),
    ]
    graph = helper.make_graph(
        nodes,
        "block",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, SIZE, SIZE])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", CHANNELS, SIZE, SIZE])],
        [numpy_helper.from_array(w1, "W1"), numpy_helper.from_array(w2, "W2")],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


class Images(CalibrationDataReader):
    def __init__(self, rng):
        self.batches = iter([{"x": rng.random((4, 3, SIZE, SIZE), dtype=np.float32)} for _ in range(3)])

    def get_next(self):
        return next(self.batches, None)


@pytest.fixture
def block(tmp_path):
    return conv_block(tmp_path / "block.onnx", np.random.default_rng(0))


def test_a_float_model_runs_no_integer_kernel(block):
    k = kernels.kernels(block, threads=1)
    assert k.integer == {} and sum(k.float_compute.values()) == 2  # the two convs, whatever the layout
    assert k.coverage == 0.0 and k.dequantized == 0
    assert (block.parent / "block.optimized.onnx").is_file()  # the graph the session ran, kept to read


@pytest.fixture
def sessions(monkeypatch):
    """The files ONNX Runtime optimized and saved during the test (the quantizer's sessions save none)."""
    opened = []
    session = ort.InferenceSession

    def counting(path, *args, **kwargs):
        if getattr(kwargs.get("sess_options"), "optimized_model_filepath", ""):
            opened.append(path)
        return session(path, *args, **kwargs)

    monkeypatch.setattr(ort, "InferenceSession", counting)
    return opened


def test_the_same_unchanged_file_is_optimized_once(block, sessions):
    first = kernels.kernels(block, threads=1)
    assert kernels.kernels(block, threads=1) == first
    assert kernels.optimized_graph(block, threads=1) == block.parent / "block.optimized.onnx"
    assert len(sessions) == 1
    kernels.kernels(block, threads=2)  # another thread count is another session's graph
    assert len(sessions) == 2


def test_a_rewritten_file_is_optimized_again(block, tmp_path, sessions):
    assert kernels.kernels(block, threads=1).integer == {}
    # The same path, now holding the quantized block: the new graph, not the cached float one.
    u8s8_qdq(conv_block(tmp_path / "source.onnx", np.random.default_rng(0)), tmp_path / "q.onnx")
    block.write_bytes((tmp_path / "q.onnx").read_bytes())
    assert kernels.kernels(block, threads=1).integer == {"QLinearConv": 2}
    assert len(sessions) == 2
    # Other weights, same size, and the old mtime put back: the bytes decide, not the file's stat.
    conv_block(block, np.random.default_rng(5))
    kernels.optimized_graph(block, threads=1)
    stat = block.stat()
    conv_block(block, np.random.default_rng(6))
    os.utime(block, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert block.stat().st_size == stat.st_size and block.stat().st_mtime_ns == stat.st_mtime_ns
    kernels.optimized_graph(block, threads=1)
    assert len(sessions) == 4


def test_a_saved_graph_overwritten_by_another_file_is_not_reused(tmp_path, sessions):
    """Two files with the same name, optimized into one folder, take turns in the same saved file."""
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir(), (tmp_path / "out").mkdir()
    fp32 = conv_block(tmp_path / "a" / "block.onnx", np.random.default_rng(0))
    qdq = u8s8_qdq(conv_block(tmp_path / "b.onnx", np.random.default_rng(0)), tmp_path / "b" / "block.onnx")
    assert kernels.kernels(fp32, threads=1, folder=tmp_path / "out").integer == {}
    assert kernels.kernels(qdq, threads=1, folder=tmp_path / "out").integer == {"QLinearConv": 2}
    assert kernels.kernels(fp32, threads=1, folder=tmp_path / "out").integer == {}
    assert len(sessions) == 3
    (tmp_path / "out" / "block.optimized.onnx").unlink()  # a deleted saved graph is made again
    assert kernels.kernels(fp32, threads=1, folder=tmp_path / "out").integer == {}
    assert len(sessions) == 4


def u8s8_qdq(block, out, per_channel=True, reduce_range=False):
    """The block quantized statically in QDQ: uint8 activations, int8 weights (fused on every CPU)."""
    quantize_static(
        block,
        out,
        Images(np.random.default_rng(1)),
        quant_format=QuantFormat.QDQ,
        per_channel=per_channel,
        reduce_range=reduce_range,
        activation_type=QuantType.QUInt8,
        weight_type=QuantType.QInt8,
    )
    return out


def test_qdq_u8s8_runs_as_qlinearconv_with_uint8_activations_and_int8_weights(block, tmp_path):
    qdq = u8s8_qdq(block, tmp_path / "block.qdq.onnx")
    k = kernels.kernels(qdq, threads=1)
    assert k.integer == {"QLinearConv": 2} and k.types == {"U8S8": 2}
    assert k.float_compute == {} and k.coverage == 1.0
    assert k.integer_weight_bytes == CHANNELS * 3 * 9 + CHANNELS * CHANNELS * 9  # one byte per weight
    assert k.float_weight_bytes == 0
    row = kernels.kernel_rows({"U8S8": k})[0]
    assert row["coverage"] == "2/2 (100%)" and row["types"] == "2 U8S8"
    assert row["float compute"] == "none" and row["weights held as integers"] == "100%"


def test_a_session_config_entry_changes_what_runs_and_gets_its_own_saved_graph(block, tmp_path):
    """session.x64quantprecision on full-range int8 weights: ONNX Runtime's x86 build rewrites them
    as uint8 wherever MlasPlatformU8S8Overflow() holds (its U8S8 and U8U8 kernel tables differ:
    every x86 CPU with AVX2, VNNI or not); elsewhere the option is compiled out."""
    qdq = u8s8_qdq(block, tmp_path / "block.qdq.onnx")
    precise = {"session.x64quantprecision": "1"}
    plain, rewritten = kernels.kernels(qdq, threads=1), kernels.kernels(qdq, threads=1, config=precise)
    assert plain.types == {"U8S8": 2}
    x86 = platform.machine().lower() in ("x86_64", "amd64")
    assert rewritten.types == ({"U8U8": 2} if x86 else {"U8S8": 2})
    assert (tmp_path / "block.qdq.config.optimized.onnx").is_file()
    assert kernels.kernels(qdq, threads=1).types == {"U8S8": 2}  # the plain graph was not overwritten
    # Weights that fit 7 bits ([-64, 64]: reduce_range) cannot saturate, so they are left as int8.
    small = u8s8_qdq(block, tmp_path / "block.rr.onnx", reduce_range=True)
    assert kernels.kernels(small, threads=1, config=precise).types == {"U8S8": 2}


def test_dynamic_quantization_reads_uint8_codes_from_dynamicquantizelinear(tmp_path):
    """MatMul -> MatMulInteger fed by DynamicQuantizeLinear (always uint8), weights as asked."""
    rng = np.random.default_rng(2)
    w = rng.standard_normal((16, 8)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"], name="fc")],
        "fc",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8])],
        [numpy_helper.from_array(w, "W")],
    )
    fp32, int8 = tmp_path / "fc.onnx", tmp_path / "fc.int8.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(fp32))
    quantize_dynamic(fp32, int8, weight_type=QuantType.QUInt8)
    file_graph = kernels._read_kernels(onnx.load(str(int8)))  # the file, before the optimizer
    assert file_graph.integer == {"MatMulInteger": 1} and file_graph.types == {"U8U8": 1}
    assert file_graph.qdq_left == {"DynamicQuantizeLinear": 1}


def test_types_are_read_from_the_zero_points_of_a_qoperator_node():
    """A hand-written S8S8 QLinearConv: int8 activation zero point, int8 weights."""
    inits = [
        numpy_helper.from_array(np.array(0.1, np.float32), "xs"),
        numpy_helper.from_array(np.array(0, np.int8), "xz"),
        numpy_helper.from_array(np.ones((4, 3, 3, 3), np.int8), "w"),
        numpy_helper.from_array(np.array([0.2] * 4, np.float32), "ws"),
        numpy_helper.from_array(np.zeros(4, np.int8), "wz"),
        numpy_helper.from_array(np.array(0.3, np.float32), "ys"),
        numpy_helper.from_array(np.array(0, np.int8), "yz"),
    ]
    node = helper.make_node(
        "QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["y"], name="qconv", domain=""
    )
    graph = helper.make_graph(
        [node],
        "q",
        [helper.make_tensor_value_info("x", TensorProto.INT8, [1, 3, 5, 5])],
        [helper.make_tensor_value_info("y", TensorProto.INT8, [1, 4, 3, 3])],
        inits,
    )
    k = kernels._read_kernels(helper.make_model(graph))
    assert k.types == {"S8S8": 1} and k.integer_weight_bytes == 4 * 27 and k.coverage == 1.0


def test_a_profile_counts_kernel_time_per_op_type_without_the_warmup(block, tmp_path):
    x = np.random.default_rng(3).random((2, 3, SIZE, SIZE), dtype=np.float32)
    p = kernels.profile(block, {"x": x}, runs=4, warmup=2, threads=1, folder=tmp_path)
    assert p.runs == 4 and p.total_ms > 0
    traces = list(tmp_path.glob("block.profile*.json"))
    assert len(traces) == 1
    kernel_events = [
        e for e in json.loads(traces[0].read_text()) if e.get("name", "").endswith("_kernel_time")
    ]
    ran = {e["args"]["op_name"] for e in kernel_events}
    assert set(p.ms_per_run) == ran and set(p.nodes) == ran  # every op type that ran, nothing else
    # 6 runs were profiled; leaving out the 2 warm-up runs leaves 4 runs' worth, not 6.
    for op in ran:
        all_runs_ms = sum(e["dur"] for e in kernel_events if e["args"]["op_name"] == op) / 1000
        assert p.ms_per_run[op] * 4 < all_runs_ms
        assert p.nodes[op] == len({e["name"] for e in kernel_events if e["args"]["op_name"] == op})
    ranked = [r["op type"] for r in p.rows(top=2)]
    assert ranked == sorted(p.ms_per_run, key=p.ms_per_run.get, reverse=True)[:2]
    with pytest.raises(ValueError, match="runs >= 1"):
        kernels.profile(block, {"x": x}, runs=0)


def _drawn(dot) -> tuple[dict[str, str], set[tuple[str, str]]]:
    """(node key -> label, edges) of a Graphviz source."""
    found = re.findall(r'^\t(\w+) \[label=(?:"([^"]*)"|([^\s\]]+))', dot.source, re.M)
    labels = {key: quoted or bare for key, quoted, bare in found}
    return labels, set(re.findall(r"^\t(\w+) -> (\w+)", dot.source, re.M))


def test_a_drawing_follows_the_data_not_the_file_order(block, tmp_path):
    qdq = tmp_path / "block.qdq.onnx"
    quantize_static(block, qdq, Images(np.random.default_rng(4)), quant_format=QuantFormat.QDQ)
    assert (
        onnx.load(str(qdq)).graph.node[0].op_type == "DequantizeLinear"
    )  # the file starts with a weight's DQ
    dot = kernels.draw(qdq, title="QDQ block")
    labels, edges = _drawn(dot)
    assert 'label="QDQ block"' in dot.source and labels["input0"] == "x"
    convs = [key for key, label in labels.items() if label.startswith("Conv")]
    adds = [key for key, label in labels.items() if label == "Add"]
    assert len(convs) == 2 and len(adds) == 1
    # In the drawing, the weight's DequantizeLinear (int8, 8×3×3×3) points into the first Conv.
    weight_dq = next(key for key, label in labels.items() if label == "DequantizeLinear\nint8 8×3×3×3")
    assert (weight_dq, convs[0]) in edges
    # Nothing after the residual Add is drawn (the file goes on: the Add's Q/DQ and the last Relu).
    assert not any(src == adds[0] for src, _ in edges)
    assert len(labels) - 1 < len(onnx.load(str(qdq)).graph.node)  # minus the input's ellipse


def test_side_by_side_says_how_to_install_graphviz_when_dot_is_missing(block, monkeypatch):
    drawing = kernels.draw(block)
    monkeypatch.setenv("PATH", "/nonexistent")
    html = kernels.side_by_side({"fp32": drawing}).data
    assert "apt-get install graphviz" in html and "<svg" not in html


def test_side_by_side_puts_each_drawing_in_its_own_cell(block):
    html = kernels.side_by_side({"a": kernels.draw(block), "b": kernels.draw(block)}).data
    assert (
        html.count("<svg") == 2
        and html.count("<div style='flex:1") == 2
        and "<table" not in html
        and "<?xml" not in html
        and "max-width:100%" in html
    )
