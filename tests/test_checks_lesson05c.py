"""Lesson 05c's self-checks: each passes the right answer, refuses a wrong one without giving the
expected value away, and, where OpenVINO is not installed, passes with the line that installs it."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest
from test_runtimes import qdq_conv

from course_lib.measure import LatencyComparison
from course_machinery import checks, runtimes


@pytest.fixture(scope="module")
def u8s8_conv(tmp_path_factory):
    """A QDQ convolution with u8 activations, and how many of its convolutions OpenVINO runs on integer
    kernels with f32 pinned (counted here as the lesson's integer_convs counts them)."""
    path = qdq_conv(tmp_path_factory.mktemp("05c") / "u8s8.onnx")
    compiled = (
        runtimes.require_openvino()
        .Core()
        .compile_model(str(path), "CPU", {"INFERENCE_NUM_THREADS": 1, "INFERENCE_PRECISION_HINT": "f32"})
    )
    convs = [lay for lay in runtimes.runtime_layers(compiled) if lay.layer_type == "Convolution"]
    integer = sum(
        lay.runtime_precision in ("u8", "i8") and runtimes.kernel_precision(lay.primitive) in ("u8", "i8", "")
        for lay in convs
    )
    return path, integer, len(convs)


# ---------------------------------------------------------------------------------------------------
# Exercise 1: f32 pinned on the U8S8 file, predicted, then counted
# ---------------------------------------------------------------------------------------------------
def test_pinned_integer_convs_asks_for_the_guess_then_a_count(u8s8_conv):
    path, _, _ = u8s8_conv
    assert "answer_1_guess first" in repr(checks.check_pinned_integer_convs(None, 1, path, 1))
    odd = checks.check_pinned_integer_convs("int8", 1, path, 1)
    assert not odd and '"integer" or "float"' in odd.message
    assert "No answer yet" in repr(checks.check_pinned_integer_convs("integer", None, path, 1))
    assert "whole number" in repr(checks.check_pinned_integer_convs("integer", "all", path, 1))


def test_pinned_integer_convs_passes_the_count_and_grades_the_prediction(u8s8_conv):
    path, integer, convs = u8s8_conv
    right = checks.check_pinned_integer_convs("integer", integer, path, 1)
    assert right and right.message.startswith(f"{integer} of {convs} convolutions")
    other = "float" if integer == convs else "integer"
    assert checks.check_pinned_integer_convs(other, integer, path, 1)  # a missed prediction still passes
    assert "you predicted" in checks.check_pinned_integer_convs(other, integer, path, 1).message


def test_a_wrong_count_is_refused_without_the_answer(u8s8_conv):
    path, integer, _ = u8s8_conv
    wrong = checks.check_pinned_integer_convs("integer", integer + 1, path, 1)  # raises if it leaks the count
    assert not wrong and "integer_convs" in wrong.message


# ---------------------------------------------------------------------------------------------------
# Exercise 2: OpenVINO's U8S8 gain at batch 1 against batch 64
# ---------------------------------------------------------------------------------------------------
def comparison(speedup: float, low: float, high: float, batch: int = 1, baseline: str = "fp32"):
    latency = {name: SimpleNamespace(batch_size=batch) for name in (baseline, "OpenVINO U8S8")}
    return LatencyComparison(baseline, "OpenVINO U8S8", latency, speedup, low, high, 0.9)


AT_64 = comparison(3.0, 2.9, 3.1, batch=64)


def test_batch_one_gain_asks_for_the_guess_and_a_comparison_at_batch_1():
    assert "answer_2_guess first" in repr(checks.check_batch_one_gain(None, comparison(1.7, 1.6, 1.8), AT_64))
    assert '"larger", "smaller" or "same"' in checks.check_batch_one_gain("less", None, AT_64).message
    assert "No answer yet" in repr(checks.check_batch_one_gain("smaller", None, AT_64))
    assert "LatencyComparison" in repr(checks.check_batch_one_gain("smaller", 1.7, AT_64))
    swapped = comparison(0.6, 0.55, 0.65, baseline="OpenVINO fp32")
    assert "first" in checks.check_batch_one_gain("smaller", swapped, AT_64).message
    assert (
        "batch 1"
        in checks.check_batch_one_gain("smaller", comparison(3.0, 2.9, 3.1, batch=64), AT_64).message
    )


@pytest.mark.parametrize(
    ("measured", "actual"),
    [
        ((1.7, 1.6, 1.8), "Smaller"),
        ((3.5, 3.3, 3.7), "Larger"),
        ((3.0, 2.8, 3.2), "Same"),
    ],
)
def test_batch_one_gain_reports_what_was_measured_and_grades_the_prediction(measured, actual):
    found = checks.check_batch_one_gain("smaller", comparison(*measured), AT_64)
    assert found and found.message.startswith(actual)
    graded = "as you predicted" if actual == "Smaller" else "you predicted 'smaller'"
    assert graded in found.message


def test_without_openvino_each_check_says_how_to_install_it(monkeypatch, u8s8_conv):
    monkeypatch.setitem(sys.modules, "openvino", None)
    for result in (
        checks.check_pinned_integer_convs("integer", None, u8s8_conv[0], 1),
        checks.check_batch_one_gain("smaller", None, None),
    ):
        assert result and "pip install openvino" in result.message
