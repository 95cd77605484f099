"""Lesson 04b's self-checks: each passes the right answer, and names each wrong one it recognises
without giving the answer away (under the tests, `result.wrong` raises if a message spells it)."""

from __future__ import annotations

import numpy as np
import pytest

from course_machinery import checks


# ---------------------------------------------------------------------------------------------------
# Exercise 1: where weak calibration's disagreements fall, by fp32's margin
# ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def margins():
    """fp32 logits on 1,000 rows whose margins rise with the row (the first 100 are the least sure
    tenth); 'weak' logits flip 15 rows inside that tenth and 5 outside (a share of 0.75, a rate of 0.15
    inside the tenth), 'production' logits 4 rows inside only (a share of 1.0)."""
    n = 1000
    gap = np.linspace(0.01, 5.0, n)
    ref = np.stack([gap, np.zeros(n)], axis=1)  # class 0, surer and surer

    def flipped(rows):
        out = ref.copy()
        out[rows] = out[rows][:, ::-1]
        return out

    weak = flipped([*range(0, 100, 7), *range(500, 1000, 100)])
    production = flipped([3, 30, 60, 90])
    return ref, weak, production


def test_check_low_margin_share_passes_the_share_and_reads_the_guess(margins):
    ref, weak, production = margins
    right = checks.check_low_margin_share(0.7, 0.75, ref, weak, production)
    assert right and "75% of weak calibration's 20 disagreements" in repr(right)
    assert "close to what you guessed" in repr(right) and "against 100% of the production choice's 4" in repr(
        right
    )
    far_off = checks.check_low_margin_share(0.1, 0.7501, ref, weak, production)
    assert far_off and "you guessed 10%" in repr(far_off)


def test_check_low_margin_share_names_each_wrong_answer_without_the_share(margins):
    ref, weak, production = margins
    waiting = checks.check_low_margin_share(None, None, ref, weak, production)
    assert not waiting and "answer_1_guess first" in repr(waiting)
    assert "No answer yet" in repr(checks.check_low_margin_share(0.5, None, ref, weak, production))
    assert "numbers between 0 and 1" in repr(
        checks.check_low_margin_share("half", 0.75, ref, weak, production)
    )
    assert "not a share" in repr(checks.check_low_margin_share(1.5, 0.75, ref, weak, production))
    never = checks.check_low_margin_share(0.5, 0.75, ref, ref, production)
    assert not never and "never disagree" in repr(never)
    cases = {
        75.0: "looks like a percentage",
        0.15: "the other way round",
        1.0: "production choice's share",
        0.25: "*outside* the least sure tenth",
        0.4: "divide the disagreements inside that tenth",
    }
    for answer, said in cases.items():
        result = checks.check_low_margin_share(0.5, answer, ref, weak, production)
        assert not result and said in repr(result), answer
        assert "75" not in result.message and "0.75" not in result.message


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
