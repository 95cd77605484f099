"""course_lib.runtimes: OpenVINO beside ONNX Runtime, on small hand-built QDQ models."""

import os
import platform
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from course_lib import hardware, measure, runtimes


def _save(graph, path):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


def qdq_conv(path, activation=TensorProto.UINT8):
    """x -> QuantizeLinear(u8 or s8) -> DequantizeLinear -> Conv with per-channel int8 weights -> y."""
    rng = np.random.default_rng(0)
    zero = np.array(
        128 if activation == TensorProto.UINT8 else 0,
        np.uint8 if activation == TensorProto.UINT8 else np.int8,
    )
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
        helper.make_node("DequantizeLinear", ["W", "ws", "wz"], ["wd"], axis=0),
        helper.make_node("Conv", ["xd", "wd"], ["y"], pads=[1, 1, 1, 1]),
    ]
    inits = [
        numpy_helper.from_array(np.array(0.02, np.float32), "xs"),
        numpy_helper.from_array(zero, "xz"),
        numpy_helper.from_array(rng.integers(-127, 128, size=(8, 3, 3, 3)).astype(np.int8), "W"),
        numpy_helper.from_array(np.full(8, 0.01, np.float32), "ws"),
        numpy_helper.from_array(np.zeros(8, np.int8), "wz"),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 16, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8, 16, 16])
    return _save(helper.make_graph(nodes, "qdq_conv", [x], [y], inits), path)


def qdq_matmul(path):
    """x (N, 64) -> Q/DQ (u8) -> MatMul with int8 weights (64 x 32) -> y, and a float MatMul beside it."""
    rng = np.random.default_rng(1)
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
        helper.make_node("DequantizeLinear", ["W", "ws", "wz"], ["wd"]),
        helper.make_node("MatMul", ["xd", "wd"], ["y"]),
        helper.make_node("MatMul", ["x", "F"], ["z"]),
    ]
    inits = [
        numpy_helper.from_array(np.array(0.05, np.float32), "xs"),
        numpy_helper.from_array(np.array(128, np.uint8), "xz"),
        numpy_helper.from_array(rng.integers(-127, 128, size=(64, 32)).astype(np.int8), "W"),
        numpy_helper.from_array(np.array(0.01, np.float32), "ws"),
        numpy_helper.from_array(np.array(0, np.int8), "wz"),
        numpy_helper.from_array(rng.standard_normal((64, 32)).astype(np.float32), "F"),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 64])
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["N", 32]) for n in ("y", "z")]
    return _save(helper.make_graph(nodes, "qdq_matmul", [x], outs, inits), path)


@pytest.fixture(scope="module")
def core():
    # The `openvino` extra is part of `test` (make installs it), so a missing package fails here.
    return runtimes.require_openvino().Core()


def _compile(core, path, **config):
    return core.compile_model(str(path), "CPU", {"INFERENCE_NUM_THREADS": 1, **config})


def test_a_qdq_conv_runs_on_an_int8_kernel_and_matches_onnx_runtime(core, tmp_path):
    for activation, name in ((TensorProto.UINT8, "u8s8"), (TensorProto.INT8, "s8s8")):
        path = qdq_conv(tmp_path / f"conv_{name}.onnx", activation)
        compiled = _compile(core, path, INFERENCE_PRECISION_HINT="f32")
        layers = runtimes.runtime_layers(compiled)
        counts = runtimes.layer_precisions(layers)
        if platform.machine().lower() in ("x86_64", "amd64"):
            # OpenVINO reads each Q/DQ pair as a range to quantize to, and picks the activation type its
            # x86 kernels take: u8, even where the file says s8 (unlike ONNX Runtime's S8S8 kernels).
            assert counts == {("Convolution", "u8"): 1}, runtimes.describe_precisions(counts)
            assert runtimes.integer_share(counts) == 1.0
        conv = next(layer for layer in layers if layer.layer_type == "Convolution")
        assert conv.primitive, conv  # e.g. 'brgconv_avx512_I8' or 'jit_avx2_I8': the kernel it picked
        x = np.random.default_rng(2).standard_normal((4, 3, 16, 16)).astype(np.float32)
        runner = runtimes.OpenVINORunner(compiled, threads=1, name="conv")
        ours = measure.logits(runner, x, output="y", batch=3)  # two batches: 3 rows and 1
        onnx_runtime = measure.logits(str(path), x, output="y", threads=1)
        # Same integer arithmetic; what remains is float rounding of the rescale.
        np.testing.assert_allclose(ours, onnx_runtime, atol=1e-3)


def test_a_qdq_matmul_is_integer_and_the_float_one_follows_the_precision_hint(core, tmp_path):
    path = qdq_matmul(tmp_path / "matmul.onnx")
    pinned = _compile(core, path, INFERENCE_PRECISION_HINT="f32")
    assert runtimes.precision_hint(pinned) == "f32"
    counts = runtimes.layer_precisions(pinned)
    assert sum(counts.values()) == 2, runtimes.describe_precisions(counts)
    assert {p for (_, p), _ in counts.items()} == {"u8", "f32"}, runtimes.describe_precisions(counts)
    assert runtimes.integer_share(counts) == 0.5
    default = _compile(core, path)
    expected = runtimes.expected_default_precision()
    assert runtimes.precision_hint(default) == expected
    float_layers = {p for (_, p), _ in runtimes.layer_precisions(default).items() if p not in ("u8", "i8")}
    assert float_layers == {expected}, runtimes.describe_precisions(runtimes.layer_precisions(default))


def test_the_runner_is_timed_in_turn_with_onnx_runtime(core, tmp_path):
    path = qdq_matmul(tmp_path / "matmul.onnx")
    runner = runtimes.OpenVINORunner(_compile(core, path), name="openvino")
    assert [i.name for i in runner.get_inputs()] == ["x"] and runner.get_inputs()[0].shape == ["N", 64]
    x = np.ones((8, 64), np.float32)
    c = measure.compare_latency(
        {"onnxruntime": path, "openvino": runner}, {"x": x}, threads=1, warmup=2, runs=10
    )
    assert c.latency["openvino"].runs == 10 and c.latency["openvino"].threads == 1
    assert c.speedup_low <= c.speedup <= c.speedup_high
    with pytest.raises(ValueError, match="INFERENCE_NUM_THREADS"):
        runtimes.OpenVINORunner(_compile(core, path), threads=2)
    with pytest.raises(ValueError, match="no output 'nope'"):
        runner.run(["nope"], {"x": x})
    with pytest.raises(TypeError, match="runtimes.OpenVINORunner"):
        measure.compare_latency({"a": path, "b": object()}, {"x": x}, threads=1, warmup=1, runs=2)


def test_expected_default_precision_follows_the_cpu_features():
    none = dict.fromkeys(hardware.HALF_FLOAT_FEATURES, False)
    assert runtimes.expected_default_precision(none, "x86_64") == "f32"
    assert runtimes.expected_default_precision(none | {"AVX-512 BF16": True}, "x86_64") == "bf16"
    assert runtimes.expected_default_precision(none | {"AMX (BF16)": True}, "AMD64") == "bf16"
    assert runtimes.expected_default_precision(none | {"ARM fp16": True}, "arm64") == "f16"
    assert runtimes.expected_default_precision(none | {"ARM bf16": True}, "aarch64") == "f32"


def test_half_float_features_from_recorded_cpus():
    from pathlib import Path

    fixtures = Path(__file__).parent / "fixtures" / "platforms"
    zen3 = hardware.parse_proc_cpuinfo((fixtures / "linux-x86_64-zen3.cpuinfo").read_text())[1]
    zen4 = hardware.parse_proc_cpuinfo((fixtures / "linux-x86_64-zen4.cpuinfo").read_text())[1]
    spr = hardware.parse_proc_cpuinfo((fixtures / "linux-x86_64-sapphirerapids.cpuinfo").read_text())[1]
    m2 = hardware.parse_sysctl((fixtures / "darwin-arm64-m2.sysctl").read_text())[1]
    assert runtimes.expected_default_precision(hardware.half_float_features(zen3), "x86_64") == "f32"
    assert runtimes.expected_default_precision(hardware.half_float_features(zen4), "x86_64") == "bf16"
    assert hardware.half_float_features(spr)["AMX (BF16)"]
    assert runtimes.expected_default_precision(hardware.half_float_features(m2), "arm64") == "f16"


def test_without_openvino_the_course_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "openvino", None)  # what Python does for a module it cannot import
    assert runtimes.openvino_or_none() is None
    with pytest.raises(ImportError, match=r"pip install openvino.*restart the kernel"):
        runtimes.require_openvino()


def _lesson_05_code_cells():
    import jupytext

    from conftest import ROOT

    cells = jupytext.read(ROOT / "notebooks" / "src" / "05_hardware_and_speed.py").cells
    section, found = None, []
    for cell in cells:
        if cell.cell_type == "markdown" and cell.source.startswith("## "):
            section = cell.source.splitlines()[0]
        elif cell.cell_type == "code":
            found.append((section, cell.source))
    return found


def test_lesson_05s_openvino_section_runs_without_openvino(monkeypatch, capsys):
    """Without the package, section 7's cells run (printing how to install it) and nothing else in
    the lesson touches what they would have made."""
    import re

    from IPython.display import Markdown, display

    import course_lib as cl

    monkeypatch.setitem(sys.modules, "openvino", None)
    cells = _lesson_05_code_cells()
    section7 = [src for sec, src in cells if sec and sec.startswith("## 7.")]
    assert len(section7) >= 5
    namespace = {"runtimes": runtimes, "measure": measure, "hardware": hardware, "cl": cl, "np": np}
    namespace |= {"display": display, "Markdown": Markdown}
    for source in section7:
        exec(
            compile(source, "lesson-05-section-7", "exec"), namespace
        )  # a NameError means a cell is unguarded
    assert namespace["openvino"] is None
    assert "OpenVINO is not installed: pip install openvino" in capsys.readouterr().out
    # Elsewhere in the lesson, every cell that reads section 7's results checks for OpenVINO first.
    made_there = re.compile(r"\b(ov_\w+|core\.|compiled)\b")
    for sec, source in cells:
        if not (sec or "").startswith("## 7.") and made_there.search(source):
            assert "openvino is not None" in source, f"unguarded in {sec}:\n{source[:300]}"


def test_openvino_is_imported_without_sending_its_usage_telemetry():
    """`import openvino` forks a process that sends an event to Google Analytics unless opted out;
    the course's import must not fork (nor leave CI set for what runs after)."""
    import subprocess

    code = (
        "import os, threading\n"
        "forks = []\n"
        "os.fork = lambda: forks.append('fork') or 0 / 0\n"  # the telemetry forks from a worker thread
        "from course_lib import runtimes\n"
        "ov = runtimes.openvino_or_none(); ov.Core()\n"
        "for t in threading.enumerate():\n"
        "    t is threading.current_thread() or t.join(10)\n"
        "print(len(forks), os.environ.get('CI', 'unset'))\n"
    )
    # Outside CI (the learner's case) the import must not fork and must leave CI unset; inside a CI
    # job (CI=1 here) it must leave the job's own value as it was.
    for ci, expected in ((None, "0 unset"), ("1", "0 1")):
        env = {k: v for k, v in os.environ.items() if k != "CI"}
        if ci is not None:
            env["CI"] = ci
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
        )
        assert done.returncode == 0, done.stderr[-500:]
        assert done.stdout.strip() == expected, (ci, done.stdout, done.stderr[-500:])
