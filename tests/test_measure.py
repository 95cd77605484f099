"""course_lib.measure on tiny hand-built ONNX models (built and quantized here, in tmp dirs)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import onnx
import psutil
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_dynamic, quantize_static

import course_lib.measure as measure
from course_lib import files
from course_lib.inputs import InputError
from course_machinery import results

IN, HIDDEN, OUT = 16, 32, 4
PARAMS = IN * HIDDEN + HIDDEN + HIDDEN * OUT  # fc1 weight, bias, fc2 weight


def tiny_mlp(path, rng):
    """x -> MatMul(fc1) -> Add(bias1) -> Relu -> MatMul(fc2) -> y, with float32 initializers."""
    weights = {
        "W1": rng.standard_normal((IN, HIDDEN)).astype(np.float32),
        "B1": rng.standard_normal(HIDDEN).astype(np.float32),
        "W2": rng.standard_normal((HIDDEN, OUT)).astype(np.float32),
    }
    nodes = [
        helper.make_node("MatMul", ["x", "W1"], ["h"], name="fc1"),
        helper.make_node("Add", ["h", "B1"], ["hb"], name="bias1"),
        helper.make_node("Relu", ["hb"], ["r"], name="relu1"),
        helper.make_node("MatMul", ["r", "W2"], ["y"], name="fc2"),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny_mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", IN])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", OUT])],
        [numpy_helper.from_array(w, name) for name, w in weights.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    onnx.save(model, str(path))
    return path


def make_inputs(batch_size):
    return {"x": np.random.default_rng(batch_size).standard_normal((batch_size, IN)).astype(np.float32)}


class RandomReader(CalibrationDataReader):
    def __init__(self, rng):
        self.batches = iter([{"x": rng.standard_normal((8, IN)).astype(np.float32)} for _ in range(4)])

    def get_next(self):
        return next(self.batches, None)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The fp32 MLP and its dynamic (MatMulInteger) and static QDQ INT8 variants."""
    d = tmp_path_factory.mktemp("tiny")
    rng = np.random.default_rng(0)
    fp32 = tiny_mlp(d / "fp32.onnx", rng)
    quantize_dynamic(fp32, d / "dynamic.onnx")
    quantize_static(fp32, d / "qdq.onnx", RandomReader(rng), quant_format=QuantFormat.QDQ)
    return SimpleNamespace(fp32=fp32, dynamic=d / "dynamic.onnx", qdq=d / "qdq.onnx")


def bytes_by_dtype_from_arrays(path):
    """Independent count: decode every initializer to a numpy array and add up nbytes."""
    total = {}
    for t in onnx.load(str(path)).graph.initializer:
        a = numpy_helper.to_array(t)
        total[a.dtype.name] = total.get(a.dtype.name, 0) + a.nbytes
    return total


# ---------------------------------------------------------------------------------- model facts
def test_fp32_facts_four_bytes_per_parameter_and_nothing_quantized(tiny):
    facts = measure.model_facts(tiny.fp32)
    assert facts.initializer_bytes == {"float32": 4 * PARAMS} == bytes_by_dtype_from_arrays(tiny.fp32)
    assert facts.parameter_count == PARAMS
    assert facts.op_counts == {"Add": 1, "MatMul": 2, "Relu": 1}
    assert facts.quantized_nodes == [] and facts.quantized_count == 0
    assert facts.float_op_count == 4 and facts.quant_format == "float"
    assert facts.file_bytes == tiny.fp32.stat().st_size and facts.external_data_bytes == 0
    assert facts.sha256 == files.sha256_file(tiny.fp32)
    assert json.loads(json.dumps(facts.to_dict()))["quantized_count"] == 0


def test_dynamic_variant_has_int8_weights_and_integer_matmuls(tiny):
    facts = measure.model_facts(tiny.dynamic)
    assert facts.initializer_bytes == bytes_by_dtype_from_arrays(tiny.dynamic)
    # Both weight matrices now take one byte per value (plus a zero point each); the bias stays float.
    assert facts.initializer_bytes["int8"] >= IN * HIDDEN + HIDDEN * OUT
    assert facts.initializer_bytes["float32"] < 4 * (IN * HIDDEN)
    assert facts.op_counts["MatMulInteger"] == 2 and facts.op_counts["DynamicQuantizeLinear"] == 2
    assert {(q["op_type"], q["how"]) for q in facts.quantized_nodes} == {("MatMulInteger", "integer kernel")}
    assert facts.quantized_count == 2 and "MatMul" not in facts.float_ops
    assert facts.float_ops["Relu"] == 1  # Relu (and the bias Add) still run in float
    assert facts.quant_format == "dynamic"


def test_qdq_variant_marks_the_ops_between_dequantize_and_quantize(tiny):
    facts = measure.model_facts(tiny.qdq)
    assert facts.initializer_bytes == bytes_by_dtype_from_arrays(tiny.qdq)
    assert facts.op_counts["QuantizeLinear"] >= 1 and facts.op_counts["DequantizeLinear"] >= 3
    quantized = {q["name"]: q for q in facts.quantized_nodes}
    assert {"fc1", "fc2"} <= set(quantized)
    assert all(q["how"] == "QDQ" for q in facts.quantized_nodes)
    assert not {"QuantizeLinear", "DequantizeLinear"} & {q["op_type"] for q in facts.quantized_nodes}
    assert "MatMul" not in facts.float_ops and facts.quant_format == "QDQ"


def test_weight_only_dequantize_leaves_the_matmul_in_float(tmp_path):
    """DequantizeLinear on the weight alone: the activation stays float, so the MatMul does too."""
    w = np.arange(IN * OUT, dtype=np.int8).reshape(IN, OUT)
    graph = helper.make_graph(
        [
            helper.make_node("DequantizeLinear", ["Wq", "scale", "zp"], ["W"], name="dq_w"),
            helper.make_node("MatMul", ["x", "W"], ["y"], name="fc"),
        ],
        "weight_only",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", IN])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", OUT])],
        [
            numpy_helper.from_array(w, "Wq"),
            numpy_helper.from_array(np.array(0.1, np.float32), "scale"),
            numpy_helper.from_array(np.array(0, np.int8), "zp"),
        ],
    )
    path = tmp_path / "weight_only.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    facts = measure.model_facts(path)
    assert facts.initializer_bytes == {"float32": 4, "int8": IN * OUT + 1}
    assert facts.quantized_nodes == [] and facts.float_ops == {"MatMul": 1}
    assert facts.quant_format == "weight-only QDQ"


def test_external_data_is_counted_without_changing_bytes_by_dtype(tiny, tmp_path):
    model = onnx.load(str(tiny.fp32))
    path = tmp_path / "external.onnx"
    onnx.save(model, str(path), save_as_external_data=True, location="weights.bin", size_threshold=0)
    facts = measure.model_facts(path)
    assert facts.initializer_bytes == {"float32": 4 * PARAMS}
    assert facts.external_data_bytes == (tmp_path / "weights.bin").stat().st_size >= 4 * PARAMS
    assert facts.file_bytes < 4 * PARAMS  # the weights left the .onnx file


def test_model_facts_on_a_missing_file_says_what_to_do(tmp_path):
    with pytest.raises(FileNotFoundError, match="Export or quantize"):
        measure.model_facts(tmp_path / "nope.onnx")


# ---------------------------------------------------------------------------------- latency
def check_latency(lat, runs, batch, threads):
    """What a real run must report; the figures themselves are checked on known samples below."""
    assert lat.runs == len(lat.samples_ms) == runs
    assert lat.batch_size == batch and lat.threads == threads


def test_latency_summary_of_samples_known_by_hand():
    # 1 … 11 ms in no order: median 6, p10 2 and p90 10 (numpy's linear interpolation lands on
    # the 2nd and 10th of 11 sorted values), mean 6, min 1; 4 items per run at 6 ms: 666.7 items/s.
    samples_s = [k / 1000 for k in (7, 2, 11, 4, 9, 1, 6, 10, 3, 8, 5)]
    lat = measure.latency._latency_from_samples(samples_s, model="m", batch_size=4, threads=2, warmup=3)
    assert (lat.median_ms, lat.p10_ms, lat.p90_ms) == pytest.approx((6.0, 2.0, 10.0))
    assert (lat.mean_ms, lat.min_ms) == pytest.approx((6.0, 1.0))
    assert lat.throughput == pytest.approx(4 / 0.006)
    assert (lat.runs, lat.batch_size, lat.threads, lat.warmup) == (11, 4, 2, 3)
    assert lat.samples_ms == pytest.approx([7, 2, 11, 4, 9, 1, 6, 10, 3, 8, 5])  # in the order taken


def test_one_slow_run_moves_the_mean_but_not_the_median():
    lat = measure.latency._latency_from_samples(
        [0.001] * 10 + [0.100], model="m", batch_size=1, threads=1, warmup=0
    )
    assert lat.median_ms == pytest.approx(1.0) and lat.p90_ms == pytest.approx(1.0)
    assert lat.mean_ms == pytest.approx(110 / 11)  # (10 × 1 ms + 100 ms) / 11 runs


def test_latency_over_several_batch_sizes(tiny):
    results = measure.measure_latency(
        tiny.fp32, make_inputs, threads=1, warmup=2, runs=15, batch_sizes=[1, 8]
    )
    assert [r.batch_size for r in results] == [1, 8]
    for r, batch in zip(results, (1, 8), strict=True):
        check_latency(r, runs=15, batch=batch, threads=1)


def test_latency_from_a_feed_dict_or_a_session_respects_threads(tiny):
    lat = measure.measure_latency(tiny.qdq, make_inputs(4), threads=1, warmup=1, runs=7)
    check_latency(lat, runs=7, batch=4, threads=1)
    session = measure.make_session(tiny.fp32, threads=2)
    assert session.get_session_options().intra_op_num_threads == 2
    assert session.get_session_options().inter_op_num_threads == 1
    check_latency(measure.measure_latency(session, make_inputs, warmup=1, runs=5), runs=5, batch=1, threads=2)
    with pytest.raises(ValueError, match="runs with 2 intra-op threads"):
        measure.measure_latency(session, make_inputs, threads=1)


def test_latency_names_the_expected_inputs_when_the_feed_is_wrong(tiny):
    with pytest.raises(ValueError, match=r"expects a feed dict with inputs \['x'\]; got \['input'\]"):
        measure.measure_latency(tiny.fp32, {"input": np.zeros((1, IN), np.float32)}, threads=1, runs=1)


def test_default_threads_are_the_physical_cores(tiny, monkeypatch):
    # A CPU with 3 physical cores and 6 hyper-threads, as psutil would report it.
    monkeypatch.setattr(psutil, "cpu_count", lambda logical=True: 6 if logical else 3)
    assert measure.physical_cores() == 3
    assert measure.make_session(tiny.fp32).get_session_options().intra_op_num_threads == 3
    with pytest.raises(ValueError, match="threads must be a whole number >= 1; got 0"):
        measure.make_session(tiny.fp32, threads=0)
    monkeypatch.setattr(psutil, "cpu_count", lambda logical=True: None)  # psutil cannot tell
    monkeypatch.setattr(os, "cpu_count", lambda: 5)
    assert measure.physical_cores() == 5
    monkeypatch.setattr(os, "cpu_count", lambda: None)  # nor can the OS: one thread, never zero
    assert measure.physical_cores() == 1


def _sessions_opened(source: str) -> list[int]:
    """The lines of `source` that open an onnxruntime.InferenceSession themselves."""
    import ast

    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and getattr(node.func, "attr", getattr(node.func, "id", None)) == "InferenceSession"
    ]


def test_every_session_the_library_opens_is_opened_by_make_session():
    package = Path(measure.__file__).resolve().parents[1]
    opened = {
        str(path.relative_to(package)): lines
        for path in sorted(package.rglob("*.py"))
        if (lines := _sessions_opened(path.read_text()))
    }
    assert opened == {"measure/sessions.py": opened.get("measure/sessions.py")}
    assert len(opened["measure/sessions.py"]) == 1
    planted = (
        "import onnxruntime as ort\ns = ort.InferenceSession('m.onnx', providers=['CPUExecutionProvider'])\n"
    )
    assert _sessions_opened(planted) == [2]


def test_a_session_from_bytes_saves_its_optimized_graph_and_profiles(tiny, tmp_path):
    feed = make_inputs(3)
    from_file = measure.make_session(tiny.fp32, threads=1).run(None, feed)[0]
    from_bytes = measure.make_session(Path(tiny.fp32).read_bytes(), threads=1).run(None, feed)[0]
    np.testing.assert_array_equal(from_bytes, from_file)
    measure.make_session(tiny.fp32, threads=1, optimized_to=tmp_path / "opt.onnx")
    assert onnx.load(str(tmp_path / "opt.onnx")).graph.node
    session = measure.make_session(tiny.fp32, threads=1, profile_prefix=str(tmp_path / "trace"))
    session.run(None, feed)
    trace = Path(session.end_profiling())
    assert trace.parent == tmp_path and trace.name.startswith("trace")
    assert any(e.get("name") == "model_run" for e in json.loads(trace.read_text()))


# ---------------------------------------------------------------------------------- logits
def test_logits_in_batches_are_the_logits_of_one_run(tiny):
    x = make_inputs(10)["x"]
    whole = measure.make_session(tiny.fp32, threads=1).run(None, {"x": x})[0]
    for batch in (1, 3, 10, 500):  # 10 batches of 1, batches of 3, 3, 3 and 1, one batch of 10
        got = measure.logits(tiny.fp32, x, batch=batch, threads=1)
        np.testing.assert_allclose(got, whole, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(
        measure.logits(tiny.fp32, {"x": x}, batch=4, threads=1), whole, rtol=1e-6, atol=1e-6
    )


def test_logits_of_an_open_session_are_those_of_its_file(tiny):
    x = make_inputs(10)["x"]
    expected = measure.logits(tiny.fp32, x, batch=3, threads=1)
    session = measure.make_session(tiny.fp32, threads=1, config={"session.intra_op.allow_spinning": "0"})
    np.testing.assert_allclose(measure.logits(session, x, batch=3), expected, rtol=1e-6, atol=1e-6)
    with pytest.raises(InputError, match="input 'x' of the session's model expects"):
        measure.logits(session, x[:, :1])


def test_logits_says_what_the_model_expects(tiny):
    x = make_inputs(2)["x"]
    with pytest.raises(ValueError, match=r"expects a feed dict with inputs \['x'\]; got \['input'\]"):
        measure.logits(tiny.fp32, {"input": x}, threads=1)
    with pytest.raises(
        InputError, match=r"has shape \(2, 3\); input 'x' of fp32.onnx expects \(N, 16\).*axis 1 is 3, not 16"
    ):
        measure.logits(tiny.fp32, x[:, :3], threads=1)
    with pytest.raises(
        InputError, match=r"has shape \(16,\) \(rank 1\).*expects rank 2.*np.expand_dims\(x, 0\)"
    ):
        measure.logits(tiny.fp32, x[0], threads=1)  # one example still needs its row axis
    with pytest.raises(
        InputError, match=r"has dtype float64; input 'x' of fp32.onnx expects float32.*astype\(np.float32\)"
    ):
        measure.logits(tiny.fp32, x.astype(np.float64), threads=1)
    with pytest.raises(ValueError, match="batch must be a whole number >= 1"):
        measure.logits(tiny.fp32, x, batch=0, threads=1)
    with pytest.raises(ValueError, match=r"no output 'probabilities'; its outputs are: y \['N', 4\]"):
        measure.logits(tiny.fp32, x, output="probabilities", threads=1)


def test_logits_returns_the_class_scores_not_the_label(tmp_path):
    """A scikit-learn export lists its label (N,) before its probabilities (N, classes)."""
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "W"], ["scores"]),
            helper.make_node("ArgMax", ["scores"], ["label"], axis=1, keepdims=0),
        ],
        "label_first",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2])],
        [
            helper.make_tensor_value_info("label", TensorProto.INT64, ["N"]),
            helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["N", 2]),
        ],
        [numpy_helper.from_array(np.array([[1.0, 0.0], [0.0, 2.0]], np.float32), "W")],
    )
    path = tmp_path / "label_first.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    x = np.array([[3.0, 1.0], [1.0, 1.0], [0.0, 5.0]], np.float32)
    assert measure.logits(path, x, batch=2, threads=1).tolist() == [[3.0, 2.0], [1.0, 2.0], [0.0, 10.0]]
    assert measure.logits(path, x, batch=2, threads=1, output="label").tolist() == [0, 1, 1]


class FakeClock:
    """Stands in for the time module of measure.latency: time moves only when a FakeSession runs."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self):
        return self.now


@pytest.fixture
def clock(monkeypatch):
    fake = FakeClock()
    monkeypatch.setattr(measure.latency, "time", fake)
    return fake


class FakeSession:
    """Stands in for an InferenceSession: logs which model ran, and each run moves the fake clock
    on by `seconds` (by the values of `slow_start` for the first runs), so every timing is known.
    Powers of two, so that sums and differences of them are exact in floating point."""

    def __init__(self, name, log, seconds, clock, slow_start=()):
        self.name, self.log, self.seconds, self.clock = name, log, seconds, clock
        self.slow_start = list(slow_start)

    def get_inputs(self):
        return [SimpleNamespace(name="x")]

    def get_session_options(self):
        return SimpleNamespace(intra_op_num_threads=1)

    def run(self, outputs, feed):
        self.log.append(self.name)
        self.clock.now += self.slow_start.pop(0) if self.slow_start else self.seconds


MS = 2**-10  # about one millisecond, in seconds


def test_compare_latency_interleaves_runs_and_reports_the_ratio_of_medians(clock):
    log = []
    fast, slow = FakeSession("int8", log, MS, clock), FakeSession("fp32", log, 2 * MS, clock)
    result = measure.compare_latency({"fp32": slow, "int8": fast}, make_inputs, warmup=2, runs=20, block=5)
    # Warm-up A B A B, then turns of one switch-over run + 5 timed runs each: A×6 B×6, four times.
    assert log == ["fp32", "int8"] * 2 + (["fp32"] * 6 + ["int8"] * 6) * 4
    assert set(result.latency) == {"fp32", "int8"} and result.baseline == "fp32"
    for lat in result.latency.values():
        check_latency(lat, runs=20, batch=1, threads=1)
    assert result.latency["fp32"].samples_ms == [2 * MS * 1e3] * 20
    assert result.latency["int8"].samples_ms == [MS * 1e3] * 20
    # Exactly twice as fast on every run: a speedup of 2, and nothing for the interval to widen on.
    assert (result.speedup, result.speedup_low, result.speedup_high) == (2.0, 2.0, 2.0)
    assert result.to_dict()["latency"]["int8"]["runs"] == 20


def test_warmup_runs_are_run_but_not_timed(clock):
    log = []
    cold = FakeSession("m", log, MS, clock, slow_start=[64 * MS, 32 * MS])  # first runs pick kernels
    lat = measure.measure_latency(cold, make_inputs, warmup=2, runs=5)
    assert log == ["m"] * 7 and lat.samples_ms == [MS * 1e3] * 5 and lat.warmup == 2
    cold = FakeSession("m", [], MS, clock, slow_start=[64 * MS, 32 * MS])
    untimed = measure.measure_latency(cold, make_inputs, warmup=0, runs=5)
    assert untimed.samples_ms[:2] == [64 * MS * 1e3, 32 * MS * 1e3]
    assert untimed.median_ms == MS * 1e3 and untimed.mean_ms == pytest.approx(99 * MS * 1e3 / 5)


def test_compare_latency_on_real_models(tiny):
    result = measure.compare_latency(
        {"fp32": tiny.fp32, "int8": tiny.dynamic}, make_inputs, threads=1, runs=10
    )
    assert result.baseline == "fp32" and result.candidate == "int8"
    for lat in result.latency.values():
        check_latency(lat, runs=10, batch=1, threads=1)
    with pytest.raises(ValueError, match="exactly two models"):
        measure.compare_latency({"fp32": tiny.fp32}, make_inputs)
    with pytest.raises(ValueError, match="block must be a whole number >= 1"):
        measure.compare_latency({"fp32": tiny.fp32, "int8": tiny.dynamic}, make_inputs, block=0)


def test_compare_latency_takes_exactly_the_runs_asked_for_in_uneven_turns(clock):
    log = []
    a, b = FakeSession("a", log, MS, clock), FakeSession("b", log, MS, clock)
    result = measure.compare_latency({"a": a, "b": b}, make_inputs, warmup=0, runs=7, block=5)
    assert log == ["a"] * 6 + ["b"] * 6 + ["a"] * 3 + ["b"] * 3  # 5 + 2 timed runs each
    assert result.latency["a"].runs == result.latency["b"].runs == 7


def test_a_pytorch_module_is_timed_interleaved_with_its_onnx_export(tiny):
    import torch

    weights = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(tiny.fp32)).graph.initializer}

    class Same(torch.nn.Module):  # the tiny ONNX model's computation, in PyTorch
        def forward(self, x):
            h = torch.relu(x @ torch.from_numpy(weights["W1"]) + torch.from_numpy(weights["B1"]))
            return h @ torch.from_numpy(weights["W2"])

    runner = measure.TorchRunner(Same(), ["x"], threads=1, name="torch")
    feed = make_inputs(8)
    onnx_out = measure.make_session(tiny.fp32, threads=1).run(None, feed)[0]
    np.testing.assert_allclose(runner.run(None, feed)[0], onnx_out, rtol=1e-5, atol=1e-5)
    result = measure.compare_latency({"torch": runner, "onnx": tiny.fp32}, make_inputs, threads=1, runs=5)
    assert result.latency["torch"].threads == 1 and result.latency["torch"].runs == 5
    with pytest.raises(ValueError, match="runs with 1 intra-op threads"):
        measure.measure_latency(runner, make_inputs, threads=2)
    with pytest.raises(ValueError, match="threads must be a whole number"):
        measure.TorchRunner(Same(), ["x"], threads=0)


def test_sessions_can_stop_spinning_for_fair_turns_with_another_runtime(tiny):
    entry = "session.intra_op.allow_spinning"
    quiet = measure.make_session(tiny.fp32, threads=1, spinning=False)
    assert quiet.get_session_options().get_session_config_entry(entry) == "0"
    with pytest.raises(Exception, match="does not have configuration"):  # spinning: ONNX Runtime's default
        measure.make_session(tiny.fp32, threads=1).get_session_options().get_session_config_entry(entry)


def test_the_bootstrap_keeps_runs_paired():
    # The machine's speed swings 30-fold from run to run, but in every pair of interleaved runs the
    # candidate takes exactly half the baseline's time: resampling whole pairs gives exactly 2 each
    # time. (Resampling each side on its own would mix slow and fast moments into a wide interval.)
    baseline = [0.004, 0.001, 0.009, 0.002, 0.030, 0.003]
    candidate = [t / 2 for t in baseline]
    assert measure.bootstrap_ratio_interval(baseline, candidate) == (2.0, 2.0)
    assert measure.bootstrap_ratio_interval(candidate, baseline) == (0.5, 0.5)


def ratio(speedup: float, low: float, high: float) -> measure.LatencyComparison:
    """A comparison with a fixed ratio and interval, as compare_latency would return it."""
    return measure.LatencyComparison("fp32", "int8", {}, speedup, low, high, 0.9)


def test_a_ratio_is_clearly_above_another_only_when_the_intervals_are_disjoint():
    high, low = ratio(2.0, 1.8, 2.2), ratio(1.2, 1.1, 1.3)
    assert high.speedup_clearly_above(low) is True
    assert low.speedup_clearly_above(high) is False


def test_overlapping_intervals_claim_neither_ratio_larger_whatever_the_medians():
    a, b = ratio(1.62, 1.51, 1.85), ratio(1.54, 1.48, 1.63)  # medians 0.08 apart, intervals overlap
    assert a.speedup_clearly_above(b) is None and b.speedup_clearly_above(a) is None
    wide, narrow = ratio(1.5, 1.0, 3.0), ratio(2.5, 2.4, 2.6)  # one interval inside the other
    assert wide.speedup_clearly_above(narrow) is None and narrow.speedup_clearly_above(wide) is None
    assert a.speedup_clearly_above(a) is None


def test_touching_intervals_count_as_overlapping():
    upper, lower = ratio(1.6, 1.5, 1.7), ratio(1.4, 1.3, 1.5)  # they share the point 1.5
    assert upper.speedup_clearly_above(lower) is None and lower.speedup_clearly_above(upper) is None
    assert upper.speedup_clearly_above(ratio(1.4, 1.3, 1.4999)) is True


def test_a_ratio_reaches_a_target_only_when_its_whole_interval_does():
    assert ratio(1.60, 1.50, 1.70).speedup_at_least(1.5) is True  # the interval starts at the target
    assert ratio(1.40, 1.30, 1.49).speedup_at_least(1.5) is False
    assert ratio(1.48, 1.39, 1.55).speedup_at_least(1.5) is None  # median below, interval across
    assert ratio(1.53, 1.48, 1.58).speedup_at_least(1.5) is None  # median above, interval across


# ---------------------------------------------------------------------------------- peak memory
def test_peak_memory_counts_the_weights_in_a_fresh_process(tmp_path):
    n = 3200  # one 3200 x 3200 float32 matrix: 40.96 MB of weights
    w = np.random.default_rng(0).standard_normal((n, n), dtype=np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"])],
        "big",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", n])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", n])],
        [numpy_helper.from_array(w, "W")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    path = tmp_path / "big.onnx"
    onnx.save(model, str(path))
    del model, graph

    mem = measure.peak_memory(path, lambda b: {"x": np.ones((b, n), np.float32)}, batch_size=2, threads=1)
    assert mem.file_bytes == path.stat().st_size > w.nbytes
    assert 0 < mem.baseline_bytes <= mem.after_load_bytes <= mem.peak_bytes
    assert mem.increase_bytes >= w.nbytes  # the session holds at least the weights
    if sys.platform == "linux":  # measured apart from this process: not pytest's (inherited) peak
        import resource

        assert mem.baseline_bytes < resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    assert mem.to_dict()["increase_bytes"] == mem.peak_bytes - mem.baseline_bytes


def test_peak_memory_reports_a_failing_child(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not an onnx model")
    with pytest.raises(RuntimeError, match="memory-measuring subprocess for bad.onnx failed"):
        measure.peak_memory(bad, make_inputs, threads=1)


# ---------------------------------------------------------------------------------- parity
def test_parity_counts_agreement_drift_and_who_is_right():
    reference = np.array(
        [
            [2.0, 0.0, 0.0],  # label 0: both right
            [0.0, 2.0, 0.0],  # label 1: both right
            [0.0, 0.0, 2.0],  # label 0: both wrong, same answer (2)
            [2.0, 1.0, 0.0],  # label 2: both wrong, different answers (0 vs 1)
            [0.0, 2.0, 1.0],  # label 1: only fp32 right
            [1.0, 0.0, 0.5],  # label 2: only int8 right (int8 fixes an fp32 mistake)
        ]
    )
    drift = np.zeros_like(reference)
    drift[0, 1] = 0.01  # a logit at 0.0: relative drift 0.01 / eps = 10
    drift[3, 1] = 1.5  # [2, 2.5, 0] -> class 1
    drift[4, 2] = 1.25  # [0, 2, 2.25] -> class 2
    drift[5, 0] = -0.75  # [0.25, 0, 0.5] -> class 2
    candidate = reference + drift
    labels = np.array([0, 1, 0, 2, 1, 2])

    p = measure.parity(reference, candidate, labels)
    assert p.n == 6 and p.labelled == 6
    assert p.agreement == pytest.approx(3 / 6) and p.disagreements == 3
    assert p.reference_accuracy == pytest.approx(3 / 6) and p.candidate_accuracy == pytest.approx(3 / 6)
    assert (p.both_right, p.both_wrong_same, p.both_wrong_different) == (2, 1, 1)
    assert (p.only_reference_right, p.only_candidate_right) == (1, 1)
    assert p.max_abs_drift == pytest.approx(1.5)
    assert p.mean_abs_drift == pytest.approx((0.01 + 1.5 + 1.25 + 0.75) / 18)
    assert p.max_rel_drift == pytest.approx(0.01 / measure.RELATIVE_DRIFT_EPS)  # 10 > 1.5 / 1.0
    assert p.allclose is False


def test_parity_without_labels_and_within_tolerance():
    reference = np.array([[1.0, -1.0], [0.5, 3.0]], dtype=np.float32)
    candidate = reference + np.float32(0.02)
    p = measure.parity(reference, candidate)
    assert p.allclose is True and p.agreement == 1.0
    assert p.max_rel_drift == pytest.approx(0.02 / 0.5, rel=1e-5)
    assert p.reference_accuracy is None and p.both_right is None
    assert measure.parity(reference, candidate, atol=0.01).allclose is False
    assert measure.parity(reference, candidate, atol=0.01, rtol=0.1).allclose is True


def test_parity_skips_rows_without_ground_truth_for_accuracy():
    reference = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    p = measure.parity(reference, reference, labels=[0, 0, -1])
    assert p.n == 3 and p.labelled == 2 and p.agreement == 1.0
    assert p.reference_accuracy == 0.5 and (p.both_right, p.both_wrong_same) == (1, 1)


def test_parity_rejects_mismatched_shapes_and_labels():
    with pytest.raises(ValueError, match="same shape"):
        measure.parity(np.zeros((2, 3)), np.zeros((2, 4)))
    with pytest.raises(ValueError, match="3 labels for 2 rows"):
        measure.parity(np.zeros((2, 3)), np.zeros((2, 3)), labels=[0, 1, 2])


# ---------------------------------------------------------------------------------- results store
@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path))
    return tmp_path / "results.json"


def test_record_appends_entries_with_the_environment(store, tiny):
    assert results.load_results() == []  # a missing file is an empty store
    lat = measure.latency._latency_from_samples(
        [0.001, 0.002, 0.003], model="m", batch_size=1, threads=1, warmup=0
    )
    first = results.record("03", "tiny", "fp32", lat, {"threads": 1}, path=tiny.fp32)
    results.record("04", "tiny", "int8", {"accuracy": np.float32(0.5), "logits": np.zeros(2)})
    entries = json.loads(store.read_text())
    assert len(entries) == 2 and entries[0] == first
    assert first["metrics"]["median_ms"] == pytest.approx(2.0) and first["options"] == {"threads": 1}
    assert first["file"] == {
        "name": "fp32.onnx",
        "bytes": tiny.fp32.stat().st_size,
        "sha256": files.sha256_file(tiny.fp32),
    }
    assert entries[1]["metrics"] == {"accuracy": 0.5, "logits": [0.0, 0.0]}
    env = results.environment_fingerprint()
    assert first["environment"] == env and len(env["hash"]) == 12
    assert {"cpu", "int8_features", "physical_cores", "versions"} <= set(env)
    second = entries[1]
    assert results.load_results() == [first, second]  # the reader finds exactly what was recorded
    assert results.load_results(lesson="04") == [second]
    assert results.load_results(lesson="05") == []


def test_load_results_keeps_only_this_environment_by_default(store):
    results.record("03", "tiny", "fp32", {"ms": 1.0})
    entries = json.loads(store.read_text())
    other = {
        **entries[0],
        "variant": "elsewhere",
        "environment": {**entries[0]["environment"], "hash": "0" * 12},
    }
    store.write_text(json.dumps([*entries, other]))
    assert [e["variant"] for e in results.load_results()] == ["fp32"]
    assert [e["variant"] for e in results.load_results(same_environment=False)] == ["fp32", "elsewhere"]


def test_a_corrupt_store_is_moved_aside_not_lost(store):
    store.write_text('[{"lesson": "03", "metrics": {')  # cut off mid-write
    with pytest.warns(UserWarning, match="not valid JSON"):
        assert results.load_results() == []
    assert store.exists()  # reading never moves anything
    with pytest.warns(UserWarning, match="Moved it aside"):
        results.record("03", "tiny", "fp32", {"ms": 1.0})
    (aside,) = store.parent.glob("results.json.corrupt-*")
    assert aside.read_text() == '[{"lesson": "03", "metrics": {'
    assert len(json.loads(store.read_text())) == 1


def test_record_refuses_values_json_cannot_hold_and_leaves_the_file_alone(store):
    results.record("03", "tiny", "fp32", {"ms": 1.0})
    before = store.read_text()
    with pytest.raises(TypeError, match="Cannot store a object in the results file"):
        results.record("03", "tiny", "fp32", {"ms": object()})
    assert store.read_text() == before


def allocate_and_sum(megabytes: int) -> float:
    """Touches `megabytes` MB of memory, returns a small result (run in peak_memory_of's child)."""
    return float(np.ones(megabytes * 1024 * 1024 // 8).sum())


def test_peak_memory_of_a_call_counts_what_the_call_allocates():
    result, mem = measure.peak_memory_of(allocate_and_sum, 300)
    assert result == 300 * 1024 * 1024 // 8
    assert 290e6 < mem.increase_bytes < 450e6
    assert mem.seconds > 0 and mem.what == "allocate_and_sum"
    _, small = measure.peak_memory_of(allocate_and_sum, 10)
    assert small.increase_bytes < 100e6


def _parity_with(ref_acc: float, cand_acc: float, agreement: float, n: int = 1000):
    """A Parity built from counts: n rows, the given accuracies and agreement."""
    return measure.Parity(
        n=n,
        agreement=agreement,
        disagreements=round((1 - agreement) * n),
        max_abs_drift=0.0,
        mean_abs_drift=0.0,
        max_rel_drift=0.0,
        allclose=True,
        atol=0.05,
        rtol=0.0,
        eps=1e-3,
        labelled=n,
        reference_accuracy=ref_acc,
        candidate_accuracy=cand_acc,
    )


@pytest.mark.parametrize(
    "cand_acc, agreement, drop, passes, advice",
    [
        (0.918, 0.995, 0.2, True, "passes"),
        (0.9151, 0.995, 0.49, True, "passes"),
        (0.914, 0.995, 0.6, False, "over 0.5 points: not accepted"),
        (0.918, 0.99, 0.2, False, "not above 99%"),  # agreement must exceed 99 %
        (0.905, 0.97, 1.5, False, "review the calibration set"),
        (0.88, 0.93, 4.0, False, "per_channel is often missing"),
        (0.93, 0.995, -1.0, True, "passes"),  # int8 better than fp32 is not a drop
    ],
)
def test_acceptance_rule_and_its_advice(cand_acc, agreement, drop, passes, advice):
    verdict = measure.acceptance(_parity_with(0.92, cand_acc, agreement))  # fp32: 92 % accurate
    assert verdict.passes is passes and advice in verdict.advice
    assert verdict.drop_points == pytest.approx(drop)


def test_acceptance_needs_labels():
    p = measure.parity(np.eye(3), np.eye(3))
    with pytest.raises(ValueError, match="compute the parity with labels"):
        measure.acceptance(p)


def test_parity_counts_the_rows_whose_every_value_is_within_the_tolerance():
    reference = np.zeros((4, 3))
    candidate = reference + np.array([[0.01, 0, 0], [0.2, 0, 0], [0, 0, -0.04], [0, 0.06, 0]])
    p = measure.parity(reference, candidate, atol=0.05)
    assert p.within_atol == pytest.approx(0.5) and p.allclose is False  # rows 0 and 2 only
    assert measure.parity(reference, candidate, atol=0.3).within_atol == 1.0
    assert measure.parity(reference + 1, candidate + 1, atol=0.0, rtol=0.25).within_atol == 1.0  # relative


def test_an_accuracy_is_shown_with_its_interval():
    p = _parity_with(0.92, 0.915, 0.995)
    low, high = p.accuracy_interval()
    assert p.accuracy_text() == f"91.50% ({100 * low:.1f}–{100 * high:.1f})"
    assert p.accuracy_text("reference").startswith("92.00% (")


# The course target on top of the acceptance rule: each mark, and what the advice names.
FAST, SLOW, STRADDLES = ratio(1.84, 1.82, 1.85), ratio(1.41, 1.40, 1.42), ratio(1.48, 1.42, 1.54)


@pytest.mark.parametrize(
    "cand_acc, agreement, size, speed, mark, said",
    [
        (0.92, 0.997, 0.25, FAST, "✔", "ship it"),
        (0.92, 0.997, 0.57, FAST, "trade", "the file is 0.57 of fp32's (target at most 0.26)"),
        (0.916, 0.997, 0.25, FAST, "trade", "accuracy drop is +0.40 points"),  # accepted, short of 0.3
        (0.92, 0.993, 0.25, FAST, "trade", "agreement is 99.30%"),
        (0.92, 0.997, 0.25, SLOW, "✘", "1.41x (1.40–1.42) lies below 1.5x"),
        (0.92, 0.997, 0.57, SLOW, "✘", "below 1.5x; the file is 0.57"),
        (0.92, 0.997, 0.25, STRADDLES, "unsettled", "reaches both sides of 1.5x"),
        (0.92, 0.997, 0.25, None, "—", "not timed"),
        (0.90, 0.97, 0.25, FAST, "✘", "don't ship: drop over 1 point"),  # the rule rejects it, fast or not
    ],
)
def test_the_course_target_reads_the_speed_interval_and_names_a_trade(
    cand_acc, agreement, size, speed, mark, said
):
    target = measure.acceptance(_parity_with(0.92, cand_acc, agreement)).target(size, speed)
    assert target.mark == mark and said in target.advice
    assert target.timed is (speed is not None) and target.small is (size <= 0.26)


def test_a_target_is_one_row_of_the_verdict_table():
    verdict = measure.acceptance(_parity_with(0.92, 0.92, 0.997))
    row = verdict.target(0.57, FAST).row("per-channel, 2 layers in float")
    assert row["variant"] == "per-channel, 2 layers in float" and row["course target"] == "trade"
    assert (
        row["speed b64"] == "1.84x (1.82–1.85)" and row["size"] == "0.570" and row["acceptance rule"] == "✔"
    )
    assert verdict.target(0.25).row("untimed")["speed b64"] == "—"


def test_the_course_target_takes_other_limits():
    verdict = measure.acceptance(_parity_with(0.92, 0.92, 0.997))
    assert verdict.target(0.57, FAST, max_size_ratio=0.6).mark == "✔"
    assert verdict.target(0.25, FAST, min_speedup=2.0).mark == "✘"
    assert verdict.target(0.25, STRADDLES, min_speedup=1.4).mark == "✔"


def test_margin_is_the_gap_between_the_two_most_probable_classes():
    logits = np.array([[0.0, 0.0, 0.0], [20.0, 0.0, 0.0], [np.log(3), 0.0, -50.0]])
    m = measure.margin(logits)
    assert m[0] == pytest.approx(0.0) and m[1] == pytest.approx(1.0, abs=1e-4)
    assert m[2] == pytest.approx(0.75 - 0.25, abs=1e-6)  # probabilities 3/4 and 1/4
    np.testing.assert_allclose(measure.softmax(logits).sum(1), 1.0)


def test_markdown_table_escapes_bars_inside_cells():
    table = measure.markdown_table(
        [{"variant": "a", "max |drift|": "0.5"}, {"variant": "b|c", "max |drift|": 1}]
    )
    assert table.splitlines() == [
        "| variant | max \\|drift\\| |",
        "|---|---|",
        "| a | 0.5 |",
        "| b\\|c | 1 |",
    ]
    assert measure.markdown_table([]) == "(no rows)"


def test_the_accuracy_change_interval_counts_only_the_images_one_model_gets_right():
    # 10,000 images of class 0. INT8 alone is wrong on 64, fp32 alone on 47: change -0.17 points.
    # By hand: se = sqrt(64 + 47 - 17**2 / 10000) / 10000 = 0.0010534, so 95 % is -0.17 ± 0.2065.
    labels = np.zeros(10_000, dtype=np.int64)
    fp32, int8 = np.tile([1.0, 0.0], (10_000, 1)), np.tile([1.0, 0.0], (10_000, 1))
    int8[:64] = [0.0, 1.0]
    fp32[100:147] = [0.0, 1.0]
    p = measure.parity(fp32, int8, labels)
    assert (p.only_reference_right, p.only_candidate_right) == (64, 47)
    low, high = p.accuracy_change_interval()
    assert low == pytest.approx(-0.17 - 0.2065, abs=1e-4) and high == pytest.approx(-0.17 + 0.2065, abs=1e-4)
    assert measure.parity(fp32, fp32, labels).accuracy_change_interval() == (0.0, 0.0)  # same decisions
    with pytest.raises(ValueError, match="needs labels"):
        measure.parity(fp32, int8).accuracy_change_interval()


def test_timing_sessions_do_not_spin_unless_asked(tiny, monkeypatch):
    """On 2 cores two sessions' spinning threads fight for the cores: the timing functions turn it off."""
    made = []
    real = measure.make_session

    def recording(path, threads=None, spinning=True, config=None):
        made.append(spinning)
        return real(path, threads, spinning=spinning, config=config)

    monkeypatch.setattr(measure.latency, "make_session", recording)  # the name the timing functions call
    feed = {"x": np.ones((2, IN), np.float32)}
    measure.compare_latency({"fp32": tiny.fp32, "int8": tiny.dynamic}, feed, threads=1, warmup=1, runs=2)
    measure.measure_latency(tiny.fp32, feed, threads=1, warmup=1, runs=2)
    assert made == [False, False, False]
    measure.compare_latency(
        {"a": tiny.fp32, "b": tiny.dynamic}, feed, threads=1, warmup=1, runs=2, spinning=True
    )
    assert made[-2:] == [True, True]


def test_wilson_interval_stays_inside_zero_and_one_and_is_wide_for_few_rows():
    low, high = measure.parity_check._wilson_interval(10_000, 10_000)
    assert high == 1.0 and low == pytest.approx(10_000 / (10_000 + 1.959964**2), rel=1e-6)
    low, high = measure.parity_check._wilson_interval(5, 10)  # half of ten: the classic 0.24-0.76
    assert (round(low, 2), round(high, 2)) == (0.24, 0.76)
    with pytest.raises(ValueError, match="at least one row"):
        measure.parity_check._wilson_interval(0, 0)


def test_paired_difference_counts_only_the_rows_where_the_two_differ():
    a = np.zeros(10_000, bool)
    b = np.zeros(10_000, bool)
    a[:30] = True  # 30 rows only a gets right
    b[30:40] = True  # 10 rows only b
    a[40:9000] = b[40:9000] = True  # rows both get right move nothing
    d = measure.parity_check._paired_difference(a, b, "agreement")
    assert d.points == pytest.approx(0.2) and (d.only_a, d.only_b, d.n) == (30, 10, 10_000)
    # paired standard error sqrt(30 + 10 - 20**2 / 10000) / 10000, times 1.96, in points
    assert d.high - d.points == pytest.approx(1.959964 * np.sqrt(39.96) / 100, rel=1e-5)
    assert not d.is_noise and "higher" in str(d)
    same = measure.parity_check._paired_difference(a, a)
    assert same.points == 0 and same.is_noise and "within the noise" in str(same)
    with pytest.raises(ValueError, match="same rows"):
        measure.parity_check._paired_difference(a, b[:10])


def test_two_variants_agreement_is_compared_on_the_same_images():
    ref = np.array([[2.0, 0.0]] * 4 + [[0.0, 2.0]] * 4)
    labels = np.array([0] * 4 + [1] * 4)
    one_off = ref.copy()
    one_off[0] = [0.0, 2.0]  # disagrees on image 0
    two_off = ref.copy()
    two_off[[0, 5]] = [[0.0, 2.0], [2.0, 0.0]]  # and on image 5
    p1, p2 = measure.parity(ref, one_off, labels), measure.parity(ref, two_off, labels)
    d = p1.compare(p2)
    assert (d.only_a, d.only_b) == (1, 0) and d.points == pytest.approx(12.5)
    assert p1.compare(p2, "accuracy").points == pytest.approx(12.5)
    assert "same_top1" not in p1.to_dict()
    assert p1.agreement_text().startswith("87.50% (")
    with pytest.raises(ValueError, match="with labels"):
        measure.parity(ref, one_off).compare(measure.parity(ref, two_off), "accuracy")


def test_a_comparison_prints_as_the_lessons_write_it_and_reads_below_a_target():
    from course_lib.measure import LatencyComparison

    c = LatencyComparison("fp32", "int8", {}, 1.3412, 1.2891, 1.4049, 0.9)
    assert str(c) == "1.34x (1.29–1.40)"
    assert c.speedup_below(1.5) is True and c.speedup_below(1.0) is False and c.speedup_below(1.3) is None
