"""The audit (`course_machinery.audit`, `python -m course_lib audit`): its errors, its split, which
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

from course_machinery.audit import (
    AuditError,
    Measured,
    audit,
    decide,
    read_labels,
    read_model,
    read_samples,
    split_samples,
)
from course_machinery.audit.candidates import WorkShares, plan_variants, work_shares
from course_machinery.audit.evaluate import batches_checked, float_quality, labelled_quality


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
        "The array for 'x' (from the arrays given) has shape (120, 15)",
        "the model's input 'x' expects (N, 16)",
        "axis 1 is 15, not 16",
        "Resize, pad or reorder",
    )
    with pytest.raises(AuditError) as err:
        read_samples({"x": np.zeros((120, 16), np.float64)}, info)
    _says(err, "has dtype float64", "the model's input 'x' expects float32", "array.astype(np.float32)")
    with pytest.raises(AuditError) as err:
        read_samples({"x": np.zeros((120, 16), np.uint8)}, info)
    _says(err, "has dtype uint8", "raw pixels", "preprocessing")
    bad = _rows()
    bad[3, 2] = np.nan
    with pytest.raises(AuditError) as err:
        read_samples({"x": bad}, info)
    _says(
        err,
        "holds NaN or inf in 1 of its 120 samples; the first is sample 3",
        "expects finite values",
        "drop",
    )
    assert err.value.sample == 3


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
    from course_machinery.cli import main

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
    assert code == 0 and f"| {_static_u8s8()} |" in printed and "Audit finished in" in printed
    data = json.loads((out / "audit.json").read_text())
    assert data["mode"] == "fp32" and "cosine" in data["variants"][0]["quality"]["text"]
    assert {s["name"] for s in data["skipped"]} >= {"dynamic INT8", "4-bit weight-only"}
    bad = main(["audit", str(model), "--inputs", str(tmp_path / "missing.npz"), "--out", str(out)])
    assert bad == 2 and "found nothing at" in capsys.readouterr().err


@pytest.mark.parametrize("external", [False, True])
def test_qdq_loss_debug_proposes_layers_of_the_graph(tmp_path, external):
    from course_lib.nodes import checked_node_names
    from course_machinery.audit.candidates import Plan, build, sensitive_layers

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

    from course_machinery.audit.run import _Progress

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
    from course_machinery.audit import candidates

    model = _wide_model(tmp_path / "wide.onnx")
    rows = {"x": np.ones((40, 1000), np.float32)}
    monkeypatch.setattr(candidates, "ROW_MEMORY", 240_000)
    assert candidates.calibration_batch(model, rows, tmp_path / "work") == 10  # 240,000 / (2 x 12,000)
    assert list((tmp_path / "work").iterdir()) == []  # the probe copy is gone
    monkeypatch.setattr(candidates, "ROW_MEMORY", 1_000)
    assert candidates.calibration_batch(model, rows, tmp_path / "work") == 1  # never below one row
    monkeypatch.setattr(candidates, "ROW_MEMORY", 10**12)
    assert candidates.calibration_batch(model, rows, tmp_path / "work") == candidates.CALIBRATION_MOST_ROWS
    assert candidates.calibration_batch(model, {"x": rows["x"][:3]}, tmp_path / "work") == 3
    # The same budget over the debugger's tensors (MatMul's input and output, saved from both files).
    from onnxruntime.quantization import qdq_loss_debug

    qdq_loss_debug.modify_model_output_intermediate_tensors(
        str(model), str(tmp_path / "aug.onnx"), ["MatMul"]
    )
    monkeypatch.setattr(candidates, "ROW_MEMORY", 200_000)
    assert candidates.debug_rows(tmp_path / "aug.onnx", rows, model) == 10  # 200,000 / (2.5 x 8,000)


def test_pre_processing_leaves_only_its_output_even_when_symbolic_shapes_fail(tmp_path, monkeypatch):
    """ONNX Runtime saves a failed symbolic shape inference (sym_shape_infer_temp.onnx and a copy of
    the weights under a random name) in the working directory; relative paths must still work."""
    from course_lib.pre_process import contrib_op_model
    from course_machinery.audit import candidates

    monkeypatch.chdir(tmp_path)
    model = contrib_op_model(tmp_path / "inverse.onnx")  # an op symbolic shape inference does not know
    done = candidates.pre_process(
        Path("inverse.onnx"), Path("work") / "inverse.pre.onnx", external_data=False
    )
    assert "symbolic shape inference failed" in done.note, done.note
    assert done.call.kwargs == {"skip_symbolic_shape": True}  # the call that made it, for the rebuild
    assert sorted(p.name for p in (tmp_path / "work").iterdir()) == ["inverse.pre.onnx"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [model.name, "work"]
    onnx.checker.check_model(str(tmp_path / "work" / "inverse.pre.onnx"))


def _static_u8s8() -> str:
    """The audit's static U8S8 per-channel variant on this CPU: a reduce_range file where U8S8 can
    saturate (x86 without VNNI), as the test below checks."""
    from course_machinery import hardware

    return "static U8S8 per-channel" + (" reduce_range" if hardware.u8s8_can_saturate() else "")


def test_where_u8s8_can_saturate_the_audit_builds_reduce_range_files(tmp_path, monkeypatch):
    """On an x86 CPU without VNNI (simulated here), the static variants store weights on 7 bits
    (ONNX Runtime's reduce_range range for int8 weights is -64..64)."""
    from course_machinery import hardware

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


# ------------------------------------------------------------------------------------ issue 34 §1
def test_clearly_faster_means_at_least_5_percent_over_the_whole_interval():
    """Lessons 02 and 05 ask `speedup_at_least(1.05)`: an interval from 1.02x is not enough, even
    though it lies wholly above 1.0x."""
    from course_machinery.audit.decide import MIN_SPEEDUP

    assert MIN_SPEEDUP == 1.05
    d = decide([_m("a", speed=(1.08, 1.02, 1.12))], 32)
    assert d.recommended is None and d.verdicts["a"][0] == "not faster"
    assert "at least 5% faster than fp32 over its whole interval" in d.reason
    d = decide([_m("a", speed=(1.08, 1.02, 1.12)), _m("b", speed=(1.10, 1.05, 1.15))], 32)
    assert d.recommended == "b" and "lower bound >= 1.05x" in d.reason
    assert d.to_dict()["min_speedup"] == 1.05


def test_the_decision_reads_the_batch_you_serve():
    from course_machinery.audit.evaluate import serve_batch_checked

    fast_in_bulk = Measured("dyn", True, 0.99, 100, {1: (1.02, 0.97, 1.07), 32: (1.6, 1.5, 1.7)}, "")
    at_32 = decide([fast_in_bulk], 32)
    served = decide([fast_in_bulk], 1, basis="the batch you serve")
    assert at_32.recommended == "dyn" and served.recommended is None
    assert served.decided_at == "batch 1, the batch you serve" and "(the batch you serve)" in served.reason
    assert serve_batch_checked(None, [1, 32], None) == ([1, 32], 32, "the largest batch timed", "")
    batches, at, basis, note = serve_batch_checked(8, [1, 32], None)
    assert (batches, at, basis) == ([1, 8, 32], 8, "the batch you serve") and "added" in note
    with pytest.raises(AuditError) as err:
        serve_batch_checked(32, [1], 1)
    _says(err, "fixed batch of 1", "the batch 32 asked", "serve_batch=1")
    with pytest.raises(AuditError) as err:
        serve_batch_checked(0, [1], None)
    _says(err, "Expected the batch you serve as a whole number >= 1", "got 0")


def test_the_command_line_decides_at_the_served_batch_and_says_so(tmp_path, capsys):
    from course_machinery.cli import main

    model = mlp(tmp_path / "mlp.onnx")
    np.savez(tmp_path / "x.npz", x=_rows(120))
    out = tmp_path / "out"
    argv = ["audit", str(model), "--inputs", str(tmp_path / "x.npz"), "--batch", "8", "--serve-batch", "1"]
    code = main([*argv, "--out", str(out), "--no-progress", "--runtimes", "onnxruntime"])
    printed = capsys.readouterr().out
    assert code == 0 and "Decided at batch 1, the batch you serve" in printed
    data = json.loads((out / "audit.json").read_text())
    assert data["batches"] == [1, 8] and data["decision"]["batch"] == 1
    assert data["decision"]["basis"] == "the batch you serve"
    assert all(set(v["speed"]) == {"1", "8"} for v in data["variants"])
    assert data["runtimes"]["runs"] == [] and "switched off" in data["runtimes"]["note"]


def test_outputs_to_compare_are_checked(tmp_path):
    from course_machinery.audit.evaluate import choose_outputs

    info = read_model(two_outputs(tmp_path / "two.onnx"))
    assert choose_outputs(info, None) == ["a"]
    assert choose_outputs(info, "b") == ["b"] and choose_outputs(info, "all") == ["a", "b"]
    assert choose_outputs(info, "b, a") == ["b", "a"] and choose_outputs(info, ["a"]) == ["a"]
    with pytest.raises(AuditError) as err:
        choose_outputs(info, "c")
    _says(err, "Expected the output(s) to compare to be float outputs", "'a', 'b'", "got 'c'", "output='a'")


def test_labels_judge_one_output(tmp_path):
    model = two_outputs(tmp_path / "two.onnx")
    with pytest.raises(AuditError) as err:
        audit(model, {"x": _rows()}, labels=np.zeros(120, np.int64), output="all", out=tmp_path / "out")
    _says(err, "Expected one output of class scores", "names 2 (a, b)", "output='a'", "leave out the labels")


def two_outputs(path):
    """x (N, 16) -> MatMul w (16 x 8) -> h; a = h (N, 8), b = h MatMul v (8 x 3)."""
    rng = np.random.default_rng(0)
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w"], ["a"], name="mm_a"),
            helper.make_node("MatMul", ["a", "v"], ["b"], name="mm_b"),
        ],
        "two_outputs",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
        [
            helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", 8]),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, ["N", 3]),
        ],
        [
            numpy_helper.from_array(rng.standard_normal((16, 8)).astype(np.float32), "w"),
            numpy_helper.from_array(rng.standard_normal((8, 3)).astype(np.float32), "v"),
        ],
    )
    return _save(graph, path)


def test_padded_positions_are_left_out_of_the_cosine():
    """With a mask, what a candidate computes at padded positions cannot move the cosine or the
    relative error; without one, it does."""
    rng = np.random.default_rng(0)
    ref = rng.standard_normal((50, 10, 4))
    mask = (np.arange(10)[None] < rng.integers(3, 11, 50)[:, None]).astype(np.int64)
    close = ref + 0.01 * rng.standard_normal(ref.shape)
    garbage = close.copy()
    garbage[mask == 0] = 100 * rng.standard_normal(garbage[mask == 0].shape)
    masked_close = float_quality(ref, close, mask=mask)
    masked_garbage = float_quality(ref, garbage, mask=mask)
    assert masked_close.figures == masked_garbage.figures and masked_garbage.passes
    unmasked = float_quality(ref, garbage)
    assert not unmasked.passes and unmasked.figures["cosine_mean"] < 0.9


def test_an_attention_mask_is_found_by_name_and_only_sequence_outputs_are_masked(tmp_path):
    from course_lib.inputs import InputSpec
    from course_machinery.audit.evaluate import find_mask
    from course_machinery.audit.inputs import ModelInfo

    path = tmp_path / "m.onnx"
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "m",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
    )
    _save(graph, path)
    ids, mask = np.ones((6, 5), np.int64), np.array([[1, 1, 1, 0, 0]] * 6)

    def info(*inputs):
        specs = tuple(InputSpec(n, np.dtype(np.int64), ("N", "seq")) for n in inputs)
        return ModelInfo(path, specs, {"hidden": 3, "pooled": 2}, ("hidden", "pooled"), 17, False)

    shapes = {"hidden": (6, 5, 8), "pooled": (6, 5)}  # pooled happens to be 5 wide too: not masked
    found = find_mask(
        info("input_ids", "attention_mask"),
        {"input_ids": ids, "attention_mask": mask},
        ["hidden", "pooled"],
        shapes,
    )
    assert found.mask == "attention_mask" and found.masked == {"hidden": True, "pooled": False}
    assert "40% of the sample positions" in found.notes[0] and "no axis" in found.notes[1]
    unknown = find_mask(
        info("input_ids", "segments"), {"input_ids": ids, "segments": mask}, ["hidden"], shapes
    )
    assert unknown.mask is None and "padded positions, if any, count" in unknown.notes[0]
    not_binary = find_mask(
        info("input_ids", "attention_mask"),
        {"input_ids": ids, "attention_mask": 2 * mask},
        ["hidden"],
        shapes,
    )
    assert not_binary.mask is None and "values other than 0 and 1" in not_binary.notes[0]


def test_the_metric_is_loaded_checked_and_decides_within_its_tolerance(tmp_path):
    from course_machinery.audit.evaluate import Rule, load_metric

    calls = []

    def mean_a(outputs, inputs, labels):
        calls.append((sorted(outputs), len(inputs["x"]), labels))
        return float(outputs["a"].mean()), True

    ref = {"a": np.full((20, 2), 10.0), "b": np.zeros((20, 3))}
    rule = Rule("metric", ["a"], ref, {"x": np.zeros((20, 4))}, metric=load_metric(mean_a, 0.05))
    assert rule.reference_metric == (10.0, True) and calls == [(["a", "b"], 20, None)]
    within = rule.judge({"a": np.full((20, 2), 9.6), "b": np.zeros((20, 3))})  # 4 % below fp32's
    beyond = rule.judge({"a": np.full((20, 2), 9.4), "b": np.zeros((20, 3))})  # 6 % below
    better = rule.judge({"a": np.full((20, 2), 12.0), "b": np.zeros((20, 3))})  # higher is better
    assert within.passes and within.mode == "metric" and not beyond.passes and better.passes
    assert "6.00% below fp32's, past 5%" in beyond.advice and within.figures["metric_value"] == 9.6
    assert "your metric" in rule.decided_by() and "within 5% of fp32's" in rule.decided_by()

    def perplexity(outputs, inputs, labels):
        return float(outputs["a"].mean())

    perplexity.higher_is_better = False
    lower = Rule("metric", ["a"], ref, {"x": np.zeros((20, 4))}, metric=load_metric(perplexity))
    assert lower.judge({"a": np.full((20, 2), 10.1), "b": ref["b"]}).passes  # 1 % above, within 2 %
    assert not lower.judge({"a": np.full((20, 2), 10.3), "b": ref["b"]}).passes

    source = tmp_path / "my_metrics.py"
    source.write_text("def f1(outputs, inputs, labels):\n    return 0.5, True\n\nf1_value = 3\n")
    assert load_metric(f"{source}:f1").fn(None, None, None) == (0.5, True)
    for bad, said in [
        ("no_colon", "Expected the metric as a function or 'module:function'"),
        (f"{source}:missing", "it failed: AttributeError"),
        (f"{source}:f1_value", "it is a int"),
        ("no_such_module_here:f", "ModuleNotFoundError"),
    ]:
        with pytest.raises(AuditError) as err:
            load_metric(bad)
        _says(err, said)
    with pytest.raises(AuditError) as err:
        load_metric(mean_a, 1.5)
    _says(err, "Expected the metric's tolerance", "got 1.5", "--metric-tolerance")
    with pytest.raises(AuditError) as err:  # no direction
        Rule("metric", ["a"], ref, {"x": np.zeros((20, 4))}, metric=load_metric(lambda o, i, y: 1.0))
    _says(err, "return (value, higher_is_better)", "higher_is_better = True/False")
    with pytest.raises(AuditError) as err:  # the user's bug, said where
        Rule("metric", ["a"], ref, {"x": np.zeros((20, 4))}, metric=load_metric(lambda o, i, y: o["nope"]))
    _says(err, "it raised KeyError", "metric(outputs, inputs, labels)", "a (20, 2)")


def test_activation_matmuls_are_found_from_the_graph(tmp_path):
    """Queries by keys and weights by values have no constant input; a weight that reaches its
    MatMul through a Transpose or a Constant node is still a weight."""
    from course_machinery.audit.candidates import activation_matmuls

    w = numpy_helper.from_array(np.ones((4, 4), np.float32), "w")
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w"], ["q"], name="q_proj"),
            helper.make_node("Transpose", ["w"], ["wt"], name="t"),
            helper.make_node("MatMul", ["x", "wt"], ["k"], name="k_proj"),
            helper.make_node(
                "Constant", [], ["c"], value=numpy_helper.from_array(np.eye(4, dtype=np.float32))
            ),
            helper.make_node("MatMul", ["c", "x"], ["v"], name="v_proj"),
            helper.make_node("Transpose", ["k"], ["kt"], name="kt", perm=[1, 0]),
            helper.make_node("MatMul", ["q", "kt"], ["scores"], name="scores"),
            helper.make_node("MatMul", ["scores", "v"], ["y"], name="context"),
            helper.make_node("MatMul", ["y", "y"], ["z"]),  # unnamed
        ],
        "attention",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [4, 4])],
        [w],
    )
    path = _save(graph, tmp_path / "att.onnx")
    assert activation_matmuls(path) == (["scores", "context"], 1)
    shares = WorkShares({"MatMul": 900}, {"MatMul": 900}, "symbolic shapes")
    plans, _ = plan_variants(
        shares,
        saturates=False,
        dot_product=True,
        activation_products=["scores", "context"],
        unnamed_products=1,
    )
    static = [p for p in plans if p.kind == "static"]
    assert static and all(p.keep_float == ["scores", "context"] for p in static)
    assert "lesson 06" in static[0].keep_float_why and "1 more" in static[0].keep_float_why
    assert all(not p.keep_float for p in plans if p.kind != "static")


def _graph_of(path) -> tuple[list, dict]:
    model = onnx.load(str(path))
    nodes = [
        (n.op_type, n.name, list(n.input), list(n.output), [a.SerializeToString() for a in n.attribute])
        for n in model.graph.node
    ]
    return nodes, {t.name: numpy_helper.to_array(t).tobytes() for t in model.graph.initializer}


def _fixed_speed(fast: str):
    """A stand-in for evaluate.speed: `fast` 2x fp32, every other variant 1x (speed is not what
    these tests are about, and a 2-core machine's timing would make the recommendation a draw)."""
    from course_lib.measure import LatencyComparison

    def speed(fp32, variant, feeds, runs, *, name, threads):
        ratio = (2.0, 1.9, 2.1) if name.startswith(fast) else (1.0, 0.95, 1.05)
        return {b: LatencyComparison("fp32", name, {}, *ratio, 0.9) for b in feeds}

    return speed


def test_the_printed_call_rebuilds_the_recommended_file(tmp_path, monkeypatch):
    """Each variant's quantizer call is data in audit.json (enums by name) and Python in the report;
    executed from the fp32 model, the recommended (dynamic) file's call writes the same graph, and so
    does a static variant's with the calibration rows fed to the reader it names."""
    from course_machinery.audit import evaluate, split_samples
    from course_machinery.audit.candidates import FeedReader, rebuild_code

    monkeypatch.setattr(evaluate, "speed", _fixed_speed("dynamic"))
    (tmp_path / "given").mkdir()
    model = mlp(tmp_path / "given" / "mlp.onnx")
    x = _rows(150)
    result = audit(model, {"x": x}, batch=(8,), out=tmp_path / "out", progress=False, openvino=False)
    assert result.decision.recommended.startswith("dynamic INT8")
    data = json.loads((tmp_path / "out" / "audit.json").read_text())
    dynamic = next(v for v in data["variants"] if v["kind"] == "dynamic")
    assert dynamic["recipe"]["function"] == "quantize_dynamic"
    assert dynamic["recipe"]["kwargs"]["weight_type"] == "QInt8" and dynamic["recipe"]["enums"] == {
        "weight_type": "QuantType"
    }
    assert data["pre_process"]["function"] == "quant_pre_process"
    assert data["rebuild_recommended"] == result.rebuild
    report = (tmp_path / "out" / "audit.md").read_text()
    assert "## Rebuild the recommended file" in report and result.rebuild.strip() in report
    assert "weight_type=QuantType.QInt8" in result.rebuild

    monkeypatch.chdir(tmp_path)  # the code writes its files where it runs
    exec(compile(result.rebuild, "rebuild", "exec"), {})
    assert _graph_of(tmp_path / result.recommended_path.name) == _graph_of(result.recommended_path)

    static = next(v for v in result.variants if v.kind == "static")
    code = rebuild_code(model, result.pre_process, static.recipe, "static.again.onnx")
    assert "# reader: the audit's calibration reader" in code and "split_samples(150, seed=0)" in code
    rows = {"x": x[split_samples(150).calibration]}
    exec(compile(code, "rebuild", "exec"), {"reader": FeedReader(rows, batch=static.recipe.reader["batch"])})
    assert _graph_of(tmp_path / "static.again.onnx") == _graph_of(static.path)


# ------------------------------------------------------------------------------------ OpenVINO
def _openvino():
    from course_machinery import runtimes

    module = runtimes.openvino_or_none()
    if module is None:
        pytest.skip("the openvino package is not installed (pip install openvino)")
    return module


def test_openvino_is_a_second_runtime_judged_and_timed_against_onnx_runtimes_fp32(tmp_path, monkeypatch):
    from course_machinery.audit import evaluate

    _openvino()
    static = _static_u8s8()
    monkeypatch.setattr(evaluate, "speed", _fixed_speed(static))
    x = np.random.default_rng(0).random((100, 1, 8, 8), dtype=np.float32)
    result = audit(
        conv_net(tmp_path / "conv.onnx"), {"x": x}, batch=(4,), out=tmp_path / "out", progress=False
    )
    runs = result.runtime_runs
    assert runs[0].of == "fp32" and {r.of for r in runs[1:]} <= {
        v.name for v in result.variants if v.kind == "static"
    }
    assert result.decision.recommended == static and runs[1].of == static
    for run in runs:  # each compiled one judged by the same rule, and timed in turn with ONNX Runtime's fp32
        assert run.refusal is not None or (run.quality.figures["n"] == 80 and set(run.speed) == {4})
        if run.refusal is None:
            assert run.speed[4].baseline == "ONNX Runtime fp32"
    d = result.runtime_decision
    assert set(d.verdicts) >= {r.name for r in runs} and d.batch == 4
    report = (tmp_path / "out" / "audit.md").read_text()
    section = report.split("## A second runtime")[1].split("## Skipped")[0]
    assert all(
        "05c_a_second_runtime.ipynb" in line for line in section.splitlines() if line.startswith("- **")
    )
    data = json.loads((tmp_path / "out" / "audit.json").read_text())
    assert len(data["runtimes"]["runs"]) == len(runs)
    off = audit(
        conv_net(tmp_path / "conv2.onnx"),
        {"x": x},
        batch=(4,),
        out=tmp_path / "off",
        progress=False,
        openvino=False,
    )
    assert off.runtime_runs == [] and off.runtime_decision is None and "switched off" in off.runtime_note


def test_a_file_openvino_refuses_is_a_row_that_says_so(tmp_path):
    """A compile refusal (OpenVINO 2026.4.1 refuses the S8S8 QDQ ResNet18 at its default precision on
    an AMX Xeon) becomes a row, and the file is compiled once more with f32 pinned."""
    from types import SimpleNamespace

    from course_machinery.audit import second_runtime
    from course_machinery.audit.evaluate import Rule, collect

    ov = _openvino()
    model = conv_net(tmp_path / "conv.onnx")
    refused_file = tmp_path / "refused.onnx"
    refused_file.write_bytes(model.read_bytes())

    class Core:
        def __init__(self):
            self.core = ov.Core()

        def compile_model(self, path, device, config):
            if path.endswith("refused.onnx") and config.get("INFERENCE_PRECISION_HINT") != "f32":
                raise RuntimeError(
                    "Exception from src/inference/src/cpp/core.cpp:132:\nNo suitable implementations.This may "
                    "indicate that the model is not supported"
                )
            return self.core.compile_model(path, device, config)

    fake = SimpleNamespace(Core=Core, __version__=ov.__version__)
    x = {"x": np.random.default_rng(0).random((20, 1, 8, 8), dtype=np.float32)}
    rule = Rule("fp32", ["y"], collect(model, x, ["y"], batch=20, threads=1), x)
    variant = SimpleNamespace(name="static S8S8 per-channel", path=refused_file, file_bytes=1)
    runs = second_runtime.run_all(
        fake,
        model,
        1,
        [variant],
        judge=rule.judge,
        needs=["y"],
        evaluation=x,
        eval_batch=20,
        feed={"x": x["x"][:2]},
        batch=2,
        runs=10,
        threads=1,
        say=lambda line: None,
    )
    assert [r.name for r in runs] == [
        "OpenVINO · fp32 file",
        "OpenVINO · static S8S8 per-channel",
        "OpenVINO · static S8S8 per-channel, f32 pinned (default refused)",
    ]
    refused, pinned = runs[1], runs[2]
    assert (
        refused.refusal.message == "No suitable implementations"
        and not refused.speed
        and refused.quality is None
    )
    assert (
        pinned.settings == {"INFERENCE_PRECISION_HINT": "f32"} and pinned.quality.passes and 2 in pinned.speed
    )
    decision, _ = second_runtime.decide_runtime([], runs, 2, "the batch you serve")
    kind, text = decision.verdicts[refused.name]
    assert kind == "refused" and "compiled again with f32 pinned" in text
    assert refused.to_dict()["refused"]["said"].startswith("No suitable implementations")
