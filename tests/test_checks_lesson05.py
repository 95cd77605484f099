"""Lesson 05's self-checks: each passes the right answer and teaches on the wrong answers it knows."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from course_lib.measure import LatencyComparison
from course_machinery import checks


def comparison(speedup: float, low: float, high: float) -> LatencyComparison:
    return LatencyComparison("fp32", "int8", {}, speedup, low, high, 0.9)


S8S8_KERNELS = SimpleNamespace(compute_count=21, integer_count=10)


def profile(**ms):
    """A stand-in for kernels.Profile: kernel milliseconds per op type, one node per type but Conv."""
    return SimpleNamespace(ms_per_run=ms, total_ms=sum(ms.values()), nodes={"Conv": 20})


FP32_PROFILE = profile(Conv=40.0, MaxPool=1.0)
S8S8_PROFILE = profile(Conv=70.0, QLinearConv=20.0, DequantizeLinear=8.0, QuantizeLinear=4.0)


# ---------------------------------------------------------------------------------------------------
# Exercise 1: the price of the S8S8 file's float convolutions, predicted, then computed from profiles
# ---------------------------------------------------------------------------------------------------
def test_float_island_time_asks_for_the_guess_first_and_then_the_answer():
    assert "answer_1_guess first" in repr(
        checks.check_float_island_time(None, 1.75, S8S8_PROFILE, FP32_PROFILE)
    )
    odd = checks.check_float_island_time("about the same", 1.75, S8S8_PROFILE, FP32_PROFILE)
    assert not odd and '"less" or "more"' in odd.message
    assert "No answer yet" in repr(checks.check_float_island_time("more", None, S8S8_PROFILE, FP32_PROFILE))


def test_float_island_time_passes_the_ratio_and_says_whether_the_guess_was_right():
    right = checks.check_float_island_time("More ", 1.75, S8S8_PROFILE, FP32_PROFILE, S8S8_KERNELS)
    assert right and right.message.startswith("1.75") and "take more kernel time" in right.message
    assert "as you predicted" in right.message and "11 float convolutions against fp32's 20" in right.message
    assert "12.0 ms per run on top" in right.message  # its QuantizeLinear and DequantizeLinear nodes
    wrong_guess = checks.check_float_island_time("less", 1.75, S8S8_PROFILE, FP32_PROFILE)
    assert wrong_guess and "you predicted 'less'" in wrong_guess.message


def test_float_island_time_teaches_each_slip():
    inverted = checks.check_float_island_time("more", 40 / 70, S8S8_PROFILE, FP32_PROFILE)
    assert not inverted and "divided fp32's time by the S8S8 file's" in inverted.message
    totals = checks.check_float_island_time("more", 102 / 41, S8S8_PROFILE, FP32_PROFILE)
    assert not totals and "the whole profiles" in totals.message
    far = checks.check_float_island_time("more", 3.0, S8S8_PROFILE, FP32_PROFILE)
    assert not far and "ms_per_run['Conv']" in far.message


def test_float_island_time_on_a_cpu_without_float_islands():
    arm = profile(QLinearConv=20.0)  # ARM: every S8S8 convolution on an integer kernel
    result = checks.check_float_island_time("more", 0.0, arm, FP32_PROFILE)
    assert result and "no float island" in result.message
    keyed = checks.check_float_island_time("more", 1.0, arm, FP32_PROFILE)  # a Conv time read from elsewhere
    assert not keyed and "ms_per_run.get('Conv', 0.0)" in keyed.message


def test_float_island_time_never_gives_the_ratio_away():
    for answer in (40 / 70, 102 / 41, 3.0, 1.6):
        result = checks.check_float_island_time("more", answer, S8S8_PROFILE, FP32_PROFILE)
        assert not result and "1.75" not in result.message and "1.8" not in result.message
    words = checks.check_float_island_time("more", "lots", S8S8_PROFILE, FP32_PROFILE)
    assert not words and "give one number" in words.message


# ---------------------------------------------------------------------------------------------------
# Exercise 2: the S8S8 file with every group fused (session.qdqisint8allowed), predicted, then timed
# ---------------------------------------------------------------------------------------------------
def test_fused_s8s8_asks_for_the_guess_first_and_a_comparison():
    slow = comparison(0.06, 0.05, 0.07)
    assert "answer_2_guess first" in repr(checks.check_fused_s8s8(None, slow))
    assert "No answer yet" in repr(checks.check_fused_s8s8(2.0, None))
    number = checks.check_fused_s8s8(2.0, 0.06)
    assert not number and "LatencyComparison" in number.message
    backwards = LatencyComparison(
        "S8S8 fused", "fp32", {"fp32": None, "S8S8 fused": None}, 16.0, 14.0, 18.0, 0.9
    )
    result = checks.check_fused_s8s8(2.0, backwards)
    assert not result and "Put fp32 first" in result.message


def test_fused_s8s8_reads_the_interval_against_the_guess_and_explains_the_kernels():
    slow, default = comparison(0.06, 0.05, 0.07), comparison(0.42, 0.38, 0.45)
    hopeful = checks.check_fused_s8s8(2.0, slow, default)
    assert hopeful and hopeful.message.startswith("Slower: the fused S8S8 file ran at 0.06x (0.05–0.07)")
    assert (
        "you predicted 2x" in hopeful.message and "default for the same file ran at 0.42x" in hopeful.message
    )
    assert "AVX-VNNI-INT8" in hopeful.message and "Integer coverage is not speed" in hopeful.message
    side = checks.check_fused_s8s8(0.5, slow)
    assert side and "right side of 1x" in side.message
    inside = checks.check_fused_s8s8(0.06, slow)
    assert inside and "inside the interval" in inside.message
    unsettled = checks.check_fused_s8s8(1.0, comparison(1.0, 0.9, 1.1))
    assert unsettled and unsettled.message.startswith("Unsettled")


# ---------------------------------------------------------------------------------------------------
# Lesson 05b, exercise 1: the careless loop with the load the other way round
# ---------------------------------------------------------------------------------------------------
def test_careless_swap_asks_for_words_it_knows():
    assert "answer_1_guess first" in repr(checks.check_careless_swap(None, "below", 0.8, 1.6, 1.9))
    assert "No answer yet" in repr(checks.check_careless_swap("below", None, 0.8, 1.6, 1.9))
    odd = checks.check_careless_swap("lower", "below", 0.8, 1.6, 1.9)
    assert not odd and '"above", "below" or "inside"' in odd.message


def test_careless_swap_checks_where_the_ratio_landed_and_the_prediction():
    right = checks.check_careless_swap("below", " Below", 0.82, 1.61, 1.87)
    assert right and "as you predicted" in right.message and "denominator" in right.message
    surprised = checks.check_careless_swap("inside", "below", 0.82, 1.61, 1.87)
    assert surprised and "you predicted 'inside'" in surprised.message
    misread = checks.check_careless_swap("below", "inside", 0.82, 1.61, 1.87)
    assert not misread and "not where the careless ratio landed" in misread.message
    assert "below" not in misread.message.lower()  # the answer is not given away
    assert not checks.check_careless_swap("below", "above", 1.7, 1.61, 1.87)
    assert checks.check_careless_swap("below", "inside", 1.7, 1.61, 1.87)
    assert checks.check_careless_swap("below", "above", 2.5, 1.61, 1.87)


# ---------------------------------------------------------------------------------------------------
# Lesson 05b, exercise 2: arithmetic intensity at another batch size
# ---------------------------------------------------------------------------------------------------
def small_conv(path):
    """input (N, 1, 5, 5) -> Conv 2x1x3x3: 18 weights, each used at 9 output positions per image."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    weight = numpy_helper.from_array(np.ones((2, 1, 3, 3), np.float32), "w")
    node = helper.make_node("Conv", ["input", "w"], ["output"], kernel_shape=[3, 3], name="conv")
    graph = helper.make_graph(
        [node],
        "small",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 1, 5, 5])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["N", 2, 3, 3])],
        [weight],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_intensity_passes_the_computed_value_and_grades_the_prediction(tmp_path):
    path, shapes = small_conv(tmp_path / "small.onnx"), {"input": (8, 1, 5, 5)}
    # 8 images x 9 positions x 18 weights = 1,296 multiply-adds over 18 bytes of INT8 weights: 72.
    assert "answer_2_guess first" in repr(checks.check_intensity(None, 72.0, path, shapes))
    assert "No answer yet" in repr(checks.check_intensity(70.0, None, path, shapes))
    close = checks.check_intensity(70.0, 72.0, path, shapes)
    assert (
        close
        and close.message.startswith("72.0 multiply-adds per byte")
        and "within a tenth" in close.message
    )
    off = checks.check_intensity(9.0, 72.0, path, shapes)
    assert off and "88% off" in off.message


def test_intensity_teaches_each_slip(tmp_path):
    path, shapes = small_conv(tmp_path / "small.onnx"), {"input": (8, 1, 5, 5)}
    fp32_bytes = checks.check_intensity(70.0, 18.0, path, shapes)  # per byte of fp32 weights
    assert not fp32_bytes and "fp32 weights" in fp32_bytes.message
    wrong = checks.check_intensity(70.0, 50.0, path, shapes)
    assert not wrong and "intensity(8)" in wrong.message and "72" not in wrong.message
    odd = checks.check_intensity(70.0, "a lot", path, shapes)
    assert not odd and "give one number" in odd.message


# ---------------------------------------------------------------------------------------------------
# Exercise 3: the bootstrap interval, paired and unpaired, computed from the raw timed runs
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
    """What a learner writes: resample runs (pairs, or each side on its own), ratio of medians, percentiles."""
    rng = np.random.default_rng(seed)
    i = rng.integers(0, len(fp32), size=(resamples, len(fp32)))
    j = i if paired else rng.integers(0, len(fp32), size=(resamples, len(fp32)))
    return np.percentile(stat(fp32[i], axis=1) / stat(int8[j], axis=1), q)


def both(fp32, int8, seed=0, **slip):
    return learner(fp32, int8, seed=seed, **slip), learner(fp32, int8, seed=seed + 100, paired=False)


def test_bootstrap_interval_passes_a_learners_answers_whatever_the_seed(runs):
    fp32, int8 = runs
    for seed in range(5):
        paired, unpaired = both(fp32, int8, seed=seed)
        result = checks.check_bootstrap_interval("narrower", paired, unpaired, fp32, int8)
        assert result, result.message
        assert "nine times in ten" in result.message and "narrower than the unpaired one" in result.message
        assert "as you predicted" in result.message
    library = measure_interval(fp32, int8)
    assert checks.check_bootstrap_interval("wider", library, unpaired, fp32, int8)


def test_bootstrap_interval_says_what_pairing_did_against_the_prediction(runs):
    fp32, int8 = runs
    surprised = checks.check_bootstrap_interval(" Same", *both(fp32, int8), fp32, int8)
    assert surprised and "you predicted 'same'" in surprised.message and "common noise" in surprised.message
    rng = np.random.default_rng(2)  # independent runs: nothing moves the two models together
    fp32_alone, int8_alone = 24 + rng.normal(0, 1, 40), 16 + rng.normal(0, 0.7, 40)
    alike = checks.check_bootstrap_interval("narrower", *both(fp32_alone, int8_alone), fp32_alone, int8_alone)
    assert alike and "about the same as the unpaired one" in alike.message, alike.message


def measure_interval(fp32, int8):
    from course_lib.measure import bootstrap_ratio_interval

    return bootstrap_ratio_interval(fp32, int8)


def test_bootstrap_interval_asks_for_answers_of_the_right_shape(runs):
    fp32, int8 = runs
    paired, unpaired = both(fp32, int8)
    assert "answer_3_guess first" in repr(checks.check_bootstrap_interval(None, paired, unpaired, fp32, int8))
    assert "No answer yet" in repr(checks.check_bootstrap_interval("narrower", None, unpaired, fp32, int8))
    assert "independent indices" in repr(
        checks.check_bootstrap_interval("narrower", paired, None, fp32, int8)
    )
    odd = checks.check_bootstrap_interval("tighter", paired, unpaired, fp32, int8)
    assert not odd and '"narrower", "same" or "wider"' in odd.message
    single = checks.check_bootstrap_interval(
        "narrower", float(np.median(fp32) / np.median(int8)), unpaired, fp32, int8
    )
    assert not single and "give two numbers" in single.message
    backwards = checks.check_bootstrap_interval("narrower", paired, unpaired[::-1], fp32, int8)
    assert not backwards and "high end first" in backwards.message


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
    _, unpaired = both(fp32, int8)
    result = checks.check_bootstrap_interval("narrower", answer, unpaired, fp32, int8)
    assert not result and hint in result.message, result.message


def test_bootstrap_interval_tells_the_paired_and_unpaired_answers_apart():
    rng = np.random.default_rng(1)
    shared = rng.normal(0, 4, 40)  # the machine's state moves both models' runs together
    fp32, int8 = 24 + shared + rng.normal(0, 0.2, 40), 16 + shared * 0.67 + rng.normal(0, 0.2, 40)
    paired, unpaired = both(fp32, int8)
    swapped = checks.check_bootstrap_interval("narrower", unpaired, paired, fp32, int8)
    assert not swapped and "draw the same indices for both" in swapped.message, swapped.message
    twice = checks.check_bootstrap_interval("narrower", paired, paired, fp32, int8)
    assert not twice and "the paired interval again" in twice.message, twice.message
    inverted = learner(int8, fp32, paired=False)
    off = checks.check_bootstrap_interval("narrower", paired, inverted, fp32, int8)
    assert not off and "divided INT8's median by fp32's" in off.message, off.message


def test_bootstrap_interval_falls_back_to_the_recipe(runs):
    fp32, int8 = runs
    _, unpaired = both(fp32, int8)
    far = checks.check_bootstrap_interval("narrower", (3.0, 4.0), unpaired, fp32, int8)
    assert not far and "5th and 95th percentiles" in far.message
    far_unpaired = checks.check_bootstrap_interval("narrower", both(fp32, int8)[0], (3.0, 4.0), fp32, int8)
    assert not far_unpaired and "another for INT8's" in far_unpaired.message
