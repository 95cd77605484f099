"""Lessons 01 and 01b's self-checks: each passes the right answer, teaches on each wrong answer it
recognises, and never spells the expected value in the feedback on a wrong one (result.wrong raises
under the tests if it does)."""

from __future__ import annotations

import numpy as np
import pytest

from course_lib import affine
from course_lib.explorers import error_study, sample_values
from course_machinery import checks


# ---------------------------------------------------------------------------------------------------
# 01, exercise 1: a fake-quantize written with NumPy
# ---------------------------------------------------------------------------------------------------
def _right(x, scale, zero_point, qmin, qmax):
    return scale * (np.clip(np.rint(np.asarray(x) / scale) + zero_point, qmin, qmax) - zero_point)


def test_fake_quantize_passes_the_rule_and_waits_for_a_function():
    assert checks.check_fake_quantize(_right)
    assert "No answer yet" in repr(checks.check_fake_quantize(None))
    called = checks.check_fake_quantize(_right(np.float32([1.0]), 0.5, 0, -128, 127))
    assert not called and "the function itself" in called.message


@pytest.mark.parametrize(
    ("function", "said"),
    [
        (
            lambda x, s, z, lo, hi: np.clip(np.rint(np.asarray(x) / s) + z, lo, hi),
            "returns the codes",
        ),
        (
            lambda x, s, z, lo, hi: s * (np.clip(np.floor(np.asarray(x) / s + z + 0.5), lo, hi) - z),
            "half to even",
        ),
        (lambda x, s, z, lo, hi: s * (np.rint(np.asarray(x) / s + z) - z), "saturate"),
        (
            lambda x, s, z, lo, hi: s * np.clip(np.rint(np.asarray(x) / s) + z, lo, hi),
            "zero point goes in twice",
        ),
        (lambda x, s, z, lo, hi: np.asarray(x) * 1.01, "round half to even, add z"),
    ],
    ids=["codes", "half-up", "no-clip", "zero-point", "other"],
)
def test_fake_quantize_names_each_slip(function, said):
    result = checks.check_fake_quantize(function)
    assert not result and said in result.message


def test_fake_quantize_reports_a_function_that_raises_or_returns_the_wrong_shape():
    raised = checks.check_fake_quantize(lambda x, s, z, lo, hi: 1 / 0)
    assert not raised and "ZeroDivisionError" in raised.message
    shape = checks.check_fake_quantize(lambda x, s, z, lo, hi: np.zeros(2))
    assert not shape and "one real per value" in shape.message


# ---------------------------------------------------------------------------------------------------
# 01, exercise 2: the codes a ReLU6 output reaches on a symmetric int8 grid
# ---------------------------------------------------------------------------------------------------
def _codes_used():
    s, z = affine.scale_zero_point(0.0, 6.0, "int8", symmetric=True)
    return len(np.unique(affine.quantize(np.linspace(0, 6, 100_001), s, z, "int8")))


def test_codes_used_wants_a_guess_then_a_count():
    assert "answer_2_guess first" in repr(checks.check_codes_used(None, 128))
    assert "No answer yet" in repr(checks.check_codes_used(128, None))


def test_codes_used_passes_the_count_with_and_without_the_right_guess():
    n = _codes_used()
    right = checks.check_codes_used(n, n)
    assert right and "as you predicted" in right.message
    other = checks.check_codes_used(255, n)
    assert other and "you guessed 255" in other.message


def test_codes_used_teaches_on_each_wrong_count():
    n = _codes_used()
    no_zero = checks.check_codes_used(n, n - 1)
    assert not no_zero and "code 0 too" in no_zero.message
    whole = checks.check_codes_used(n, 255)
    assert not whole and "whole grid" in whole.message
    other = checks.check_codes_used(n, 17)
    assert not other and "np.unique" in other.message
    assert not checks.check_codes_used(n, "many")


# ---------------------------------------------------------------------------------------------------
# 01, exercise 3: codes, predicted then computed
# ---------------------------------------------------------------------------------------------------
def test_codes_wants_a_guess_and_names_each_slip():
    values = np.float32([0.34, -0.25, 12.86])  # -0.25 / 0.1 is a tie; 12.86 / 0.1 is beyond int8
    right = affine.quantize(values, 0.1, 0, "int8")
    assert list(right) == [3, -2, 127]
    assert "answer_3_guess first" in repr(checks.check_codes(None, right, values, 0.1, 0))
    assert "No answer yet" in repr(checks.check_codes([3, -2, 127], None, values, 0.1, 0))
    assert "and you predicted them" in repr(checks.check_codes([3, -2, 127], right, values, 0.1, 0))
    truncated = checks.check_codes([3, -2, 128], right, values, 0.1, 0)  # the guess slipped
    assert truncated and "truncated instead of rounded" in repr(truncated)
    away = checks.check_codes([3, -3, 129], right, values, 0.1, 0)
    assert away and "ties away from zero" in repr(away)
    unsaturated = checks.check_codes([3, -2, 127], [3, -2, 129], values, 0.1, 0)  # a wrong answer
    assert not unsaturated and "not saturated to int8's range" in repr(unsaturated)
    other_answer = checks.check_codes([3, -2, 127], [1, 1, 1], values, 0.1, 0)
    assert not other_answer and "affine.quantize" in other_answer.message
    assert not checks.check_codes([3, -2, 127], [3, -2], values, 0.1, 0)  # one code per value
    other = checks.check_codes([0, 0, 0], right, values, 0.1, 0)
    assert other and "value by value" in repr(other)


# ---------------------------------------------------------------------------------------------------
# 01, exercise 4: where clipping stops paying, on a tensor that crosses over
# ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def lesson_tensor_and_wins():
    """Exercise 4's tensor (20,000 normal values, five outliers 30 standard deviations out) and the
    bit widths at which clipping at the 99.9th percentile beats min/max."""
    w = sample_values("normal", n=20_000, outliers=5, outlier_magnitude=30, seed=0)
    wins = [
        bits
        for bits in range(2, 9)
        if error_study(w, bits, symmetric=True, method="percentile", percentile=99.9).error.sqnr_db
        > error_study(w, bits, symmetric=True).error.sqnr_db
    ]
    assert wins and max(wins) < 8  # the tensor crosses over between 2 and 8 bits
    return w, wins


def test_crossover_wants_a_guess_then_a_measurement(lesson_tensor_and_wins):
    w, wins = lesson_tensor_and_wins
    assert "answer_4_guess first" in repr(checks.check_clipping_crossover(None, max(wins), w))
    assert "No answer yet" in repr(checks.check_clipping_crossover(5, None, w))


def test_crossover_right_answer_with_and_without_the_right_guess(lesson_tensor_and_wins):
    w, wins = lesson_tensor_and_wins
    predicted = checks.check_clipping_crossover(max(wins), max(wins), w)
    assert predicted and "you predicted it" in predicted.message and "halves the step" in predicted.message
    other = checks.check_clipping_crossover(max(wins) + 1, max(wins), w)
    assert other and f"you guessed {max(wins) + 1}" in other.message


def test_crossover_teaches_on_a_wrong_width_without_naming_the_right_one(lesson_tensor_and_wins):
    w, wins = lesson_tensor_and_wins
    one_past = checks.check_clipping_crossover(5, max(wins) + 1, w)
    assert not one_past and "does not win" in one_past.message
    smaller = checks.check_clipping_crossover(5, min(wins), w)
    assert min(wins) < max(wins) and not smaller and "not the widest" in smaller.message
    assert not checks.check_clipping_crossover(5, 9, w) and not checks.check_clipping_crossover(5, "six", w)


def test_crossover_when_clipping_never_wins():
    w = np.float32([-1.0, 1.0] * 500)  # the 99.9th percentile of |w| is its maximum: nothing to clip
    result = checks.check_clipping_crossover(4, 4, w)
    assert not result and "never beats" in result.message


def test_crossover_when_clipping_still_wins_at_8_bits():
    w = np.random.default_rng(2).uniform(-1, 1, 20_000).astype(np.float32)
    result = checks.check_clipping_crossover(6, 8, w)
    assert result and "still wins at 8 bits" in result.message and "past some width" not in result.message
    assert not checks.check_clipping_crossover(6, 7, w)


# ---------------------------------------------------------------------------------------------------
# 01b, exercise 1: the accumulator from the raw product and its corrections
# ---------------------------------------------------------------------------------------------------
def _corrected(qa, za, qb, zb):
    qa, qb = qa.astype(np.int32), qb.astype(np.int32)
    rows, cols = qa.sum(axis=1, keepdims=True), qb.sum(axis=0, keepdims=True)
    return qa @ qb - zb * rows - za * cols + qa.shape[1] * za * zb


def test_corrected_accumulator_passes_the_expansion_and_the_direct_form():
    assert checks.check_corrected_accumulator(_corrected)
    direct = checks.check_corrected_accumulator(
        lambda qa, za, qb, zb: (qa.astype(np.int32) - za) @ (qb.astype(np.int32) - zb)
    )
    assert direct and "column sums once" in direct.message
    assert "No answer yet" in repr(checks.check_corrected_accumulator(None))
    assert not checks.check_corrected_accumulator(42)


def _without(term):
    def function(qa, za, qb, zb):
        a, b = qa.astype(np.int32), qb.astype(np.int32)
        rows, cols, k = a.sum(axis=1, keepdims=True), b.sum(axis=0, keepdims=True), a.shape[1]
        terms = {"raw": a @ b, "rows": -zb * rows, "cols": -za * cols, "const": k * za * zb}
        if term == "sign":
            terms["const"] = -terms["const"]
        elif term == "swapped":
            terms["rows"], terms["cols"] = -za * rows, -zb * cols
        elif term == "all":
            return terms["raw"]
        else:
            terms.pop(term)
        return sum(terms.values())

    return function


@pytest.mark.parametrize(
    ("function", "said"),
    [
        (_without("all"), "raw product alone"),
        (_without("const"), "One term is missing"),
        (_without("sign"), "added, not subtracted"),
        (_without("swapped"), "the other matrix"),
        (_without("rows"), "term by term"),
        (lambda qa, za, qb, zb: (qa - za) @ (qb - zb), "cast the codes to int32"),
    ],
    ids=["raw", "no-constant", "sign", "swapped", "other", "uint8"],
)
def test_corrected_accumulator_names_each_slip(function, said):
    result = checks.check_corrected_accumulator(function)
    assert not result and said in result.message


def test_corrected_accumulator_reports_a_function_that_raises_or_returns_the_wrong_shape():
    raised = checks.check_corrected_accumulator(lambda qa, za, qb, zb: qa @ qb.T)
    assert not raised and "raised ValueError" in raised.message
    shape = checks.check_corrected_accumulator(lambda qa, za, qb, zb: np.zeros(3))
    assert not shape and "returned shape" in shape.message


# ---------------------------------------------------------------------------------------------------
# 01b, exercise 2: a blocked 4-bit layout on short rows
# ---------------------------------------------------------------------------------------------------
SHAPE = (64, 1, 7, 7)  # the ResNet18's conv1.weight: 49 weights per output channel


def test_blocked_int4_bytes_wants_a_word_then_a_count():
    assert "answer_2_guess first" in repr(checks.check_blocked_int4_bytes(None, 1, SHAPE, 128, False))
    assert "No answer yet" in repr(checks.check_blocked_int4_bytes("more", None, SHAPE, 128, False))
    assert not checks.check_blocked_int4_bytes("bigger", 4416, SHAPE, 128, False)
    assert not checks.check_blocked_int4_bytes("more", 4416.5, SHAPE, 128, False)


def test_blocked_int4_bytes_passes_the_count_and_says_whether_the_guess_held():
    # 128-value blocks: each channel's 49 values padded to 128 (64 bytes), a scale (4), a zero point byte
    right = checks.check_blocked_int4_bytes("more", 64 * (64 + 4 + 1), SHAPE, 128, False)
    assert right and "more, as you predicted" in right.message and "3,456" in right.message
    # 32-value blocks, symmetric: 2 blocks of 32 (32 bytes) and 2 scales (8): fewer than int8's 54 a channel
    small = checks.check_blocked_int4_bytes("more", 64 * (32 + 8), SHAPE, 32, True)
    assert small and "not more as you predicted" in small.message


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (64 * (25 + 4 + 1), "Pad each channel"),
        (3200 // 2 + 4 * 25 + 13, "within each output channel"),
        (64 * (64 + 4), "add the 4-bit zero points"),
        (64 * (128 + 4 + 1), "two 4-bit values per byte"),
        (64 * (64 + 1 + 1), "4 bytes"),
        (12_345, "Count per channel"),
    ],
)
def test_blocked_int4_bytes_names_each_slip(answer, said):
    result = checks.check_blocked_int4_bytes("more", answer, SHAPE, 128, False)
    assert not result and said in result.message
