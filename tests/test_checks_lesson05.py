"""Lesson 05's self-checks: each passes the right answer and teaches on the wrong answers it knows."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from course_lib import checks
from course_lib.measure import LatencyComparison


def comparison(speedup: float, low: float, high: float) -> LatencyComparison:
    return LatencyComparison("fp32", "int8", {}, speedup, low, high, 0.9)


S8S8_KERNELS = SimpleNamespace(compute_count=21, integer_count=10)


# ---------------------------------------------------------------------------------------------------
# Exercise 1: S8S8 against fp32, predicted from the kernel table, then read from the interval
# ---------------------------------------------------------------------------------------------------
def test_s8s8_prediction_asks_for_the_guess_first_and_then_the_answer():
    slower = comparison(0.42, 0.40, 0.45)
    assert "answer_1_guess first" in repr(checks.check_s8s8_prediction(None, "slower", slower))
    assert "No answer yet" in repr(checks.check_s8s8_prediction(0.5, None, slower))
    odd = checks.check_s8s8_prediction(0.5, "much slower", slower)
    assert not odd and '"faster", "slower" or "unsettled"' in odd.message


def test_s8s8_prediction_passes_the_interval_reading_and_explains_the_guess():
    slower = comparison(0.42, 0.40, 0.45)
    inside = checks.check_s8s8_prediction(0.43, "slower", slower, S8S8_KERNELS)
    assert inside and "inside the interval" in inside.message
    assert "11 of its 21 compute ops run in float" in inside.message
    side = checks.check_s8s8_prediction(0.7, "Slower ", slower, S8S8_KERNELS)
    assert side and "right side of 1x" in side.message
    hopeful = checks.check_s8s8_prediction(2.0, "slower", slower, S8S8_KERNELS)
    assert hopeful and "not fast by being INT8" in hopeful.message


def test_s8s8_prediction_teaches_each_wrong_reading_of_the_interval():
    slower = comparison(0.42, 0.40, 0.45)
    inverted = checks.check_s8s8_prediction(0.5, "faster", slower)
    assert not inverted and "below 1 means S8S8 takes longer" in inverted.message
    settled = checks.check_s8s8_prediction(0.5, "unsettled", slower)
    assert not settled and "lies on one side of 1x" in settled.message
    straddles = comparison(0.97, 0.90, 1.08)
    by_median = checks.check_s8s8_prediction(0.5, "slower", straddles)
    assert not by_median and "reaches both sides of 1x" in by_median.message
    assert checks.check_s8s8_prediction(0.5, "unsettled", straddles)
    assert checks.check_s8s8_prediction(1.2, "faster", comparison(1.3, 1.2, 1.4))


# ---------------------------------------------------------------------------------------------------
# Exercise 2: batch 1 against batch 64, by the intervals
# ---------------------------------------------------------------------------------------------------
def test_batch_gain_asks_for_the_guess_first_and_then_the_answer():
    b1, b64 = comparison(2.3, 2.2, 2.4), comparison(1.5, 1.45, 1.55)
    assert "answer_2_guess first" in repr(checks.check_batch_gain(None, "batch 1", b1, b64))
    assert "No answer yet" in repr(checks.check_batch_gain("batch 1", None, b1, b64))
    assert not checks.check_batch_gain("batch 1", "batch 8", b1, b64)


def test_batch_gain_passes_the_clear_answer_and_says_whether_the_guess_was_right():
    b1, b64 = comparison(2.3, 2.2, 2.4), comparison(1.5, 1.45, 1.55)
    right = checks.check_batch_gain("batch 1", "batch 1", b1, b64)
    assert right and "you predicted it" in right.message and "a quarter of the bytes" in right.message
    assert checks.check_batch_gain("batch 64", 1, b1, b64)  # a number is read as the batch size
    wrong_guess = checks.check_batch_gain("batch 64", "batch 1", b1, b64)
    assert wrong_guess and "you predicted 'batch 64'" in wrong_guess.message
    assert checks.check_batch_gain("batch 1", "batch 64", b64, b1)


def test_batch_gain_teaches_each_wrong_reading():
    b1, b64 = comparison(2.3, 2.2, 2.4), comparison(1.5, 1.45, 1.55)
    inverted = checks.check_batch_gain("batch 1", "batch 64", b1, b64)
    assert not inverted and "the larger ratio is where INT8 gains more" in inverted.message
    too_careful = checks.check_batch_gain("batch 1", "neither", b1, b64)
    assert not too_careful and "do not overlap" in too_careful.message
    close = comparison(1.6, 1.45, 1.75), comparison(1.5, 1.4, 1.6)
    by_median = checks.check_batch_gain("batch 1", "batch 1", *close)
    assert not by_median and "the intervals overlap" in by_median.message
    unsettled = checks.check_batch_gain("batch 1", "neither", *close)
    assert unsettled and "cannot be settled by this run" in unsettled.message


# ---------------------------------------------------------------------------------------------------
# Exercise 3: the bootstrap interval, computed from the raw timed runs
# ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def runs():
    """40 interleaved runs of two models: a shared machine-state term makes run i of each alike."""
    rng = np.random.default_rng(5)
    shared = rng.gamma(2.0, 0.6, 40)
    fp32 = 24 + 3 * shared + rng.normal(0, 0.6, 40)
    int8 = 15 + 1.5 * shared + rng.normal(0, 0.4, 40)
    int8[[3, 17]] += 12  # two runs slowed by something else on the machine
    return fp32, int8


def learner(fp32, int8, seed=0, resamples=2000, stat=np.median, q=(5, 95), paired=True):
    """What a learner writes: resample pairs of runs, ratio of medians, its percentiles."""
    rng = np.random.default_rng(seed)
    i = rng.integers(0, len(fp32), size=(resamples, len(fp32)))
    j = i if paired else rng.integers(0, len(fp32), size=(resamples, len(fp32)))
    return np.percentile(stat(fp32[i], axis=1) / stat(int8[j], axis=1), q)


def test_bootstrap_interval_passes_a_learners_answer_whatever_the_seed(runs):
    fp32, int8 = runs
    for seed in range(5):
        result = checks.check_bootstrap_interval(learner(fp32, int8, seed=seed), fp32, int8)
        assert result, result.message
        assert "nine times in ten" in result.message
    assert checks.check_bootstrap_interval(measure_interval(fp32, int8), fp32, int8)


def measure_interval(fp32, int8):
    from course_lib.measure import bootstrap_ratio_interval

    return bootstrap_ratio_interval(fp32, int8)


def test_bootstrap_interval_asks_for_an_answer_of_the_right_shape(runs):
    fp32, int8 = runs
    assert "No answer yet" in repr(checks.check_bootstrap_interval(None, fp32, int8))
    single = checks.check_bootstrap_interval(float(np.median(fp32) / np.median(int8)), fp32, int8)
    assert not single and "give two numbers" in single.message
    low, high = learner(fp32, int8)
    backwards = checks.check_bootstrap_interval((high, low), fp32, int8)
    assert not backwards and "the low end first" in backwards.message


@pytest.mark.parametrize(
    ("slip", "hint"),
    [
        ("inverted", "divided INT8's median by fp32's"),
        ("means", "ratio of means"),
        ("per-run ratios", "spread of single runs"),
        ("95%", "a 95% interval"),
    ],
)
def test_bootstrap_interval_recognises_each_slip(runs, slip, hint):
    fp32, int8 = runs
    answer = {
        "inverted": lambda: learner(int8, fp32),
        "means": lambda: learner(fp32, int8, stat=np.mean),
        "per-run ratios": lambda: np.percentile(fp32 / int8, [5, 95]),
        "95%": lambda: learner(fp32, int8, q=(2.5, 97.5)),
    }[slip]()
    result = checks.check_bootstrap_interval(answer, fp32, int8)
    assert not result and hint in result.message, result.message


def test_bootstrap_interval_recognises_unpaired_resampling_where_pairing_matters():
    rng = np.random.default_rng(1)
    shared = rng.normal(0, 4, 40)  # the machine's state moves both models' runs together
    fp32, int8 = 24 + shared + rng.normal(0, 0.2, 40), 16 + shared * 0.67 + rng.normal(0, 0.2, 40)
    result = checks.check_bootstrap_interval(learner(fp32, int8, paired=False), fp32, int8)
    assert not result and "draw the same indices for both" in result.message, result.message


def test_bootstrap_interval_falls_back_to_the_recipe(runs):
    fp32, int8 = runs
    far = checks.check_bootstrap_interval((3.0, 4.0), fp32, int8)
    assert not far and "5th and 95th percentiles" in far.message
