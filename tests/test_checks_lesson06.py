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
