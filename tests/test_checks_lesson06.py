"""Lesson 06's self-checks: each passes the right answer and teaches on the wrong ones it knows."""

from __future__ import annotations

import numpy as np
from test_checks import _dq_conv_without_output_q

from course_lib import checks, measure


def _parity(n: int, disagree: int, wrong: int, reference_wrong: int = 0):
    """A parity over n rows of 3 classes: the candidate changes `disagree` top-1 answers, `wrong` of
    them away from the label; the reference is wrong on `reference_wrong` other rows."""
    labels = np.zeros(n, dtype=int)
    reference = np.tile([3.0, 1.0, 0.0], (n, 1))
    reference[n - reference_wrong :] = [1.0, 3.0, 0.0]
    candidate = reference.copy()
    candidate[:disagree] = [1.0, 3.0, 0.0]  # rows 0..disagree-1 now say class 1
    assert disagree == wrong
    return measure.parity(reference, candidate, labels)


PARITIES = {
    "A8W8": _parity(2000, 1, 1),  # 0.05 points lost, 99.95 % agreement: passes
    "A16W8": _parity(2000, 3, 3),  # passes: slow is not a quality failure
    "PTQ": _parity(2000, 500, 500),  # 25 points lost
    "QAT": _parity(2000, 80, 80),  # 4 points lost, 96 % agreement: most of PTQ's loss won back, still fails
}


def test_check_ship_verdicts_passes_the_right_set():
    right = checks.check_ship_verdicts({"A8W8", "A16W8"}, PARITIES)
    assert right and "A16W8, A8W8" in repr(right)
    assert checks.check_ship_verdicts(["A16W8", "A8W8"], PARITIES)  # any collection of labels


def test_check_ship_verdicts_teaches_on_wrong_sets():
    assert "No answer yet" in repr(checks.check_ship_verdicts(None, PARITIES))
    assert "write a set of labels" in repr(checks.check_ship_verdicts("A8W8", PARITIES))
    assert "'int8' is not one of the variants" in repr(checks.check_ship_verdicts({"int8"}, PARITIES))
    with_qat = checks.check_ship_verdicts({"A8W8", "A16W8", "QAT"}, PARITIES)
    assert (
        not with_qat
        and "'QAT' fails" in repr(with_qat)
        and "Winning back most of a loss is not passing" in repr(with_qat)
    )
    fast_only = checks.check_ship_verdicts({"A8W8"}, PARITIES)
    assert (
        not fast_only and "'A16W8' passes" in repr(fast_only) and "a slow file can pass it" in repr(fast_only)
    )


def test_check_a16w8_integer_kernels_names_this_lessons_guess(tmp_path):
    path = _dq_conv_without_output_q(tmp_path / "dq_conv.onnx")
    assert "answer_2_guess first" in repr(checks.check_a16w8_integer_kernels(None, 0, path))
    assert "No answer yet" in repr(checks.check_a16w8_integer_kernels(0, None, path))
    assert checks.check_a16w8_integer_kernels(0, 0, path)
    wrong = checks.check_a16w8_integer_kernels(0, 1, path)
    assert not wrong and "what the *file* quantizes" in repr(wrong)


def _row(option, speedup, floor=True, size=True, model="fashion_resnet18", speed=None):
    """One row of lesson 06's table, with the keys its rule and exercise 3 read."""
    return {
        "option": option,
        "speed": speed or (f"{speedup:.2f}x" if speedup else "0.12x at batch 32"),
        "quality": "agreement 99.70%" if floor else "agreement 96.00%",
        "quality floor": "✔" if floor else "✘",
        "size target": "✔" if size else "✘",
        "of fp32": "0.25" if size else "0.57",
        "_model": model,
        "_speedup": speedup,
    }


# The AMX run of issue 34: lesson 04's file with two layers in float runs faster than lesson 03's
# file but keeps a large share of fp32's bytes; A16W8 meets both bars, slowly; QAT misses the floor.
ROWS = [
    _row("dynamic INT8, per-channel (lesson 02)", 1.8, model="text_encoder"),
    _row("A8W8: static U8S8 per-channel (lesson 03)", 1.43),
    _row("A16W8 (QUInt16 activations)", 0.21),
    _row("QOperator U8S8", 1.33),
    _row("per-channel, 2 layers in float", 1.82, size=False),
    _row("QAT (10 steps), 4-bit weights", 2.5, floor=False),  # faster than any, but misses the floor
    _row("dynamic int8", None),  # timed only at another batch: not ranked
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


def test_check_pick_without_size_target_teaches_on_each_wrong_pick():
    model = "fashion_resnet18"
    assert "No answer yet" in repr(checks.check_pick_without_size_target(None, ROWS, model))
    unknown = checks.check_pick_without_size_target("dynamic INT8, per-channel (lesson 02)", ROWS, model)
    assert not unknown and "is not an option of this model's rows" in repr(unknown)  # another model's row
    with_target = checks.check_pick_without_size_target(
        "A8W8: static U8S8 per-channel (lesson 03)", ROWS, model
    )
    assert not with_target and "that is the pick with the size target" in repr(with_target)
    below_floor = checks.check_pick_without_size_target("QAT (10 steps), 4-bit weights", ROWS, model)
    assert not below_floor and "misses the quality floor" in repr(below_floor)
    unranked = checks.check_pick_without_size_target("dynamic int8", ROWS, model)
    assert not unranked and "not timed at the ranked setting" in repr(unranked)
    slower = checks.check_pick_without_size_target("QOperator U8S8", ROWS, model)
    assert not slower and "also meets the floor and runs faster" in repr(slower)
    none = checks.check_pick_without_size_target("QAT (10 steps), 4-bit weights", ROWS[5:], model)
    assert not none and "the rule picks none" in repr(none)


def test_check_ship_prediction_wants_a_guess_first_then_checks_the_answer():
    assert "answer_a_guess first" in repr(checks.check_ship_prediction(None, {"A8W8"}, PARITIES))
    assert "write a set of labels" in repr(checks.check_ship_prediction("A8W8", {"A8W8"}, PARITIES))
    assert "No answer yet" in repr(checks.check_ship_prediction({"A8W8"}, None, PARITIES))
    wrong = checks.check_ship_prediction({"A8W8"}, {"A8W8", "QAT"}, PARITIES)
    assert not wrong and "'QAT' fails" in repr(wrong)  # a wrong answer fails, whatever the guess


def test_check_ship_prediction_says_how_the_guess_compared():
    predicted = checks.check_ship_prediction({"A8W8", "A16W8"}, {"A8W8", "A16W8"}, PARITIES)
    assert predicted and "You predicted it" in repr(predicted)
    off = checks.check_ship_prediction({"A8W8", "QAT"}, {"A8W8", "A16W8"}, PARITIES)
    assert off and "it left out A16W8 and counted QAT" in repr(off)  # the answer passes; the guess is named
