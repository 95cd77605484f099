"""course_machinery.runtimes: OpenVINO beside ONNX Runtime, on small hand-built QDQ models."""

import os
import platform
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from course_lib import measure
from course_machinery import hardware, results, runtimes


def _save(graph, path):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


def qdq_conv(path, activation=TensorProto.UINT8, weight_max=127):
    """x -> QuantizeLinear(u8 or s8) -> DequantizeLinear -> Conv with per-channel int8 weights -> y.

    `weight_max=64` gives reduce_range weights, whose byte-pair sums cannot saturate."""
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
        numpy_helper.from_array(
            rng.integers(-weight_max, weight_max + 1, size=(8, 3, 3, 3)).astype(np.int8), "W"
        ),
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
    # OpenVINO reads each Q/DQ pair as a range to quantize to, and picks the activation type its
    # kernels take. On x86 without AMX that is u8, even where the file says s8 (unlike ONNX Runtime's
    # S8S8 kernels); AMX's int8 tiles take signed operands too, so there u8 or i8 are both right.
    amx = hardware.cpu_report()["features"]["AMX (INT8)"]
    allowed = {"u8", "i8"} if amx else {"u8"}
    # Without VNNI, ONNX Runtime's U8S8 kernels add byte pairs into 16-bit sums, which full-range
    # weights can saturate (lesson 05, section 4): there both runtimes get reduce_range weights.
    weight_max = 64 if hardware.u8s8_can_saturate() else 127
    for activation, name in ((TensorProto.UINT8, "u8s8"), (TensorProto.INT8, "s8s8")):
        path = qdq_conv(tmp_path / f"conv_{name}.onnx", activation, weight_max)
        compiled = _compile(core, path, INFERENCE_PRECISION_HINT="f32")
        layers = runtimes.runtime_layers(compiled)
        counts = runtimes.layer_precisions(layers)
        if platform.machine().lower() in ("x86_64", "amd64"):
            assert len(counts) == 1 and sum(counts.values()) == 1, runtimes.describe_precisions(counts)
            ((layer_type, precision),) = counts
            assert layer_type == "Convolution" and precision in allowed, (
                f"{runtimes.describe_precisions(counts)}; expected {sorted(allowed)} (AMX: {amx})"
            )
            assert runtimes.integer_share(counts) == 1.0
        conv = next(layer for layer in layers if layer.layer_type == "Convolution")
        assert conv.primitive, conv  # e.g. 'brgconv_avx512_I8' or 'jit_avx2_I8': the kernel it picked
        if platform.machine().lower() in ("x86_64", "amd64"):  # an integer kernel, not only an integer label
            assert runtimes.kernel_precision(conv.primitive) in ("u8", "i8"), conv
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
    expected = hardware.expected_default_precision()
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


def test_a_kernels_precision_is_read_from_its_name():
    # The names OpenVINO 2026.4.1 reported on an AMX Xeon and an AVX2 CPU.
    for primitive, precision in (
        ("brgconv_avx512_amx_I8", "i8"),
        ("brgconv_avx512_amx_i8", "i8"),
        ("undef_I8", "i8"),
        ("brgconv_avx512_f32", "f32"),
        ("brgconv_avx512_1x1_f32", "f32"),
        ("jit_avx2_FP32", "f32"),
        ("brgconv_avx512_amx_bf16", "bf16"),
        ("undef", ""),
        ("", ""),
    ):
        assert runtimes.kernel_precision(primitive) == precision, primitive


def test_expected_default_precision_follows_the_cpu_features():
    none = dict.fromkeys(hardware.HALF_FLOAT_FEATURES, False)
    assert hardware.expected_default_precision(none, "x86_64") == "f32"
    assert hardware.expected_default_precision(none | {"AVX-512 BF16": True}, "x86_64") == "bf16"
    assert hardware.expected_default_precision(none | {"AMX (BF16)": True}, "AMD64") == "bf16"
    assert hardware.expected_default_precision(none | {"ARM fp16": True}, "arm64") == "f16"
    assert hardware.expected_default_precision(none | {"ARM bf16": True}, "aarch64") == "f32"


def test_half_float_features_from_recorded_cpus():
    from pathlib import Path

    fixtures = Path(__file__).parent / "fixtures" / "platforms"
    zen3 = hardware.parse_proc_cpuinfo((fixtures / "linux-x86_64-zen3.cpuinfo").read_text())[1]
    zen4 = hardware.parse_proc_cpuinfo((fixtures / "linux-x86_64-zen4.cpuinfo").read_text())[1]
    spr = hardware.parse_proc_cpuinfo((fixtures / "linux-x86_64-sapphirerapids.cpuinfo").read_text())[1]
    m2 = hardware.parse_sysctl((fixtures / "darwin-arm64-m2.sysctl").read_text())[1]
    assert hardware.expected_default_precision(hardware.half_float_features(zen3), "x86_64") == "f32"
    assert hardware.expected_default_precision(hardware.half_float_features(zen4), "x86_64") == "bf16"
    assert hardware.half_float_features(spr)["AMX (BF16)"]
    assert hardware.expected_default_precision(hardware.half_float_features(m2), "arm64") == "f16"


# What OpenVINO 2026.4.1 raised compiling lesson 05c's S8S8 per-channel ResNet18 with its default
# precision (bf16) on an Intel Xeon with AMX; with f32 pinned the same file compiled.
NO_SUITABLE_IMPLEMENTATIONS = (
    "Exception from src/inference/src/cpp/core.cpp:132:\n"
    "Exception from src/inference/src/dev/plugin.cpp:59:\n"
    "Check '!implementations.empty()' failed at src/plugins/intel_cpu/src/nodes/executors/executor_factory.hpp:117:\n"
    "No suitable implementations.This may indicate that the provided memory descriptors are not compatible "
    "with any implementation.\n\n\n"
)
# And what it raised for a missing file: a wrapper, a failed check, then a message on two lines.
MISSING_FILE = (
    "Exception from src/inference/src/cpp/core.cpp:132:\n"
    "Exception from src/inference/src/dev/plugin.cpp:59:\n"
    "Check 'util::directory_exists(path) || util::file_exists(path)' failed at "
    "src/frontends/common/src/frontend.cpp:117:\n"
    'FrontEnd API failed with GeneralFailure:\nonnx: Could not open the file: "/tmp/nope.onnx"\n\n\n'
)


def test_a_refusal_keeps_the_file_the_settings_and_the_line_that_matters(tmp_path):
    exc = RuntimeError(NO_SUITABLE_IMPLEMENTATIONS)
    path = tmp_path / "resnet18.static_S8S8_per-channel.onnx"
    refusal = runtimes.Refusal.from_exception(exc, path, {}, run="OpenVINO S8S8 per-channel")
    assert refusal.file == "resnet18.static_S8S8_per-channel.onnx"  # the name, not the whole path
    assert refusal.message == "No suitable implementations"
    assert refusal.detail.startswith("This may indicate that the provided memory descriptors")
    assert refusal.where == "src/plugins/intel_cpu/src/nodes/executors/executor_factory.hpp:117"
    assert refusal.settings == {} and refusal.settings_text == "default"
    assert str(refusal) == (
        "OpenVINO refused to compile resnet18.static_S8S8_per-channel.onnx with its default settings here: "
        "No suitable implementations (at src/plugins/intel_cpu/src/nodes/executors/executor_factory.hpp:117)."
    )
    assert refusal.retry_run == "OpenVINO S8S8 per-channel, f32 pinned (default refused)"
    pinned = runtimes.Refusal.from_exception(exc, path, {"INFERENCE_PRECISION_HINT": "f32"})
    assert "with INFERENCE_PRECISION_HINT=f32 here: No suitable implementations" in str(pinned)
    assert pinned.retry_run.startswith("resnet18.static_S8S8_per-channel.onnx, f32 pinned")  # no run named
    missing = runtimes.Refusal.from_exception(RuntimeError(MISSING_FILE), "nope.onnx")
    assert missing.said == (
        'FrontEnd API failed with GeneralFailure: onnx: Could not open the file: "/tmp/nope.onnx" '
        "(at src/frontends/common/src/frontend.cpp:117)"
    )
    bare = runtimes.Refusal.from_exception(RuntimeError(""), "x.onnx")  # nothing to read: the type
    assert bare.said == "RuntimeError" and bare.where == ""


def test_without_openvino_the_course_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "openvino", None)  # what Python does for a module it cannot import
    assert runtimes.openvino_or_none() is None
    with pytest.raises(ImportError, match=r"pip install openvino.*restart the kernel"):
        runtimes.require_openvino()


LESSON_05C = "05c_a_second_runtime.py"  # lesson 05c: the course's QDQ files on OpenVINO
NEEDS_OPENVINO_ONLY_FOR_SOME = {"qlinearadd-small", "ort-below-row"}  # ONNX Runtime's figures alone


def _run_lesson_05c(tmp_path, monkeypatch):
    """Every code cell of lesson 05c, in order, on tiny classifiers standing in for its ResNet18 files:
    (namespace, tables shown, the lesson's verdicts by sentence name, results recorded)."""
    import jupytext
    from IPython import display as ipython_display
    from IPython.display import Markdown

    import course_lib as cl
    from conftest import ROOT
    from course_machinery import claims, variants

    fp32 = tiny_classifier(tmp_path / "fp32.onnx")
    paths = {
        "fp32": fp32,
        "static U8S8 per-channel": tiny_classifier(tmp_path / "u8s8.onnx", TensorProto.UINT8),
        "static S8S8 per-channel": tiny_classifier(tmp_path / "s8s8.onnx", TensorProto.INT8),
    }
    x = np.random.default_rng(4).standard_normal((200, 16)).astype(np.float32)
    labels = measure.logits(str(fp32), x, threads=1).argmax(1)
    monkeypatch.setattr(variants, "build_resnet_variants", lambda *args, **kwargs: dict(paths))
    monkeypatch.setattr(cl, "load_split", lambda split: (x, labels))
    monkeypatch.setattr(cl, "preprocess", lambda images: images)
    monkeypatch.setattr(measure, "physical_cores", lambda: 1)
    shown, recorded = [], []
    monkeypatch.setattr(ipython_display, "display", shown.append)
    monkeypatch.setattr(results, "record", lambda **entry: recorded.append(entry))
    claims.clear_ledger()
    namespace = {}
    for cell in jupytext.read(ROOT / "notebooks" / "src" / LESSON_05C).cells:
        if cell.cell_type == "code":
            exec(compile(cell.source, "lesson-05c", "exec"), namespace)
    verdicts = {c.id.split(".", 1)[1]: c for c in claims.ledger() if c.id.startswith("05c.")}
    claims.clear_ledger()
    tables = [m.data for m in shown if isinstance(m, Markdown)]
    return namespace, tables, verdicts, recorded


def test_lesson_05c_runs_without_openvino(private_data_dir, tmp_path, monkeypatch, capsys):
    """Without the package, lesson 05c runs top to bottom (saying how to install it), and every
    sentence that needs OpenVINO reads "not measured here" with that reason, never unsettled."""
    from course_machinery import checks
    from course_machinery.checks.claims05c import NOT_INSTALLED, book

    monkeypatch.setitem(sys.modules, "openvino", None)  # what Python does for a module it cannot import
    namespace, tables, verdicts, recorded = _run_lesson_05c(tmp_path, monkeypatch)
    assert namespace["openvino"] is None and namespace["compiled"] == {}
    assert "OpenVINO is not installed: pip install openvino" in capsys.readouterr().out
    assert set(verdicts) == set(book.sentences)  # every check cell ran
    for name, claim in verdicts.items():
        if name in NEEDS_OPENVINO_ONLY_FOR_SOME:
            assert claim.verdict != "not measured", name
        elif not claim.applies:  # about other CPUs (x86 without VNNI, say): not for this one either way
            assert claim.verdict == "not for this CPU", name
        else:
            assert (claim.verdict, claim.unmeasured) == ("not measured", NOT_INSTALLED), name
    assert recorded == []
    for result in (
        checks.check_pinned_integer_convs("integer", None, namespace["paths"]["fp32"], 1),
        checks.check_batch_one_gain("smaller", None, None),
    ):
        assert result and "OpenVINO is not installed here" in result.message


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


def tiny_classifier(path, activation=None):
    """input (N, 16) -> [QuantizeLinear/DequantizeLinear in u8 or s8] -> MatMul with (int8) weights
    -> Add -> logits (N, 10): a classifier that compiles, scores and times in a moment, standing in
    for lesson 05c's ResNet18 files (fp32 without `activation`, else a QDQ file)."""
    rng = np.random.default_rng(3)
    weights = rng.integers(-127, 128, size=(16, 10)).astype(np.int8)
    inits = [numpy_helper.from_array(rng.standard_normal(10).astype(np.float32), "b")]
    if activation is None:
        nodes = [helper.make_node("MatMul", ["input", "W"], ["h"])]
        inits.append(numpy_helper.from_array(weights.astype(np.float32) * 0.01, "W"))
    else:
        u8 = activation == TensorProto.UINT8
        nodes = [
            helper.make_node("QuantizeLinear", ["input", "xs", "xz"], ["xq"]),
            helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
            helper.make_node("DequantizeLinear", ["W", "ws", "wz"], ["wd"]),
            helper.make_node("MatMul", ["xd", "wd"], ["h"]),
        ]
        inits += [
            numpy_helper.from_array(np.array(0.05, np.float32), "xs"),
            numpy_helper.from_array(np.array(128 if u8 else 0, np.uint8 if u8 else np.int8), "xz"),
            numpy_helper.from_array(weights, "W"),
            numpy_helper.from_array(np.array(0.01, np.float32), "ws"),
            numpy_helper.from_array(np.array(0, np.int8), "wz"),
        ]
    nodes.append(helper.make_node("Add", ["h", "b"], ["logits"]))
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 16])
    y = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])
    return _save(helper.make_graph(nodes, "tiny_classifier", [x], [y], inits), path)


class RefusingCore:
    """An `openvino.Core` that refuses one file as OpenVINO 2026.4.1 refused lesson 05c's S8S8 file on
    an Intel Xeon with AMX (the same RuntimeError text), with its default precision only or with every
    setting, and compiles everything else for real."""

    def __init__(self, core, file_name, also_pinned=False):
        self.core, self.file_name, self.also_pinned, self.asked = core, file_name, also_pinned, []

    def compile_model(self, model, device, config):
        self.asked.append((os.path.basename(model), dict(config)))
        pinned = config.get("INFERENCE_PRECISION_HINT") == "f32"
        if os.path.basename(model) == self.file_name and (self.also_pinned or not pinned):
            raise RuntimeError(NO_SUITABLE_IMPLEMENTATIONS)
        return self.core.compile_model(model, device, config)


@pytest.mark.parametrize("also_pinned", [False, True], ids=["default-refused", "every-setting-refused"])
def test_lesson_05c_survives_a_refusal(private_data_dir, core, tmp_path, monkeypatch, capsys, also_pinned):
    """On any CPU: OpenVINO refuses the S8S8 file (with its default precision, or with every setting),
    as 2026.4.1 did on an AMX Xeon. Lesson 05c runs on, shows the refusal, retries the file with f32
    pinned and measures the retry; a sentence that needs the refused run reads "not measured here" with
    the reason (the retry does not stand in for it: on the AMX Xeon its convolutions ran on f32 kernels)."""
    from course_machinery.reference import load_figures

    openvino = runtimes.require_openvino()
    monkeypatch.setattr(openvino, "Core", lambda: RefusingCore(core, "s8s8.onnx", also_pinned))
    namespace, tables, verdicts, recorded = _run_lesson_05c(tmp_path, monkeypatch)
    out = capsys.readouterr().out
    assert (
        "OpenVINO refused to compile s8s8.onnx with its default settings here: No suitable implementations"
        in out
    )
    default, retry = "OpenVINO S8S8", "OpenVINO S8S8, f32 pinned (default refused)"
    asked = [(f, c.get("INFERENCE_PRECISION_HINT", "default")) for f, c in namespace["core"].asked]
    s8s8_asked = [a for a in asked if a[0] == "s8s8.onnx"]
    assert s8s8_asked[:2] == [("s8s8.onnx", "default"), ("s8s8.onnx", "f32")]  # refused, then retried pinned
    compiled_table = next(t for t in tables if "precision hint" in t)
    assert (
        "| OpenVINO S8S8 | refused | No suitable implementations (at src/plugins/intel_cpu/" in compiled_table
    )
    speed_table = next(t for t in tables if "runtime and file" in t)
    others = {"OpenVINO fp32, f32 pinned", "OpenVINO fp32, default", "OpenVINO U8S8"}
    figures = load_figures("05c")["figures"]
    refusal = "OpenVINO refused s8s8.onnx with its default settings here"
    for name in ("s8s8-integer", "ov-s8s8-far-faster"):  # they need the refused run: not measured, why
        assert (verdicts[name].verdict, verdicts[name].unmeasured) == ("not measured", refusal), name
    for name in ("default-precision", "u8s8-integer", "adds-folded", "ov-u8s8-faster", "pinned-same"):
        assert verdicts[name].verdict != "not measured", name  # the runs they need compiled
    if not also_pinned:
        assert set(namespace["compiled"]) == others | {retry} and set(namespace["refused"]) == {default}
        assert f"| {retry} |" in speed_table and f"| {retry} |" in compiled_table
        assert figures["ov_refused"] == "s8s8.onnx (default)"
        for name in ("retry-on-f32", "retry-no-faster"):  # the retry ran: checked
            assert verdicts[name].verdict != "not measured", name
    else:
        assert set(namespace["compiled"]) == others and set(namespace["refused"]) == {default, retry}
        assert "OpenVINO refused to compile s8s8.onnx with INFERENCE_PRECISION_HINT=f32" in out
        assert figures["ov_refused"] == "s8s8.onnx (default), s8s8.onnx (INFERENCE_PRECISION_HINT=f32)"
        for name in ("retry-on-f32", "retry-no-faster"):
            assert verdicts[name].unmeasured == "OpenVINO refused the retry with f32 pinned too", name
    assert {e["variant"] for e in recorded} == set(namespace["compiled"])
    assert all(
        e["lesson"] == "05c" and e["metrics"]["speedup_b64"] == e["metrics"]["speedup"] for e in recorded
    )
