"""course_lib.calibration: readers that validate what they feed, on tiny hand-built ONNX models."""

from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static

import course_lib.data as data
from course_lib.calibration import (
    ArrayReader,
    CalibrationError,
    DatasetReader,
    InputSpec,
    _check_samples,
    _input_spec,
)
from course_lib.inputs import InputError, check_array


def save_model(path, nodes, inputs, outputs, initializers=()):
    graph = helper.make_graph(nodes, path.stem, inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def conv_model(path, size=4, out_channels=2, pool=False):
    """input ["N", 1, size, size] float32 -> 1x1 Conv (+ bias) [-> GlobalAveragePool] -> y."""
    rng = np.random.default_rng(0)
    weights = [
        numpy_helper.from_array(rng.standard_normal((out_channels, 1, 1, 1)).astype(np.float32), "W"),
        numpy_helper.from_array(rng.standard_normal(out_channels).astype(np.float32), "B"),
    ]
    nodes = [helper.make_node("Conv", ["input", "W", "B"], ["c" if pool else "y"], name="conv")]
    out_hw = (1, 1) if pool else (size, size)
    if pool:
        nodes.append(helper.make_node("GlobalAveragePool", ["c"], ["y"], name="pool"))
    return save_model(
        path,
        nodes,
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 1, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", out_channels, *out_hw])],
        weights,
    )


def mlp_model(path, batch="N"):
    """x [batch, 2] float32 -> MatMul(W) -> Add(B) -> Relu -> MatMul(W2) -> y [batch, 3]."""
    rng = np.random.default_rng(1)
    weights = {
        "W": rng.standard_normal((2, 16)).astype(np.float32),
        "B": rng.standard_normal(16).astype(np.float32),
        "W2": rng.standard_normal((16, 3)).astype(np.float32),
    }
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["h"], name="fc1"),
        helper.make_node("Add", ["h", "B"], ["hb"], name="bias1"),
        helper.make_node("Relu", ["hb"], ["r"], name="relu1"),
        helper.make_node("MatMul", ["r", "W2"], ["y"], name="fc2"),
    ]
    return save_model(
        path,
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 3])],
        [numpy_helper.from_array(w, name) for name, w in weights.items()],
    )


def two_input_model(path):
    """a ["N", 3] + b ["N", 3] -> y: several inputs, so input_name must choose one."""
    return save_model(
        path,
        [helper.make_node("Add", ["a", "b"], ["y"])],
        [
            helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", 3]),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, ["N", 3]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])],
    )


def sequence_model(path):
    """ids ["N", "T"] int64 -> Cast -> y: a free sequence axis and an integer dtype."""
    return save_model(
        path,
        [helper.make_node("Cast", ["ids"], ["y"], to=TensorProto.FLOAT)],
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ["N", "T"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", "T"])],
    )


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("calibration")
    return SimpleNamespace(
        conv=conv_model(d / "conv.onnx"),
        mlp=mlp_model(d / "mlp.onnx"),
        fixed=mlp_model(d / "fixed.onnx", batch=1),
        two=two_input_model(d / "two.onnx"),
        seq=sequence_model(d / "seq.onnx"),
        image=conv_model(d / "image.onnx", size=32, pool=True),
        dir=d,
    )


def images(n, seed=0):
    return np.random.default_rng(seed).standard_normal((n, 1, 4, 4)).astype(np.float32)


def drain(reader):
    batches = []
    while (feed := reader.get_next()) is not None:
        batches.append(feed)
    return batches


def error(match_all, call, *args, **kwargs):
    """Run call, expect CalibrationError, check every fragment appears (literally) in the message."""
    with pytest.raises(CalibrationError) as info:
        call(*args, **kwargs)
    message = str(info.value)
    for fragment in match_all:
        assert fragment in message, f"{fragment!r} not in: {message}"
    return info.value


# --------------------------------------------------------------------------------------------
# The protocol
# --------------------------------------------------------------------------------------------
def test_is_a_calibration_data_reader(models):
    reader = ArrayReader(images(3), models.conv)
    assert isinstance(reader, CalibrationDataReader)
    assert issubclass(CalibrationError, ValueError)


def test_batches_then_none(models):
    x = images(10)
    reader = ArrayReader(x, models.conv, batch_size=4)
    assert len(reader) == 10 and reader.num_batches == 3
    batches = drain(reader)
    assert [list(b) for b in batches] == [["input"]] * 3
    assert [b["input"].shape for b in batches] == [(4, 1, 4, 4), (4, 1, 4, 4), (2, 1, 4, 4)]
    assert all(b["input"].dtype == np.float32 for b in batches)
    np.testing.assert_array_equal(np.concatenate([b["input"] for b in batches]), x)
    assert reader.get_next() is None and reader.get_next() is None  # stays exhausted


def test_batch_size_one_feeds_each_sample(models):
    x = images(5)
    reader = ArrayReader(x, models.conv)
    batches = drain(reader)
    assert len(reader) == 5 and reader.num_batches == 5 and len(batches) == 5
    for i, b in enumerate(batches):
        np.testing.assert_array_equal(b["input"], x[i : i + 1])


def test_rewind_replays_identical_data(models):
    reader = ArrayReader(images(7), models.conv, batch_size=3)
    first = drain(reader)
    assert reader.get_next() is None
    reader.rewind()
    second = drain(reader)
    assert len(first) == len(second) == 3
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a["input"], b["input"])
    reader.rewind()
    assert len(list(reader)) == 3  # the base class's iterator protocol works too


def test_reader_keeps_its_own_copy(models):
    x = images(4)
    reader = ArrayReader(x, models.conv)
    x[:] = np.nan  # editing the caller's array after validation cannot un-validate the reader
    assert all(np.isfinite(b["input"]).all() for b in drain(reader))


def test_model_path_str_path_and_proto_agree(models):
    x = images(6)
    feeds = [
        drain(ArrayReader(x, m, batch_size=4))
        for m in (models.conv, str(models.conv), onnx.load(str(models.conv)))
    ]
    for other in feeds[1:]:
        for a, b in zip(feeds[0], other, strict=True):
            np.testing.assert_array_equal(a["input"], b["input"])
    assert ArrayReader(x, models.conv).model_path == models.conv


def test_list_of_samples_matches_stacked_array(models):
    x = images(9)
    stacked = ArrayReader(x, models.conv, batch_size=4)
    listed = ArrayReader(list(x), models.conv, batch_size=4)
    assert len(stacked) == len(listed) == 9 and stacked.num_batches == listed.num_batches == 3
    assert listed.sample_shape == stacked.sample_shape == (1, 4, 4)
    for a, b in zip(drain(stacked), drain(listed), strict=True):
        assert a["input"].shape == b["input"].shape
        np.testing.assert_array_equal(a["input"], b["input"])


def test_two_feature_mlp_samples(models):
    x = np.random.default_rng(2).standard_normal((5, 2)).astype(np.float32)
    batches = drain(ArrayReader(x, models.mlp, batch_size=2))
    assert [b["x"].shape for b in batches] == [(2, 2), (2, 2), (1, 2)]


def test_free_dims_may_differ_between_batches_but_not_within(models):
    seqs = [np.arange(n, dtype=np.int64) for n in (3, 5, 2)]
    batches = drain(ArrayReader(seqs, models.seq))
    assert [b["ids"].shape for b in batches] == [(1, 3), (1, 5), (1, 2)]
    err = error(
        ["Calibration sample 1 of 3", "shape (5,)", "sample 0", "shape (3,)", "batch_size=1"],
        ArrayReader,
        seqs,
        models.seq,
        batch_size=2,
    )
    assert err.sample == 1


def test_set_range_feeds_a_slice(models):
    x = images(10)
    reader = ArrayReader(x, models.conv, batch_size=4)
    reader.set_range(start_index=5, end_index=10)
    batches = drain(reader)
    assert [b["input"].shape[0] for b in batches] == [4, 1]
    np.testing.assert_array_equal(np.concatenate([b["input"] for b in batches]), x[5:])
    reader.rewind()
    assert sum(b["input"].shape[0] for b in drain(reader)) == 10


# --------------------------------------------------------------------------------------------
# Failure modes: each message names the sample, what was expected and what was found
# --------------------------------------------------------------------------------------------
def test_wrong_dtype_array(models):
    err = error(
        [
            "Calibration sample 0 of 10 has dtype float64",
            "the model's input 'input' expects float32",
            "Convert with samples.astype(np.float32).",
        ],
        ArrayReader,
        images(10).astype(np.float64),
        models.conv,
    )
    assert (err.sample, err.expected, err.found) == (0, np.float32, np.float64)


def test_wrong_dtype_in_a_list_names_the_first_bad_sample(models):
    samples = list(images(6))
    samples[3] = samples[3].astype(np.float64)
    samples[5] = samples[5].astype(np.float16)
    err = error(
        ["Calibration sample 3 of 6 has dtype float64", "expects float32", "dtype=np.float32"],
        ArrayReader,
        samples,
        models.conv,
    )
    assert err.sample == 3


def test_raw_uint8_pixels_get_the_preprocessing_hint(models):
    raw = np.zeros((4, 1, 4, 4), dtype=np.uint8)
    error(["has dtype uint8", "expects float32", "production preprocessing"], ArrayReader, raw, models.conv)


def test_integer_model_rejects_floats(models):
    error(
        ["sample 0 of 2 has dtype float32", "input 'ids' expects int64", "astype(np.int64)"],
        ArrayReader,
        np.zeros((2, 5), np.float32),
        models.seq,
    )


def test_wrong_rank_missing_channel_axis(models):
    x = images(5)[:, 0]  # (5, 4, 4): the channel axis was dropped
    err = error(
        [
            "Calibration sample 0 of 5 has shape (4, 4) (rank 2)",
            "a batch of it has rank 3",
            "expects rank 4: (N, 1, 4, 4), i.e. samples of shape (1, 4, 4)",
            "np.expand_dims(samples, 1)",
        ],
        ArrayReader,
        x,
        models.conv,
    )
    assert err.found == (4, 4) and err.expected == ("N", 1, 4, 4)


def test_wrong_rank_each_sample_carries_a_batch_axis(models):
    samples = [s[None] for s in images(3)]  # three (1, 1, 4, 4) arrays
    error(
        [
            "Calibration sample 0 of 3 has shape (1, 1, 4, 4) (rank 4)",
            "expects rank 4",
            "np.concatenate(samples)",
        ],
        ArrayReader,
        samples,
        models.conv,
    )


def test_wrong_fixed_dim(models):
    x = images(8)[:, :, :3]  # (8, 1, 3, 4)
    err = error(
        [
            "Calibration sample 0 of 8 has shape (1, 3, 4)",
            "the model's input 'input' expects (N, 1, 4, 4)",
            "axis 1 of the sample is 3, not 4",
        ],
        ArrayReader,
        x,
        models.conv,
    )
    assert err.sample == 0 and err.found == (1, 3, 4)


def test_wrong_fixed_dim_in_a_list_names_the_sample(models):
    samples = list(images(5))
    samples[2] = np.zeros((1, 4, 5), np.float32)
    error(
        ["Calibration sample 2 of 5 has shape (1, 4, 5)", "expects (N, 1, 4, 4)"],
        ArrayReader,
        samples,
        models.conv,
    )


@pytest.mark.parametrize("bad, word", [(np.nan, "NaN"), (np.inf, "inf"), (-np.inf, "inf")])
def test_non_finite_names_the_sample(models, bad, word):
    x = images(10)
    x[7, 0, 2, 3] = bad
    err = error(
        [
            "The calibration set holds NaN or inf in 1 of its 10 samples",
            f"the first is sample 7, with {word} in 1 of its 16 values (the first at index (0, 2, 3))",
            "the model's input 'input' expects finite values",
            "drop those samples",
        ],
        ArrayReader,
        x,
        models.conv,
    )
    assert (err.sample, err.expected, err.found) == (7, "finite values", word)


def test_non_finite_reports_the_first_bad_sample(models):
    x = images(10)
    x[8, 0, 0, 0] = np.inf
    x[3, 0, 1, 1] = np.nan
    err = error(
        ["NaN or inf in 2 of its 10 samples; the first is sample 3, with NaN"], ArrayReader, x, models.conv
    )
    assert err.sample == 3
    samples = list(x)
    error(["Calibration sample 3 of 10 contains NaN"], ArrayReader, samples, models.conv)


@pytest.mark.parametrize("samples", [np.zeros((0, 1, 4, 4), np.float32), []], ids=["array", "list"])
def test_empty_set(models, samples):
    error(
        ["calibration set is empty (0 samples)", "needs samples", "100-500 representative"],
        ArrayReader,
        samples,
        models.conv,
    )


@pytest.mark.parametrize("batch_size", [0, -3, 1.5, "4", True, None])
def test_bad_batch_size(models, batch_size):
    error(
        ["batch_size must be an int >= 1", f"got {batch_size!r}"],
        ArrayReader,
        images(4),
        models.conv,
        batch_size=batch_size,
    )


def test_unknown_input_name(models):
    err = error(
        ["no input named 'pixels'", "its inputs are 'a', 'b'"],
        ArrayReader,
        np.zeros((2, 3), np.float32),
        models.two,
        input_name="pixels",
    )
    assert err.found == "pixels" and err.expected == ["a", "b"]


def test_multi_input_model_needs_input_name(models):
    x = np.ones((2, 3), np.float32)
    error(["has 2 inputs ('a', 'b')", "input_name"], ArrayReader, x, models.two)
    batches = drain(ArrayReader(x, models.two, input_name="b"))
    assert [list(b) for b in batches] == [["b"], ["b"]]
    error(["input 'b' expects (N, 3)"], ArrayReader, np.ones((2, 4), np.float32), models.two, input_name="b")


def test_initializers_are_not_inputs(models):
    proto = onnx.load(str(models.mlp))
    proto.graph.input.append(helper.make_tensor_value_info("W", TensorProto.FLOAT, [2, 16]))  # IR<4 style
    assert ArrayReader(np.zeros((1, 2), np.float32), proto).input_name == "x"


def test_fixed_batch_dimension(models):
    x = np.zeros((4, 2), np.float32)
    assert len(drain(ArrayReader(x, models.fixed))) == 4
    error(
        ["fixed batch dimension of 1", "batch_size=2", "Use batch_size=1"],
        ArrayReader,
        x,
        models.fixed,
        batch_size=2,
    )


def test_bad_model_argument(models, tmp_path):
    error(["No ONNX model at", "missing.onnx"], ArrayReader, images(2), tmp_path / "missing.onnx")
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\xff not an onnx file")
    error(["Could not read", "junk.onnx"], ArrayReader, images(2), junk)
    error(["model must be the path", "got int"], ArrayReader, images(2), 42)


def test_bad_samples_argument(models):
    error(
        ["samples must be a numpy array", "got generator"], ArrayReader, (s for s in images(2)), models.conv
    )


# --------------------------------------------------------------------------------------------
# The spec and the check on their own (what ArrayReader is built from)
# --------------------------------------------------------------------------------------------
def test_input_spec_reads_name_dtype_and_symbolic_dims(models):
    conv = _input_spec(models.conv)
    assert conv == InputSpec("input", np.dtype(np.float32), ("N", 1, 4, 4))
    assert conv.sample_shape == (1, 4, 4) and conv.fixed_batch is None
    assert conv.describe() == "(N, 1, 4, 4), i.e. samples of shape (1, 4, 4)"
    assert _input_spec(models.seq) == InputSpec("ids", np.dtype(np.int64), ("N", "T"))
    assert _input_spec(models.fixed).fixed_batch == 1
    assert _input_spec(str(models.two), "b").name == "b"
    error(["has 2 inputs ('a', 'b')"], _input_spec, models.two)
    assert ArrayReader(images(2), models.conv).spec == conv


def test_check_samples_returns_a_read_only_copy(models):
    spec = _input_spec(models.conv)
    x = images(3)
    checked = _check_samples(x, spec)
    np.testing.assert_array_equal(checked, x)
    assert checked is not x and not checked.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        checked[0, 0, 0, 0] = 1.0
    seqs = _check_samples([np.arange(n, dtype=np.int64) for n in (3, 5)], _input_spec(models.seq))
    assert [s.shape for s in seqs] == [(3,), (5,)] and not any(s.flags.writeable for s in seqs)


def test_one_sample_is_checked_by_the_one_input_check_and_named_by_its_index():
    spec = InputSpec("input", np.dtype(np.float32), ("N", 1, 4, 4))
    check_array(np.zeros((1, 4, 4), np.float32), spec, what="Calibration sample 41 of 200", batched=False)
    err = error(
        [
            "Calibration sample 41 of 200 has dtype float64",
            "the model's input 'input' expects float32",
            "[np.asarray(s, dtype=np.float32) for s in samples]",
        ],
        check_array,
        np.zeros((1, 4, 4)),
        spec,
        what="Calibration sample 41 of 200",
        batched=False,
        name="samples",
        listed=True,
        sample=41,
    )
    assert (err.sample, err.expected, err.found) == (41, np.float32, np.float64)
    assert CalibrationError is InputError  # one error for every bad input, under its old name too
    unknown = InputSpec("x", np.dtype(np.float32), None)  # no declared rank: any shape is accepted
    check_array(np.zeros((7, 2, 9), np.float32), unknown, batched=False)
    assert unknown.describe() == "a tensor of unknown shape" and unknown.fixed_batch is None


# --------------------------------------------------------------------------------------------
# With onnxruntime's quantizer
# --------------------------------------------------------------------------------------------
def test_quantize_static_end_to_end(models, tmp_path):
    rng = np.random.default_rng(3)
    calib = rng.standard_normal((64, 2)).astype(np.float32)
    reader = ArrayReader(calib, models.mlp, batch_size=16)
    out = tmp_path / "mlp.qdq.onnx"
    quantize_static(models.mlp, out, reader, quant_format=QuantFormat.QDQ)
    ops = {n.op_type for n in onnx.load(str(out)).graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} <= ops

    x = rng.standard_normal((32, 2)).astype(np.float32)
    fp32 = ort.InferenceSession(str(models.mlp), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    int8 = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert int8.shape == fp32.shape
    tolerance = 0.05 * np.abs(fp32).max()  # a few INT8 steps of the output's range
    assert np.abs(int8 - fp32).max() < tolerance

    reader.rewind()  # the same reader calibrates again after a rewind
    quantize_static(models.mlp, tmp_path / "again.onnx", reader, quant_format=QuantFormat.QDQ)
    again = ort.InferenceSession(str(tmp_path / "again.onnx"), providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(again.run(None, {"x": x})[0], int8)


# --------------------------------------------------------------------------------------------
# DatasetReader: Fashion-MNIST through the production preprocessing
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def calibration_images():
    data.find_fashion_mnist(download=False)  # fail clearly, without a download, if it is missing
    return data.load_split("calibration")[0]


def test_dataset_reader_feeds_the_production_preprocessing(models, calibration_images):
    reader = DatasetReader(models.image, count=20)
    assert (reader.split, reader.count, reader.transform_name) == ("calibration", 20, "preprocess")
    assert len(reader) == 20 and reader.num_batches == 20
    batches = drain(reader)
    assert len(batches) == 20
    assert all(b["input"].shape == (1, 1, 32, 32) and b["input"].dtype == np.float32 for b in batches)
    expected = data.preprocess(calibration_images[:20])
    np.testing.assert_array_equal(np.concatenate([b["input"] for b in batches]), expected)


def test_dataset_reader_seed_is_reproducible_and_different(models, calibration_images):
    a = DatasetReader(models.image, count=20, seed=1, batch_size=8)
    b = DatasetReader(models.image, count=20, seed=1, batch_size=8)
    c = DatasetReader(models.image, count=20, seed=2, batch_size=8)
    assert a.num_batches == 3
    assert len(set(a.indices.tolist())) == 20
    np.testing.assert_array_equal(a.indices, b.indices)
    assert not np.array_equal(a.indices, c.indices)
    assert not np.array_equal(a.indices, np.arange(20))
    xa = np.concatenate([f["input"] for f in drain(a)])
    np.testing.assert_array_equal(xa, np.concatenate([f["input"] for f in drain(b)]))
    np.testing.assert_array_equal(xa, data.preprocess(calibration_images[a.indices]))


def test_dataset_reader_count_checks(models, calibration_images):
    n = len(calibration_images)
    err = error(
        [f"count={n + 1}", f"'calibration' split holds ({n})", f"count <= {n}"],
        DatasetReader,
        models.image,
        count=n + 1,
    )
    assert err.found == n + 1
    error(["count=0", "empty", "100-500"], DatasetReader, models.image, count=0)
    error(["Unknown split 'holdout'", "calibration"], DatasetReader, models.image, split="holdout")


def unpadded(images):
    """A wrong transform: scaled but not padded to 32x32."""
    return (images.astype(np.float32) / 255.0)[:, None]


def as_float64(images):
    """A wrong transform: the right pixels, the wrong dtype."""
    return data.preprocess(images).astype(np.float64)


def test_dataset_reader_wrong_transform_shape(models, calibration_images):
    err = error(
        [
            "Calibration sample 0 of 20 has shape (1, 28, 28)",
            "the model's input 'input' expects (N, 1, 32, 32)",
            "transform=unpadded",
            "course_lib.data.preprocess",
        ],
        DatasetReader,
        models.image,
        count=20,
        transform=unpadded,
    )
    assert err.sample == 0 and err.found == (1, 28, 28)


def test_dataset_reader_wrong_transform_dtype(models, calibration_images):
    error(
        ["Calibration sample 0 of 20 has dtype float64", "expects float32", "transform=as_float64"],
        DatasetReader,
        models.image,
        count=20,
        transform=as_float64,
    )


def test_dataset_reader_calibrates_the_image_model(models, calibration_images, tmp_path):
    reader = DatasetReader(models.image, count=32, batch_size=16)
    out = tmp_path / "image.qdq.onnx"
    quantize_static(models.image, out, reader, quant_format=QuantFormat.QDQ)
    x = data.preprocess(calibration_images[100:108])
    fp32 = ort.InferenceSession(str(models.image), providers=["CPUExecutionProvider"]).run(
        None, {"input": x}
    )[0]
    int8 = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    assert re.fullmatch(
        r"DatasetReader\(32 samples .*split='calibration', transform=preprocess\)", repr(reader)
    )
    assert np.abs(int8 - fp32).max() < 0.05 * np.abs(fp32).max() + 1e-3


# ------------------------------------------------------------------------ ranges and saturation
@pytest.fixture(scope="module")
def heavy_tailed(tmp_path_factory):
    """The MLP, samples whose hidden activations have a few extreme values, and their QDQ model."""
    d = tmp_path_factory.mktemp("ranges")
    model = mlp_model(d / "mlp.onnx")
    rng = np.random.default_rng(5)
    x = rng.standard_normal((400, 2)).astype(np.float32)
    x[:4] *= 40  # four outliers: MinMax must cover them, Percentile may clip them
    return SimpleNamespace(model=model, x=x, dir=d)


def test_each_method_picks_its_own_range_and_minmax_covers_every_value(heavy_tailed):
    from course_lib.calibration import activation_values, calibration_ranges, clipped_fraction

    reader = ArrayReader(heavy_tailed.x, heavy_tailed.model, batch_size=50)
    ranges = calibration_ranges(
        heavy_tailed.model, reader, extra_options={"CalibPercentile": 99.0, "num_bins": 2048}
    )
    assert {"x", "r", "y"} <= set(ranges)
    assert set(ranges["r"]) == {"MinMax", "Entropy", "Percentile"}
    values = activation_values(heavy_tailed.model, {"x": heavy_tailed.x}, ["r"])["r"]
    low, high = ranges["r"]["MinMax"]
    assert low == pytest.approx(min(0.0, values.min()), abs=1e-6)  # ranges always include 0
    assert high == pytest.approx(values.max(), rel=1e-6)
    assert clipped_fraction(values, low, high) == 0.0
    p_low, p_high = ranges["r"]["Percentile"]
    assert p_high < high  # the outliers are clipped ...
    assert 0 < clipped_fraction(values, p_low, p_high) < 0.05  # ... and only a few values with them
    assert len(reader) == 400 and reader.get_next() is not None  # rewound for the next user


def test_calibration_ranges_refuses_unknown_methods_and_readers_without_rewind(heavy_tailed):
    from course_lib.calibration import calibration_ranges

    reader = ArrayReader(heavy_tailed.x, heavy_tailed.model)
    with pytest.raises(ValueError, match="Unknown calibration method"):
        calibration_ranges(heavy_tailed.model, reader, methods=["KL"])

    class OneShot(CalibrationDataReader):
        def get_next(self):
            return None

    with pytest.raises(TypeError, match="rewind"):
        calibration_ranges(heavy_tailed.model, OneShot())


def test_activation_values_match_a_numpy_forward_pass(heavy_tailed):
    from course_lib.calibration import activation_values

    weights = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(heavy_tailed.model)).graph.initializer}
    got = activation_values(heavy_tailed.model, {"x": heavy_tailed.x[:10]}, ["r", "y"])
    relu = np.maximum(heavy_tailed.x[:10] @ weights["W"] + weights["B"], 0)
    np.testing.assert_allclose(got["r"], relu, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got["y"], relu @ weights["W2"], rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="No tensor named"):
        activation_values(heavy_tailed.model, {"x": heavy_tailed.x[:2]}, ["nope"])


def test_quantized_ranges_read_back_what_calibration_wrote_and_saturation_counts_clipping(heavy_tailed):
    from course_lib.calibration import activation_values, calibration_ranges, quantized_ranges, saturation

    qdq = heavy_tailed.dir / "qdq.onnx"
    calm = heavy_tailed.x[4:]  # calibrate without the outliers: a range too narrow for them
    quantize_static(
        heavy_tailed.model, qdq, ArrayReader(calm, heavy_tailed.model), quant_format=QuantFormat.QDQ
    )
    written = quantized_ranges(qdq)
    minmax = calibration_ranges(heavy_tailed.model, ArrayReader(calm, heavy_tailed.model), methods=["MinMax"])
    for name in ("x", "r"):
        low, high = written[name]
        m_low, m_high = minmax[name]["MinMax"]
        step = (high - low) / 256  # 255 steps between the levels + half a step beyond each end
        assert low <= m_low and high >= m_high  # every calibration value is stored without clipping
        assert m_low - low < step and high - m_high < step
    values = activation_values(heavy_tailed.model, {"x": heavy_tailed.x}, ["x", "r"])
    sat = saturation(written, values)
    assert set(sat) == {"x", "r"}
    assert sat["x"] == pytest.approx(
        np.mean((values["x"] < written["x"][0]) | (values["x"] > written["x"][1]))
    )
    calm_sat = saturation(written, activation_values(heavy_tailed.model, {"x": calm}, ["x"]))["x"]
    assert calm_sat == 0.0  # the calibration data itself never saturates
    outliers = np.abs(heavy_tailed.x[:4]) > np.abs(calm).max(axis=0)
    assert sat["x"] * values["x"].size == outliers.sum() > 0  # exactly the outlier values saturate
