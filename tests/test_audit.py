"""The audit (`course_lib.audit`, `python -m course_lib audit`): its errors, its split, which
variants it plans, its decision (a pure function, on hand-made measurements), and the whole path
on small hand-built models."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from course_lib.audit import (
    AuditError,
    Measured,
    audit,
    decide,
    read_labels,
    read_model,
    read_samples,
    split_samples,
)
from course_lib.audit.evaluate import batches_checked, float_quality, labelled_quality
from course_lib.audit.variants import WorkShares, plan_variants, work_shares


# ------------------------------------------------------------------------------------ models
def _save(graph: onnx.GraphProto, path, opset: int = 17):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def mlp(path, seed: int = 0, opset: int = 17, hidden: int = 32):
    """x (N, 16) -> MatMul 16x`hidden` -> Relu -> MatMul `hidden`x4 -> logits (N, 4)."""
    rng = np.random.default_rng(seed)
    w1 = rng.standard_normal((16, hidden)).astype(np.float32) / 4
    w2 = rng.standard_normal((hidden, 4)).astype(np.float32) / 4
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w1"], ["h"], name="fc1"),
            helper.make_node("Relu", ["h"], ["r"], name="relu"),
            helper.make_node("MatMul", ["r", "w2"], ["logits"], name="fc2"),
        ],
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 4])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")],
    )
    return _save(graph, path, opset)


def conv_net(path, seed: int = 0):
    """x (N, 1, 8, 8) -> Conv 8x3x3 -> Relu -> Flatten -> Gemm 288x3 -> y (N, 3)."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((8, 1, 3, 3)).astype(np.float32) / 3
    fc = rng.standard_normal((3, 288)).astype(np.float32) / 17
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[0, 0, 0, 0]),
            helper.make_node("Relu", ["c"], ["r"], name="relu"),
            helper.make_node("Flatten", ["r"], ["f"], name="flatten"),
            helper.make_node("Gemm", ["f", "fc"], ["y"], name="fc", transB=1),
        ],
        "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(fc, "fc")],
    )
    return _save(graph, path)


def two_inputs(path):
    """x (N, 4) + z (N, 4) -> MatMul 4x2 -> y."""
    w = np.ones((4, 2), np.float32)
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "z"], ["s"]), helper.make_node("MatMul", ["s", "w"], ["y"])],
        "two",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["N", 4]) for n in ("x", "z")],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2])],
        [numpy_helper.from_array(w, "w")],
    )
    return _save(graph, path)


@pytest.fixture
def mlp_file(tmp_path):
    return mlp(tmp_path / "mlp.onnx")


def _rows(n=120, seed=1):
    return np.random.default_rng(seed).standard_normal((n, 16)).astype(np.float32)


def _says(err: pytest.ExceptionInfo, *parts: str) -> None:
    message = str(err.value)
    missing = [p for p in parts if p not in message]
    assert not missing, f"{missing} not in: {message}"


# ------------------------------------------------------------------------------------ errors
def test_a_missing_model_and_a_file_that_is_not_onnx(tmp_path):
    with pytest.raises(AuditError) as err:
        read_model(tmp_path / "nowhere.onnx")
    _says(err, "Expected the path of an ONNX model", "found nothing at", "Check the path")
    junk = tmp_path / "weights.onnx"
    junk.write_bytes(b"PK\x03\x04 this is a zip, not a model" * 10)
    with pytest.raises(AuditError) as err:
        read_model(junk)
    _says(
        err, "Expected an ONNX model in weights.onnx", "found a file ONNX cannot read", "Pass the .onnx file"
    )


def test_an_opset_the_quantizer_cannot_take(tmp_path):
    old = mlp(tmp_path / "old.onnx", opset=9)
    with pytest.raises(AuditError) as err:
        read_model(old)
    _says(err, "takes ai.onnx opsets 10 to", "declares opset 9", "convert_version")
    assert err.value.found == 9


def test_missing_external_data(tmp_path):
    path = mlp(tmp_path / "big.onnx")
    model = onnx.load(str(path))
    onnx.save(model, str(path), save_as_external_data=True, location="big.onnx.data", size_threshold=0)
    assert read_model(path).external_data
    (tmp_path / "big.onnx.data").unlink()
    with pytest.raises(AuditError) as err:
        read_model(path)
    _says(err, "external data", "expected them beside it", "big.onnx.data is not there", "Copy the data file")


def test_wrong_input_names(tmp_path):
    info = read_model(two_inputs(tmp_path / "two.onnx"))
    x = np.zeros((120, 4), np.float32)
    with pytest.raises(AuditError) as err:
        read_samples({"x": x, "zz": x}, info)
    _says(
        err,
        "Expected one array per model input, named 'x', 'z'",
        "holds 'x', 'zz'",
        "missing 'z'",
        "np.savez",
    )
    with pytest.raises(AuditError) as err:  # one array cannot feed two inputs
        read_samples(x, info)
    _says(err, "named 'x', 'z'", "one unnamed array", "np.savez(path, x=..., z=...)")


def test_one_array_feeds_a_one_input_model_whatever_its_key(tmp_path, mlp_file):
    npz = tmp_path / "s.npz"
    np.savez(npz, _rows())  # saved as arr_0
    got = read_samples(npz, read_model(mlp_file))
    assert list(got) == ["x"] and got["x"].shape == (120, 16)


def test_missing_or_unreadable_sample_files_say_what_was_expected(tmp_path, mlp_file):
    info = read_model(mlp_file)
    with pytest.raises(AuditError) as err:
        read_samples(tmp_path / "none.npz", info)
    _says(err, "Expected the sample inputs as an .npz file (one array per model input)", "found nothing at")
    truncated = tmp_path / "cut.npz"
    np.savez(truncated, x=_rows())
    truncated.write_bytes(truncated.read_bytes()[:200])
    with pytest.raises(AuditError) as err:
        read_samples(truncated, info)
    _says(err, "Expected the sample inputs as an .npz file", "could not read cut.npz (", "np.savez(path, ")


def test_wrong_shape_dtype_and_values(mlp_file):
    info = read_model(mlp_file)
    with pytest.raises(AuditError) as err:
        read_samples({"x": np.zeros((120, 15), np.float32)}, info)
    _says(
        err,
        "Expected input 'x' of shape (N, 16) and dtype float32",
        "got an array of shape (120, 15)",
        "Reshape",
    )
    with pytest.raises(AuditError) as err:
        read_samples({"x": np.zeros((120, 16), np.float64)}, info)
    _says(err, "Expected input 'x'", "got dtype float64", "astype(np.float32)")
    with pytest.raises(AuditError) as err:
        read_samples({"x": np.zeros((120, 16), np.uint8)}, info)
    _says(err, "got dtype uint8", "raw pixels", "preprocessing")
    bad = _rows()
    bad[3, 2] = np.nan
    with pytest.raises(AuditError) as err:
        read_samples({"x": bad}, info)
    _says(err, "Expected finite values", "found NaN or infinity in 1 of 120", "Drop or repair")


def test_too_few_samples_states_the_minimum(mlp_file):
    with pytest.raises(AuditError) as err:
        read_samples({"x": _rows(50)}, read_model(mlp_file))
    _says(err, "Expected at least 100 samples", "found 50", "Save more")
    assert (err.value.expected, err.value.found) == (100, 50)


def test_labels_are_checked(mlp_file, tmp_path):
    info = read_model(mlp_file)
    with pytest.raises(AuditError) as err:
        read_labels(np.zeros(99, np.int64), 120, info, "logits")
    _says(err, "Expected 120 integer class indices", "got an array of shape (99,)", "same order")
    with pytest.raises(AuditError) as err:
        read_labels(np.zeros((120, 4), np.float32), 120, info, "logits")
    _says(err, "shape (120, 4) and dtype float32", "labels.argmax(1)")
    with pytest.raises(AuditError) as err:
        read_labels(tmp_path / "none.npy", 120, info, "logits")
    _says(err, "Expected the labels as an .npy file", "found nothing", "np.save")
    garbled = tmp_path / "labels.npy"
    garbled.write_bytes(b"not numpy")
    with pytest.raises(AuditError) as err:
        read_labels(garbled, 120, info, "logits")
    _says(err, "Expected the labels as an .npy file", "could not read labels.npy (", "np.save(path, labels)")


def test_batch_sizes_are_checked():
    assert batches_checked((32, 1, 32), None) == ([1, 32], "")
    assert batches_checked((1, 32), 1)[0] == [1]
    with pytest.raises(AuditError) as err:
        batches_checked((0, 32), None)
    _says(err, "Expected batch sizes as whole numbers >= 1", "got (0, 32)", "Pass the batch sizes")


# ------------------------------------------------------------------------------------ the split
@pytest.mark.parametrize(("count", "calibration"), [(100, 20), (400, 80), (1000, 200), (5000, 200)])
def test_the_split_is_disjoint_complete_and_repeatable(count, calibration):
    split = split_samples(count)
    assert len(split.calibration) == calibration and len(split.evaluation) == count - calibration
    assert not set(split.calibration) & set(split.evaluation)
    assert sorted([*split.calibration, *split.evaluation]) == list(range(count))
    again = split_samples(count)
    assert np.array_equal(split.calibration, again.calibration)
    assert not np.array_equal(split.calibration, np.arange(calibration))  # random, not the first rows
    assert "no sample is in both" in split.describe() and f"{calibration:,} calibrate" in split.describe()


# ------------------------------------------------------------------------------------ the plan
def test_where_the_work_is(tmp_path, mlp_file):
    shares = work_shares(mlp_file, {"x": (16,)})
    assert shares.multiply_adds == {"MatMul": 16 * 32 + 32 * 4} and shares.share("MatMul", "Gemm") == 1.0
    conv = work_shares(conv_net(tmp_path / "conv.onnx"), {"x": (1, 8, 8)})
    assert conv.multiply_adds == {"Conv": 36 * 72, "Gemm": 288 * 3}
    assert conv.share("MatMul", "Gemm") < 0.5


def test_the_plan_fits_the_model_and_the_cpu():
    cnn = WorkShares({"Conv": 900, "Gemm": 100}, {"Conv": 900, "Gemm": 100}, "symbolic shapes")
    plans, skipped = plan_variants(cnn, saturates=False, dot_product=True)
    assert [p.name for p in plans] == [
        "static U8S8 per-channel",
        "static U8S8 per-tensor",
        "static S8S8 per-channel",
    ]
    assert {s.name for s in skipped} == {"dynamic INT8", "4-bit weight-only"}
    assert "ConvInteger" in next(s.reason for s in skipped if s.name == "dynamic INT8")
    assert plans[0].options["per_channel"] and "op_types_to_quantize" not in plans[0].options

    transformer = WorkShares({"MatMul": 900, "Conv": 100}, {"MatMul": 900, "Conv": 100}, "symbolic shapes")
    plans, skipped = plan_variants(transformer, saturates=True, dot_product=False)
    names = [p.name for p in plans]
    assert (
        names[0] == "dynamic INT8 per-channel reduce_range"
        and "static U8S8 per-channel reduce_range" in names
    )
    assert names[-1].startswith("4-bit weight-only") and plans[-1].options["accuracy_level"] == 0
    assert plans[1].options["op_types_to_quantize"] == ["MatMul", "Gemm"] and plans[1].options["reduce_range"]
    assert skipped == []
    nothing = plan_variants(WorkShares({}, {}, "weights only"), saturates=False, dot_product=True)
    assert nothing[0] == [] and "nothing that quantization speeds up" in nothing[1][0].reason


# ------------------------------------------------------------------------------------ quality
def test_quality_with_labels_is_lesson_04s_rule():
    rng = np.random.default_rng(0)
    ref = rng.standard_normal((400, 4))
    labels = ref.argmax(1)
    same = labelled_quality(ref, ref + 1e-4, labels)
    assert same.passes and same.figures["agreement"] == 1.0 and "agreement 100.00%" in same.text
    flipped = ref.copy()
    flipped[:20] = -flipped[:20]  # 5 % of answers change
    worse = labelled_quality(ref, flipped, labels)
    assert not worse.passes and "per_channel" in worse.advice


def test_quality_without_labels_is_cosine_and_relative_error():
    rng = np.random.default_rng(0)
    ref = rng.standard_normal((200, 8))
    close = float_quality(ref, ref + 0.01 * rng.standard_normal(ref.shape))
    assert close.passes and close.figures["cosine_worst"] > 0.99
    low, high = close.figures["cosine_mean_interval"]
    assert low <= close.figures["cosine_mean"] <= high
    one_bad = ref.copy()
    one_bad[7] = -one_bad[7]
    verdict = float_quality(ref, one_bad)
    assert not verdict.passes and "1 sample(s) below" in verdict.advice
    regression = float_quality(ref[:, :1], ref[:, :1] * 1.2)
    assert not regression.passes and "relative errors" in regression.advice


# ------------------------------------------------------------------------------------ decision
def _m(name, passes=True, speed=(1.5, 1.4, 1.6), quality=0.995, size=100, batch=32):
    return Measured(name, passes, quality, size, {batch: speed}, "" if passes else "drop over 1 point")


def test_the_fastest_that_passes_is_recommended():
    d = decide(
        [
            _m("a", speed=(1.3, 1.25, 1.35)),
            _m("b", speed=(1.8, 1.7, 1.9)),
            _m("c", passes=False, speed=(3, 2.9, 3.1)),
        ],
        32,
    )
    assert d.recommended == "b" and d.tied == []
    assert d.verdicts["a"][0] == "slower than the choice" and d.verdicts["c"][0] == "fails"
    assert "1.80x (1.70–1.90)" in d.reason


def test_overlapping_intervals_are_a_tie_won_by_quality_then_size():
    d = decide(
        [_m("fast", speed=(1.8, 1.6, 2.0), quality=0.990), _m("close", speed=(1.7, 1.5, 1.9), quality=0.999)],
        32,
    )
    assert d.recommended == "close" and d.tied == ["fast"] and d.verdicts["fast"][0] == "tied"
    d = decide([_m("big", speed=(1.8, 1.6, 2.0), size=200), _m("small", speed=(1.7, 1.5, 1.9), size=100)], 32)
    assert d.recommended == "small"


def test_none_passes():
    d = decide([_m("a", passes=False), _m("b", passes=False)], 32)
    assert d.recommended is None and "no variant passes the quality rule" in d.reason
    assert all(kind == "fails" for kind, _ in d.verdicts.values())


def test_none_is_clearly_faster_than_fp32():
    d = decide([_m("a", speed=(1.05, 0.95, 1.15)), _m("b", speed=(0.8, 0.7, 0.9))], 32)
    assert d.recommended is None and "not clearly faster than fp32 at batch 32" in d.reason
    assert "not clearly faster than fp32" in d.verdicts["a"][1] and "slower than fp32" in d.verdicts["b"][1]
    assert decide([_m("a", batch=1)], 32).verdicts["a"][0] == "not timed"
    assert decide([], 32).recommended is None


# ------------------------------------------------------------------------------------ end to end
def test_an_mlp_end_to_end_with_labels(tmp_path, mlp_file):
    import onnxruntime as ort

    x = _rows(150)
    labels = ort.InferenceSession(str(mlp_file)).run(None, {"x": x})[0].argmax(1)
    result = audit(mlp_file, {"x": x}, labels=labels, batch=(1, 8), out=tmp_path / "out", progress=False)
    names = [v.name for v in result.variants]
    assert names[0].startswith("dynamic INT8 per-channel") and any(n.startswith("4-bit") for n in names)
    assert result.mode == "labels" and len(result.split.evaluation) == 120
    for v in result.variants:
        assert set(v.speed) == {1, 8} and v.quality.figures["n"] == 120 and v.file_bytes > 0
    assert set(result.decision.verdicts) == set(names)
    report = (tmp_path / "out" / "audit.md").read_text()
    assert "04_parity.ipynb" in report and "no sample is in both" in report
    data = json.loads((tmp_path / "out" / "audit.json").read_text())
    assert data["split"]["calibration"] == 30 and data["decision"]["batch"] == 8
    assert (tmp_path / "out" / "audit.html").is_file()
    if result.recommended_path is not None:
        assert result.recommended_path.is_file()


def test_a_model_with_external_data_is_audited_into_files_that_load_and_nothing_else(tmp_path):
    """Weights in a .data file (models past 2 GB): every file written keeps one data file beside it,
    the recommended one too, and the helpers' copies (probe, debugger) leave nothing behind."""
    import onnxruntime as ort

    path = tmp_path / "given" / "wide.onnx"
    path.parent.mkdir()
    model = onnx.load(str(mlp(path, hidden=256)))  # 16 x 256 and 256 x 4 weights, now in wide.onnx.data
    onnx.save(model, str(path), save_as_external_data=True, location="wide.onnx.data", size_threshold=0)
    x = _rows(150)
    result = audit(path, {"x": x}, batch=(8,), out=tmp_path / "out", progress=False)
    assert read_model(path).external_data and result.variants
    files = [v.path for v in result.variants] + [result.recommended_path] * bool(result.recommended_path)
    for written in files:
        loaded = onnx.load(str(written))  # resolves its external data from beside it
        assert loaded.graph.node
        ort.InferenceSession(str(written)).run(None, {"x": x[:2]})
    everything = sorted(
        p.relative_to(tmp_path / "out").as_posix() for p in (tmp_path / "out").rglob("*") if p.is_file()
    )
    stray = [
        name
        for name in everything
        if not name.startswith("audit.")
        and not re.fullmatch(r"(variants/|work/)?wide\.[\w.-]+\.onnx(\.data)?", name)
    ]
    assert stray == [], everything


def test_the_command_line_audits_a_conv_net_without_labels(tmp_path, capsys):
    from course_lib.tooling.cli import main

    model = conv_net(tmp_path / "conv.onnx")
    np.savez(tmp_path / "x.npz", x=np.random.default_rng(0).random((100, 1, 8, 8), dtype=np.float32))
    out = tmp_path / "out"
    code = main(
        [
            "audit",
            str(model),
            "--inputs",
            str(tmp_path / "x.npz"),
            "--batch",
            "4",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    printed = capsys.readouterr().out
    assert code == 0 and "| static U8S8 per-channel |" in printed and "Audit finished in" in printed
    data = json.loads((out / "audit.json").read_text())
    assert data["mode"] == "fp32" and "cosine" in data["variants"][0]["quality"]["text"]
    assert {s["name"] for s in data["skipped"]} >= {"dynamic INT8", "4-bit weight-only"}
    bad = main(["audit", str(model), "--inputs", str(tmp_path / "missing.npz"), "--out", str(out)])
    assert bad == 2 and "found nothing at" in capsys.readouterr().err


@pytest.mark.parametrize("external", [False, True])
def test_qdq_loss_debug_proposes_layers_of_the_graph(tmp_path, external):
    from course_lib.audit.variants import Plan, build, sensitive_layers
    from course_lib.nodes import checked_node_names

    model = conv_net(tmp_path / "conv.onnx")
    if external:  # every weight in conv.onnx.data
        onnx.save(onnx.load(str(model)), str(model), save_as_external_data=True, size_threshold=0)
    x = {"x": np.random.default_rng(0).random((40, 1, 8, 8), dtype=np.float32)}
    plan = Plan("static U8S8 per-tensor", "static", {"quant_format": "QDQ", "per_channel": False})
    variant = build(plan, model, tmp_path / "q.onnx", x, external_data=external)
    found = sensitive_layers(
        model, variant, x, tmp_path / "debug", name=plan.name, keep=1, external_data=external
    )
    assert list((tmp_path / "debug").iterdir()) == []  # the augmented copies and their data are gone
    assert {layer["node"] for layer in found.layers} == {"conv", "fc"} and len(found.proposal) == 1
    assert checked_node_names(model, found.proposal) == found.proposal
    assert all(layer["weight_sqnr_db"] > 20 for layer in found.layers) and found.first_input_sqnr is not None
    again = build(
        plan, model, tmp_path / "q2.onnx", x, external_data=external, nodes_to_exclude=found.proposal
    )
    kept = next(n for n in onnx.load(str(again)).graph.node if n.name == found.proposal[0])
    weight = kept.input[1]
    assert weight in {t.name for t in onnx.load(str(again)).graph.initializer}  # still a float initializer


@pytest.mark.parametrize("finished", [True, False])
def test_the_audit_bar_in_a_notebook_follows_its_growing_total_and_ends_green_when_done(
    monkeypatch, finished
):
    """The audit's estimates grow as it learns what to run; in a notebook the ipywidget bar must grow with
    them (not stay full from the first step) and end green at 100 % unless the audit stopped early."""
    import tqdm.auto
    import tqdm.notebook

    from course_lib.audit.run import _Progress

    # Every update drawn (tqdm draws at most every 0.1 s; an audit's steps take seconds).
    monkeypatch.setattr(tqdm.auto, "tqdm", functools.partial(tqdm.notebook.tqdm, mininterval=0))
    bar = _Progress(True, "model.onnx")
    with bar.step("pre-processing", 10):
        pass
    bar.add(30)
    _, widget, text = bar.bar.container.children
    assert (widget.value, widget.max) == (10, 40)
    assert "25%" in text.value
    with bar.step("an estimate that ran short", 35):
        pass
    assert (widget.value, widget.max) == (45, 45)
    bar.add(5)  # a retry queued: more work than the last estimate said
    with bar.step("the retry, quicker than its estimate", 2):
        pass
    bar.close(finished)
    if finished:
        assert (widget.value, widget.max, widget.bar_style) == (50, 50, "success")
        assert "100%" in text.value
    else:
        assert (widget.value, widget.max, widget.bar_style) == (47, 50, "danger")


def _wide_model(path, width: int = 1000):
    """x (N, width) -> MatMul -> Relu -> y: three float tensors of `width` values per row."""
    w = numpy_helper.from_array(np.eye(width, dtype=np.float32), "W")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["h"], name="mm"), helper.make_node("Relu", ["h"], ["y"])],
        "wide",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", width])],
        [w],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_calibration_batch_fits_the_calibrators_memory_to_the_model(tmp_path, monkeypatch):
    """Calibrating the text encoder 16 sentences at a time took 2.7 GB; the batch now comes from one
    row's float tensors (here 3 x 4,000 bytes), held about twice, against ROW_MEMORY."""
    from course_lib.audit import variants

    model = _wide_model(tmp_path / "wide.onnx")
    rows = {"x": np.ones((40, 1000), np.float32)}
    monkeypatch.setattr(variants, "ROW_MEMORY", 240_000)
    assert variants.calibration_batch(model, rows, tmp_path / "work") == 10  # 240,000 / (2 x 12,000)
    assert list((tmp_path / "work").iterdir()) == []  # the probe copy is gone
    monkeypatch.setattr(variants, "ROW_MEMORY", 1_000)
    assert variants.calibration_batch(model, rows, tmp_path / "work") == 1  # never below one row
    monkeypatch.setattr(variants, "ROW_MEMORY", 10**12)
    assert variants.calibration_batch(model, rows, tmp_path / "work") == variants.CALIBRATION_MOST_ROWS
    assert variants.calibration_batch(model, {"x": rows["x"][:3]}, tmp_path / "work") == 3
    # The same budget over the debugger's tensors (MatMul's input and output, saved from both files).
    from onnxruntime.quantization import qdq_loss_debug

    qdq_loss_debug.modify_model_output_intermediate_tensors(
        str(model), str(tmp_path / "aug.onnx"), ["MatMul"]
    )
    monkeypatch.setattr(variants, "ROW_MEMORY", 200_000)
    assert variants.debug_rows(tmp_path / "aug.onnx", rows, model) == 10  # 200,000 / (2.5 x 8,000)


def test_pre_processing_leaves_only_its_output_even_when_symbolic_shapes_fail(tmp_path, monkeypatch):
    """ONNX Runtime saves a failed symbolic shape inference (sym_shape_infer_temp.onnx and a copy of
    the weights under a random name) in the working directory; relative paths must still work."""
    from course_lib.audit import variants
    from course_lib.pre_process import contrib_op_model

    monkeypatch.chdir(tmp_path)
    model = contrib_op_model(tmp_path / "inverse.onnx")  # an op symbolic shape inference does not know
    note = variants.pre_process(Path("inverse.onnx"), Path("work") / "inverse.pre.onnx", external_data=False)
    assert "symbolic shape inference failed" in note, note
    assert sorted(p.name for p in (tmp_path / "work").iterdir()) == ["inverse.pre.onnx"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [model.name, "work"]
    onnx.checker.check_model(str(tmp_path / "work" / "inverse.pre.onnx"))


def test_where_u8s8_can_saturate_the_audit_builds_reduce_range_files(tmp_path, monkeypatch):
    """On an x86 CPU without VNNI (simulated here), the static variants store weights on 7 bits
    (ONNX Runtime's reduce_range range for int8 weights is -64..64)."""
    from course_lib import hardware

    monkeypatch.setattr(hardware, "u8s8_can_saturate", lambda: True)
    monkeypatch.setattr(hardware, "has_vnni", lambda: False)
    x = np.random.default_rng(0).random((100, 1, 8, 8), dtype=np.float32)
    result = audit(
        conv_net(tmp_path / "conv.onnx"), {"x": x}, batch=(4,), out=tmp_path / "out", progress=False
    )
    static = [v for v in result.variants if v.kind == "static" and "U8S8" in v.name]
    assert static and all(v.name.endswith("reduce_range") and "can saturate" in v.note for v in static)
    for v in static:
        weights = [
            numpy_helper.to_array(t)
            for t in onnx.load(str(v.path)).graph.initializer
            if t.data_type == TensorProto.INT8 and numpy_helper.to_array(t).size > 8
        ]
        assert weights and all(np.abs(w.astype(int)).max() <= 64 for w in weights), v.name  # 127 without
