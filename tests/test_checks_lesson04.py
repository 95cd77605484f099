"""Lesson 04's and 04b's self-checks: each passes the right answer and teaches on each wrong one it recognises.

The older lesson 04 checks (failing variants, capstone) are tested in tests/test_checks.py."""

from __future__ import annotations

import math

import numpy as np
import pytest

from course_lib import checks, measure
from course_lib.checks.lesson04b import CALIBRATION_FAULTS

# ---------------------------------------------------------------------------------------------------
# Exercise 1: the paired interval by hand
# ---------------------------------------------------------------------------------------------------


def _parity(only_reference: int, only_candidate: int, n: int = 10_000, both_wrong: int = 800):
    """A parity on n labelled rows: `only_reference` rows only the reference gets right, `only_candidate`
    only the candidate, `both_wrong` both wrong with the same answer, the rest both right."""
    labels = np.zeros(n, dtype=int)
    ref, cand = np.zeros((n, 3)), np.zeros((n, 3))
    ref[:, 0] = cand[:, 0] = 1.0  # both right
    rows = np.arange(n)
    a, b, c = only_reference, only_reference + only_candidate, only_reference + only_candidate + both_wrong
    cand[rows[:a], 0], cand[rows[:a], 1] = 0.0, 1.0  # only the reference right
    ref[rows[a:b], 0], ref[rows[a:b], 2] = 0.0, 1.0  # only the candidate right
    ref[rows[b:c], 0], ref[rows[b:c], 1] = 0.0, 1.0  # both wrong, the same answer
    cand[rows[b:c], 0], cand[rows[b:c], 1] = 0.0, 1.0
    return measure.parity(ref, cand, labels)


def _paired(b: int, c: int, n: int, z: float = 1.96) -> tuple[float, float]:
    change, se = (c - b) / n, math.sqrt(b + c - (c - b) ** 2 / n) / n
    return 100 * (change - z * se), 100 * (change + z * se)


NOISE = _parity(17, 21)  # per-tensor on the VNNI run: 17 broken, 21 fixed
REAL = _parity(400, 148)  # weak calibration: a real loss


def test_check_paired_interval_passes_the_right_interval_and_reading():
    right = checks.check_paired_interval(_paired(17, 21, 10_000), True, NOISE)
    assert right and "within the noise" in repr(right) and "Only 38 of the 10,000 images" in repr(right)
    assert right.message.startswith("Right: -0.08 to +0.16 points")
    assert checks.check_paired_interval(NOISE.accuracy_change_interval(), True, NOISE)  # the library's
    loss = checks.check_paired_interval(_paired(400, 148, 10_000), False, REAL)
    assert loss and "a real loss" in repr(loss)
    low, high = _paired(17, 21, 10_000)
    assert checks.check_paired_interval([high, low], True, NOISE)  # either order, a list


def test_check_paired_interval_names_each_slip():
    assert "No answer yet" in repr(checks.check_paired_interval(None, None, NOISE))
    assert "two numbers" in repr(checks.check_paired_interval(0.1, True, NOISE))
    low, high = _paired(17, 21, 10_000)
    fractions = checks.check_paired_interval((low / 100, high / 100), True, NOISE)
    assert not fractions and "multiply by 100" in repr(fractions)
    flipped = checks.check_paired_interval((-high, -low), True, NOISE)
    assert not flipped and "other way round" in repr(flipped) and "c = 21" in repr(flipped)
    one_se = checks.check_paired_interval(_paired(17, 21, 10_000, z=1.0), True, NOISE)
    assert not one_se and "1.96 standard errors" in repr(one_se)
    pa, pb = NOISE.candidate_accuracy, NOISE.reference_accuracy
    half = 196 * math.sqrt((pa * (1 - pa) + pb * (1 - pb)) / 10_000)
    centre = 100 * (pa - pb)
    unpaired = checks.check_paired_interval((centre - half, centre + half), True, NOISE)
    assert not unpaired and "unpaired interval" in repr(unpaired) and "b + c images" in repr(unpaired)
    other = checks.check_paired_interval((-1.0, 1.0), True, NOISE)
    assert not other and "(c - b)/n" in repr(other)


def test_check_paired_interval_wants_the_right_reading():
    interval = _paired(17, 21, 10_000)
    assert "Now answer_1_noise" in repr(checks.check_paired_interval(interval, None, NOISE))
    wrong = checks.check_paired_interval(interval, False, NOISE)
    assert not wrong and "contains 0" in repr(wrong)
    real = checks.check_paired_interval(_paired(400, 148, 10_000), True, REAL)
    assert not real and "wholly on one side of 0" in repr(real)


# ---------------------------------------------------------------------------------------------------
# 04b, exercise 1: which fault broke the weak calibration
# ---------------------------------------------------------------------------------------------------
MEAN, STD = 0.286, 0.353  # about Fashion-MNIST's, as the course's preprocessing fits them


def _images(n: int, rng) -> np.ndarray:
    """Raw uint8 'images' (n, 1, 8, 8) with black and white pixels in each, like Fashion-MNIST's."""
    images = rng.integers(0, 256, size=(n, 1, 8, 8)).astype(np.uint8)
    images[:, 0, 0, 0], images[:, 0, 0, 1] = 0, 255
    return images


def _production(images):
    return ((images / 255 - MEAN) / STD).astype(np.float32)


def _half_normalised(images):
    return ((images / 255 - 0.5) / 0.5).astype(np.float32)


@pytest.fixture(scope="module")
def tiny_cnn(tmp_path_factory):
    """A small Conv -> Relu -> GlobalAveragePool -> Gemm classifier with input 'input' (N, 1, 8, 8):
    (fp32 path, production inputs, labels = the fp32 model's own answers, its logits, a folder)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = rng.normal(0, 0.5, size=(8, 1, 3, 3)).astype(np.float32)
    g = rng.normal(0, 1.0, size=(8, 4)).astype(np.float32)
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["input", "w"], ["conv"], pads=[1, 1, 1, 1]),
            helper.make_node("Relu", ["conv"], ["relu"]),
            helper.make_node("GlobalAveragePool", ["relu"], ["pool"]),
            helper.make_node("Flatten", ["pool"], ["flat"]),
            helper.make_node("Gemm", ["flat", "g"], ["logits"]),
        ],
        "tiny",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 1, 8, 8])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 4])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(g, "g")],
    )
    folder = tmp_path_factory.mktemp("calibration_cause")
    path = folder / "tiny.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    x = _production(_images(4000, rng))
    ref = measure.logits(path, x, threads=1)
    top = np.sort(ref, axis=1)
    sure = top[:, -1] - top[:, -2] > 0.1  # no near-ties: rounding alone must not flip a decision
    x, ref = x[sure], ref[sure]
    return path, x, ref.argmax(1), ref, folder, rng


def _quantize(fp32, out, x):
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

    from course_lib import ArrayReader, u8s8_can_saturate

    quantize_static(
        fp32,
        out,
        ArrayReader(x, fp32, batch_size=len(x)),
        quant_format=QuantFormat.QDQ,
        activation_type=QuantType.QUInt8,
        weight_type=QuantType.QInt8,
        per_channel=True,
        reduce_range=u8s8_can_saturate(),  # as the lessons do: without VNNI full-range weights saturate
    )
    return out


def test_check_calibration_cause_measures_the_file_and_answers_each_guess(tiny_cnn):
    fp32, x, labels, ref, folder, rng = tiny_cnn
    ten = _quantize(fp32, folder / "ten.onnx", _production(_images(10, rng)))
    right = checks.check_calibration_cause("the normalisation", ten, ref, x, labels)
    assert right and "pass the acceptance rule" in repr(right) and "You predicted it." in repr(right)
    assert "maps above 1 is clipped" in repr(right) and "first-layer SQNR of section 3" in repr(right)
    count = checks.check_calibration_cause("The 10 images ", ten, ref, x, labels)  # case and spaces forgiven
    assert count and "You blamed the count: a common guess, and here a wrong one." in repr(count)
    both = checks.check_calibration_cause("both", ten, ref, x, labels)
    assert both and "the normalisation alone is enough" in repr(both)


def test_check_calibration_cause_reports_a_count_that_fails(tiny_cnn):
    fp32, x, labels, ref, folder, _ = tiny_cnn
    # The input's full range, but nothing else: every activation range far too narrow.
    flat = np.full((10, 1, 8, 8), _production(np.uint8(0)), dtype=np.float32)
    flat[:, 0, 0, 0] = _production(np.uint8(255))
    narrow = _quantize(fp32, folder / "narrow.onnx", flat)
    failing = checks.check_calibration_cause("both", narrow, ref, x, labels)
    assert (
        failing and "still fail here" in repr(failing) and "this run shows the count matters" in repr(failing)
    )
    only_norm = checks.check_calibration_cause("the normalisation", narrow, ref, x, labels)
    assert "the count fails it here as well" in repr(only_norm)


def test_check_calibration_cause_names_each_wrong_answer(tiny_cnn):
    from onnxruntime.quantization import quantize_dynamic

    fp32, x, labels, ref, folder, rng = tiny_cnn
    none_yet = checks.check_calibration_cause(None, None, ref, x, labels)
    assert not none_yet and "No answer yet" in repr(none_yet) and "answer_1_guess first" in repr(none_yet)
    odd = checks.check_calibration_cause("the weights", None, ref, x, labels)
    assert not odd and all(repr(f) in repr(odd) for f in CALIBRATION_FAULTS)
    now = checks.check_calibration_cause("both", None, ref, x, labels)
    assert "Now measure" in repr(now) and "answer_1 to the file's path" in repr(now)
    missing = checks.check_calibration_cause("both", folder / "missing.onnx", ref, x, labels)
    assert not missing and "Found no file" in repr(missing)
    unquantized = checks.check_calibration_cause("both", fp32, ref, x, labels)
    assert not unquantized and "not static QDQ" in repr(unquantized)
    dynamic = folder / "dynamic.onnx"
    quantize_dynamic(fp32, dynamic)
    assert "not static QDQ" in repr(checks.check_calibration_cause("both", dynamic, ref, x, labels))
    half = _quantize(fp32, folder / "half.onnx", _half_normalised(_images(10, rng)))
    wrong = checks.check_calibration_cause("the normalisation", half, ref, x, labels)
    assert not wrong and "[-1.00, 1.00]" in repr(wrong) and "not half_normalised" in repr(wrong)


# ---------------------------------------------------------------------------------------------------
# Exercise 3 (capstone): the learner is told which answer to set
# ---------------------------------------------------------------------------------------------------
def test_check_capstone_asks_for_the_capstones_own_answer(tmp_path):
    waiting = checks.check_capstone(None, tmp_path / "fp32.onnx", np.zeros((1, 4)), np.zeros(1))
    assert not waiting and "set answer_3 to the path" in repr(waiting)


# ---------------------------------------------------------------------------------------------------
# 04b, exercise 2: calibrate the two-input MLP for the edges
# ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def two_input_mlp(tmp_path_factory):
    """A 2 -> 16 -> 2 MLP (input 'input'), training points in [-1, 1]², edge points out to ±3, and a grid to
    ±3 with the mask of its points inside the training range: (fp32 path, train, edge, grid, inside, folder)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w1, b1 = rng.normal(0, 1, (2, 16)).astype(np.float32), rng.normal(0, 0.1, 16).astype(np.float32)
    w2 = rng.normal(0, 1, (16, 2)).astype(np.float32)
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["input", "w1"], ["h"]),
            helper.make_node("Add", ["h", "b1"], ["hb"]),
            helper.make_node("Relu", ["hb"], ["r"]),
            helper.make_node("MatMul", ["r", "w2"], ["logits"]),
        ],
        "two_input_mlp",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 2])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 2])],
        [
            numpy_helper.from_array(w1, "w1"),
            numpy_helper.from_array(b1, "b1"),
            numpy_helper.from_array(w2, "w2"),
        ],
    )
    folder = tmp_path_factory.mktemp("edge_calibration")
    path = folder / "mlp.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    train = rng.uniform(-1, 1, (500, 2)).astype(np.float32)
    edge = rng.uniform(-3, 3, (200, 2)).astype(np.float32)
    xs, ys = np.meshgrid(np.linspace(-3, 3, 41), np.linspace(-3, 3, 41))
    grid = np.c_[xs.ravel(), ys.ravel()].astype(np.float32)
    return path, train, edge, grid, np.all(np.abs(grid) <= 1, axis=1), folder


def _static(fp32, out, x):
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

    from course_lib import ArrayReader

    qdq = dict(quant_format=QuantFormat.QDQ, activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    quantize_static(fp32, out, ArrayReader(x, fp32, batch_size=100), **qdq)
    return out


def test_check_edge_calibration_passes_a_file_calibrated_on_the_edges_too(two_input_mlp):
    fp32, train, edge, grid, inside, folder = two_input_mlp
    lesson = _static(fp32, folder / "train.onnx", train)
    wider = _static(fp32, folder / "wider.onnx", np.vstack([train, edge]))
    right = checks.check_edge_calibration(wider, fp32, lesson, grid, inside)
    assert (
        right
        and "Calibrated on the edge set too" in repr(right)
        and "outside the training range" in repr(right)
    )
    assert "256 levels now cover a wider range, each step coarser" in repr(right)


def test_check_edge_calibration_names_each_wrong_answer(two_input_mlp):
    from onnxruntime.quantization import quantize_dynamic

    fp32, train, _, grid, inside, folder = two_input_mlp
    lesson = _static(fp32, folder / "train_again.onnx", train)
    assert "No answer yet: set answer_2" in repr(
        checks.check_edge_calibration(None, fp32, lesson, grid, inside)
    )
    assert "Found no file" in repr(
        checks.check_edge_calibration(folder / "nothing.onnx", fp32, lesson, grid, inside)
    )
    assert "not static QDQ" in repr(checks.check_edge_calibration(fp32, fp32, lesson, grid, inside))
    dynamic = folder / "dynamic.onnx"
    quantize_dynamic(fp32, dynamic)
    assert "not static QDQ" in repr(checks.check_edge_calibration(dynamic, fp32, lesson, grid, inside))
    same = checks.check_edge_calibration(
        _static(fp32, folder / "same.onnx", train), fp32, lesson, grid, inside
    )
    assert not same and "Not yet" in repr(same) and "np.vstack" in repr(same)
