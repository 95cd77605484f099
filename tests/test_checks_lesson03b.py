"""Lesson 03b's self-checks: each passes the right answer, and names each wrong one it recognises
without giving the answer away (under the tests, `result.wrong` raises if a message spells it)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from onnxruntime.quantization import CalibrationMethod
from test_checks_lesson03 import _classifier, _static

from course_lib import measure, scoring
from course_machinery import checks
from course_machinery.checks.result import gives_away


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    """(fp32 path, MinMax QDQ path, test set of 400 rows labelled by fp32's own answer, inputs, folder)."""
    rng = np.random.default_rng(0)
    folder = tmp_path_factory.mktemp("classifier03b")
    fp32 = _classifier(folder / "fp32.onnx", rng)
    x = rng.standard_normal((400, 6)).astype(np.float32)
    minmax = _static(fp32, folder / "minmax.onnx", x[:64])
    labels = measure.logits(fp32, {"x": x}, threads=1).argmax(1)
    test = scoring.TestSet.of(fp32, x, labels, threads=1, input_name="x")
    return fp32, minmax, test, x, folder


# ---------------------------------------------------------------------------------------------------
# Exercise A: predict how a harder-clipping Percentile model agrees, then measure
# ---------------------------------------------------------------------------------------------------
def test_check_clipping_prediction_measures_the_file_and_answers_the_prediction(classifier):
    fp32, minmax, test, x, folder = classifier
    twin = folder / "twin.onnx"
    shutil.copy(minmax, twin)  # the same model under another name: exactly "same"
    right = checks.check_clipping_prediction("same", twin, minmax, test)
    assert right and '"same", as you predicted' in repr(right) and "within the noise" in repr(right)
    other = checks.check_clipping_prediction(" Less ", twin, minmax, test)  # case and spaces forgiven
    assert other and 'you predicted "less"' in repr(other)
    clipped = _static(
        fp32,
        folder / "p99.onnx",
        x[:64],
        calibrate_method=CalibrationMethod.Percentile,
        extra_options={"CalibPercentile": 99.0},
    )
    measured = checks.check_clipping_prediction("less", clipped, minmax, test, n=400)
    assert measured and "Your Percentile model against MinMax: agreement" in repr(measured)


def test_check_clipping_prediction_names_each_answer_of_the_wrong_form(classifier, tmp_path):
    fp32, minmax, test, _, _ = classifier
    waiting = checks.check_clipping_prediction(None, None, minmax, test)
    assert not waiting and "answer_a_guess first" in repr(waiting)
    assert "No answer yet" in repr(checks.check_clipping_prediction("less", None, minmax, test))
    assert "one word" in repr(checks.check_clipping_prediction("worse", minmax, minmax, test))
    missing = checks.check_clipping_prediction("less", tmp_path / "x.onnx", minmax, test)
    assert not missing and "does not exist" in repr(missing)
    itself = checks.check_clipping_prediction("less", minmax, minmax, test)
    assert not itself and "MinMax model itself" in repr(itself)
    unquantized = checks.check_clipping_prediction("less", fp32, minmax, test)
    assert not unquantized and "not a static QDQ file" in repr(unquantized)


# ---------------------------------------------------------------------------------------------------
# Exercise B: estimate calibration's memory on the whole pool, then measure it
# ---------------------------------------------------------------------------------------------------
FIGURES = {(50, False): 40.0, (500, False): 220.0, (50, True): 40.0, (500, True): 42.0}  # MB, as 03b measures


def test_check_memory_estimate_passes_a_measurement_near_the_trend_whatever_the_estimate():
    right = checks.check_memory_estimate(420.0, 400.0, FIGURES)  # the line gives 40 + 0.4 * 950 = 420
    assert right and "gives 420 MB at 1,000" in repr(right) and "400 kB per image" in repr(right)
    assert "Your estimate was close." in repr(right)
    kept = checks.check_memory_estimate(220.0, 400.0, FIGURES)
    assert kept and "You kept the 500-image figure" in repr(kept)
    high = checks.check_memory_estimate(2000.0, 400.0, FIGURES)
    assert high and "400% high" in repr(high)


def test_check_memory_estimate_names_each_wrong_answer_without_the_trend():
    assert "answer_b_guess first" in repr(checks.check_memory_estimate(None, 400.0, FIGURES))
    assert "No answer yet" in repr(checks.check_memory_estimate(420.0, None, FIGURES))
    assert "a number of MB" in repr(checks.check_memory_estimate("lots", 400.0, FIGURES))
    assert "positive number" in repr(checks.check_memory_estimate(420.0, -3, FIGURES))
    assert "looks like bytes" in repr(checks.check_memory_estimate(420.0, 4.1e8, FIGURES))
    strided = checks.check_memory_estimate(420.0, 45.0, FIGURES)  # measured with the stride on
    assert not strided and "no CalibStridedMinMax" in repr(strided) and "420" not in repr(strided)


# ---------------------------------------------------------------------------------------------------
# Exercise C: guess early or late, then find the most saturated tensor
# ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def saturating_block(tmp_path_factory):
    from test_kernels import conv_block, u8s8_qdq

    from course_lib import calibration

    folder = tmp_path_factory.mktemp("saturating")
    block = conv_block(folder / "block.onnx", np.random.default_rng(0))
    qdq = u8s8_qdq(block, folder / "block.qdq.onnx")
    x = 3 * np.random.default_rng(5).random((4, 3, 12, 12), dtype=np.float32)  # wider than calibration saw
    values = calibration.activation_values(block, {"x": x}, ["x", "r1", "s"])
    shares = calibration.saturation(calibration.quantized_ranges(qdq), values)
    return qdq, values, shares


def test_check_most_saturated_tensor_passes_the_largest_share_and_answers_the_guess(saturating_block):
    qdq, values, shares = saturating_block
    most = max(shares, key=shares.get)
    where = "early" if list(values).index(most) < len(values) / 2 else "late"
    other = "late" if where == "early" else "early"
    right = checks.check_most_saturated_tensor(where, most, qdq, values)
    assert right and f"a {where} tensor, as you guessed" in repr(right)
    missed = checks.check_most_saturated_tensor(other.upper(), most, qdq, values)
    assert missed and f"not {other} as you guessed" in repr(missed)


def test_check_most_saturated_tensor_names_each_wrong_answer_without_the_answer(saturating_block):
    qdq, values, shares = saturating_block
    assert "answer_c_guess first" in repr(checks.check_most_saturated_tensor(None, None, qdq, values))
    assert "No answer yet" in repr(checks.check_most_saturated_tensor("late", None, qdq, values))
    assert "one word" in repr(checks.check_most_saturated_tensor("middle", "x", qdq, values))
    assert "not a calibrated tensor" in repr(checks.check_most_saturated_tensor("late", "nope", qdq, values))
    most, least = max(shares, key=shares.get), min(shares, key=shares.get)
    assert shares[least] < shares[most]
    wrong = checks.check_most_saturated_tensor("late", least, qdq, values)
    assert not wrong and "take max, not min" in repr(wrong) and gives_away(wrong.message, most) == []
