"""Lesson 06's and 06b's self-checks: each passes the right answer, and on a wrong one teaches without
giving the answer away (result.wrong raises under the tests if a message spells the expected value).
Lesson 06c's checks, which need PyTorch, are tested in test_qat.py."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from course_machinery import checks

# ---------------------------------------------------------------------------------------------------
# Lesson 06, exercise 2: the activations' share of A8W8's drift
# ---------------------------------------------------------------------------------------------------
A8W8, A16W8 = SimpleNamespace(mean_abs_drift=0.015), SimpleNamespace(mean_abs_drift=0.006)  # share 0.6


def test_check_activation_share_passes_the_share_the_activations_cause():
    right = checks.check_activation_share(1 - 0.006 / 0.015, A8W8, A16W8)
    assert right and "About 60%" in repr(right)
    assert checks.check_activation_share(0.605, A8W8, A16W8)  # an estimate: within a hundredth


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (0.4, "the weights' share"),  # A16W8's drift over A8W8's: the part the weights cause
        (0.009, "a difference of mean drifts"),
        (60, "not in per cent"),
        (0.9, "compare the two files' mean_abs_drift"),
    ],
)
def test_check_activation_share_names_each_slip_without_the_answer(answer, hint):
    result = checks.check_activation_share(answer, A8W8, A16W8)
    assert not result and hint in repr(result) and "0.6" not in repr(result)


def test_check_activation_share_refuses_what_is_not_a_number():
    assert "No answer yet" in repr(checks.check_activation_share(None, A8W8, A16W8))
    assert "write a number" in repr(checks.check_activation_share("half", A8W8, A16W8))


# ---------------------------------------------------------------------------------------------------
# Lesson 06, exercise 3: the rule without the size target
# ---------------------------------------------------------------------------------------------------
def _row(option, speedup, floor=True, size=True, model="fashion_resnet18"):
    """One row of lesson 06's table, with the keys its rule and exercise 3 read."""
    return {
        "option": option,
        "speed": f"{speedup:.2f}x (0.90–1.10)" if speedup else "",
        "quality": "agreement 99.70%" if floor else "agreement 96.00%",
        "quality floor": "✔" if floor else "✘",
        "size target": "✔" if size else "✘",
        "of fp32": "0.25" if size else "0.57",
        "_model": model,
        "_speedup": speedup,
    }


# Lesson 04's file with two layers in float runs faster than lesson 03's file but keeps a large
# share of fp32's bytes; A16W8 meets both bars, slowly; QAT misses the floor; a row whose file is
# gone was not timed in turn.
ROWS = [
    _row("dynamic INT8, per-channel (lesson 02)", 1.8, model="text_encoder"),
    _row("A8W8: static U8S8 per-channel (lesson 03)", 1.43),
    _row("A16W8 (QUInt16 activations)", 0.21),
    _row("QOperator U8S8", 1.33),
    _row("per-channel, 2 layers in float", 1.82, size=False),
    _row("QAT (10 steps), 4-bit weights", 2.5, floor=False),  # faster than any, but misses the floor
    _row("QDQ S8S8", None),  # its file is gone: not ranked
]


def test_check_pick_without_size_target_wants_the_fastest_row_that_meets_the_floor():
    right = checks.check_pick_without_size_target("per-channel, 2 layers in float", ROWS, "fashion_resnet18")
    assert right and "A8W8: static U8S8 per-channel (lesson 03)" in repr(right)  # the pick with the target
    assert checks.check_pick_without_size_target(ROWS[4], ROWS, "fashion_resnet18")  # the row itself
    same = [r for r in ROWS if not r["option"].startswith("per-channel")]
    unchanged = checks.check_pick_without_size_target(
        "A8W8: static U8S8 per-channel (lesson 03)", same, "fashion_resnet18"
    )
    assert unchanged and "dropping it changes nothing" in repr(unchanged)


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        ("A8W8: static U8S8 per-channel (lesson 03)", "that is the pick with the size target"),
        ("QAT (10 steps), 4-bit weights", "misses the quality floor"),
        ("QDQ S8S8", "not timed in turn here"),
        ("QOperator U8S8", "another row that meets the floor runs faster"),
    ],
)
def test_check_pick_without_size_target_teaches_on_each_wrong_pick_without_naming_it(answer, hint):
    result = checks.check_pick_without_size_target(answer, ROWS, "fashion_resnet18")
    assert not result and hint in repr(result) and "2 layers in float" not in repr(result)


def test_check_pick_without_size_target_refuses_what_is_not_a_row_of_the_model():
    model = "fashion_resnet18"
    assert "No answer yet" in repr(checks.check_pick_without_size_target(None, ROWS, model))
    other = checks.check_pick_without_size_target("dynamic INT8, per-channel (lesson 02)", ROWS, model)
    assert not other and "is not an option of this model's rows" in repr(other)
    none = checks.check_pick_without_size_target("QAT (10 steps), 4-bit weights", ROWS[5:], model)
    assert not none and "the rule picks none" in repr(none)


# ---------------------------------------------------------------------------------------------------
# Lesson 06b, exercise 1: an asymmetric 4-bit weight decoded by hand
# ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def asymmetric():
    """A MatMul of K=64 by N=32 as ONNX Runtime's 4-bit quantizer writes it: blocks of 32, asymmetric."""
    from onnx import TensorProto, helper, numpy_helper
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    w = np.random.default_rng(0).normal(size=(64, 32)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"], name="proj")],
        "one_matmul",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 32])],
        [numpy_helper.from_array(w, "W")],
    )
    quantizer = MatMulNBitsQuantizer(helper.make_model(graph), bits=4, block_size=32, is_symmetric=False)
    quantizer.process()
    return quantizer.model.model.graph, w


def _decode(graph, zero_point=None):
    """The lesson's solution: codes, zero points (or the symmetric 8), scales."""
    import onnx

    from course_lib import integers

    node = next(n for n in graph.node if n.op_type == "MatMulNBits")
    stored = {t.name: onnx.numpy_helper.to_array(t) for t in graph.initializer}
    packed, scales, zps = (stored[name] for name in node.input[1:4])
    N, blocks, block, K = 32, 2, 32, 64
    codes = integers.unpack_int4(packed, N * blocks * block, signed=False).reshape(N, blocks, block)
    zp = np.stack([integers.unpack_int4(row, blocks, signed=False) for row in zps.reshape(N, -1)])
    zp = np.full_like(zp, zero_point) if zero_point is not None else zp
    return ((codes - zp[..., None].astype(np.float32)) * scales.reshape(N, blocks, 1)).reshape(N, -1)[:, :K].T


def test_check_asymmetric_decode_passes_the_decoded_weight_and_compares_the_guess(asymmetric):
    graph, w = asymmetric
    right = checks.check_asymmetric_decode("none", _decode(graph), graph, w)
    assert right and "as you predicted" in repr(right) and "own minimum and maximum" in repr(right)
    other = checks.check_asymmetric_decode("some", _decode(graph), graph, w)
    assert other and "you predicted some" in repr(other)  # the decoding is right; the guess is named


def test_check_asymmetric_decode_names_each_slip(asymmetric):
    graph, w = asymmetric
    eight = checks.check_asymmetric_decode("none", _decode(graph, zero_point=8), graph, w)
    assert not eight and "you subtracted 8" in repr(eight)
    flipped = checks.check_asymmetric_decode("none", _decode(graph).T, graph, w)
    assert not flipped and "transposed" in repr(flipped)
    off = checks.check_asymmetric_decode("none", _decode(graph) + 0.01, graph, w)
    assert not off and "values differ from the file's" in repr(off)
    assert "Write your guess" in repr(checks.check_asymmetric_decode(None, _decode(graph), graph, w))
    assert "No answer yet" in repr(checks.check_asymmetric_decode("none", None, graph, w))
    assert "one word" in repr(checks.check_asymmetric_decode("maybe", _decode(graph), graph, w))
