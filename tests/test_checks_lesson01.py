"""Lesson 01's new self-checks: each passes the right answer and teaches on each wrong answer it recognises.
(The older lesson 01 checks are tested in tests/test_checks.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from course_lib import checks
from course_lib.explorers import error_study


@pytest.fixture(scope="module")
def weights_and_answer():
    """A normal weight tensor with a few outliers, and the largest bit width at which clipping wins."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal(20_000).astype(np.float32)
    w[:5] = [6.0, -6.5, 7.0, 5.5, -6.0]
    wins = [
        bits
        for bits in range(2, 9)
        if error_study(w, bits, symmetric=True, method="percentile", percentile=99.9).error.sqnr_db
        > error_study(w, bits, symmetric=True).error.sqnr_db
    ]
    assert wins and max(wins) < 8 and min(wins) < max(wins)  # a tensor where the question has an answer
    return w, wins


def test_crossover_wants_a_guess_then_a_measurement(weights_and_answer):
    w, wins = weights_and_answer
    assert "answer_6_guess first" in repr(checks.check_clipping_crossover(None, max(wins), w))
    assert "No answer yet" in repr(checks.check_clipping_crossover(5, None, w))


def test_crossover_right_answer_with_and_without_the_right_guess(weights_and_answer):
    w, wins = weights_and_answer
    predicted = checks.check_clipping_crossover(max(wins), max(wins), w)
    assert predicted and "you predicted it" in predicted.message and "halves the step" in predicted.message
    other = checks.check_clipping_crossover(max(wins) + 1, max(wins), w)
    assert other and f"you guessed {max(wins) + 1}" in other.message


def test_crossover_names_each_slip(weights_and_answer):
    w, wins = weights_and_answer
    one_past = checks.check_clipping_crossover(5, max(wins) + 1, w)
    assert not one_past and "first bit width where min/max wins" in one_past.message
    smallest = checks.check_clipping_crossover(5, min(wins), w)
    assert not smallest and "smallest bit width" in smallest.message
    other = checks.check_clipping_crossover(5, 1, w)
    assert not other and f"up to {max(wins)} bits" in other.message


def test_crossover_when_clipping_never_wins():
    w = np.float32([-1.0, 1.0] * 500)  # the 99.9th percentile of |w| is its maximum: nothing to clip
    result = checks.check_clipping_crossover(4, 4, w)
    assert not result and "never wins" in result.message


def test_crossover_when_clipping_still_wins_at_8_bits():
    """Weights whose largest values sit next to the 99.9th percentile (as the ResNet18's fc.weight trained
    on one CPU): clipping wins by a hair at every width, no crossover up to 8 bits, and the check says so
    instead of describing a crossover."""
    w = np.random.default_rng(2).uniform(-1, 1, 20_000).astype(np.float32)
    gain8 = (
        error_study(w, 8, symmetric=True, method="percentile", percentile=99.9).error.sqnr_db
        - error_study(w, 8, symmetric=True).error.sqnr_db
    )
    assert gain8 > 0  # the case the test is about
    result = checks.check_clipping_crossover(6, 8, w)
    assert result and "still wins at 8 bits" in result.message and "past some width" not in result.message
    assert "only 1.00x the 99.9th percentile" in result.message
    assert not checks.check_clipping_crossover(6, 7, w)
