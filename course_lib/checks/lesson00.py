"""Self-checks for lesson 00 (start here)."""

from __future__ import annotations

import numpy as np

from .result import CheckResult


def check_normalised_pixel(answer: float, pixel: int, mean: float, std: float) -> CheckResult:
    """Exercise: the value the model sees for a raw pixel, (pixel / 255 - mean) / std."""
    expected = (pixel / 255 - mean) / std
    if answer is None:
        return CheckResult(False, "No answer yet: replace None with your computation.")
    if np.isclose(answer, expected, atol=1e-4):
        return CheckResult(True, f"Pixel {pixel} reaches the model as {expected:.4f}.")
    hint = ""
    if np.isclose(answer, pixel / 255, atol=1e-4):
        hint = " You scaled to [0, 1] but did not subtract the mean and divide by the std."
    elif np.isclose(answer, (pixel - mean) / std, atol=1e-3):
        hint = " Divide the pixel by 255 first: mean and std are on the [0, 1] scale."
    return CheckResult(False, f"Got {answer:.4f}, expected {expected:.4f}.{hint}")


def check_error_count(answer: int, predictions: np.ndarray, labels: np.ndarray) -> CheckResult:
    """Exercise: how many test images the model gets wrong."""
    expected = int((np.asarray(predictions) != np.asarray(labels)).sum())
    if answer is None:
        return CheckResult(False, "No answer yet: replace None with your computation.")
    if int(answer) == expected:
        return CheckResult(
            True, f"{expected} of {len(labels):,} wrong: accuracy {1 - expected / len(labels):.2%}."
        )
    if int(answer) == len(labels) - expected:
        return CheckResult(False, f"{answer} is the number of *correct* predictions; count the wrong ones.")
    return CheckResult(
        False, f"Got {answer}, expected {expected}. Compare predictions with labels: (preds != labels).sum()."
    )
