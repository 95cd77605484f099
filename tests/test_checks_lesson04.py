"""Lesson 04's self-checks: each passes the right answer and teaches on each wrong one it recognises
(lesson 04b's are in tests/test_checks_lesson04b.py).

Lesson 04's capstone check is tested in tests/test_checks.py."""

from __future__ import annotations

import math

import numpy as np

from course_lib import measure
from course_machinery import checks

# ---------------------------------------------------------------------------------------------------
# Exercise 1: how many images an unpaired comparison would need
# ---------------------------------------------------------------------------------------------------


def _parity(only_reference: int, only_candidate: int, n: int = 10_000, both_wrong: int = 800):
    """A parity on n labelled rows: `only_reference` rows only the reference gets right, `only_candidate`
    only the candidate, `both_wrong` both wrong with the same answer, the rest both right."""
    labels = np.zeros(n, dtype=int)
    ref, cand = np.zeros((n, 3)), np.zeros((n, 3))
    ref[:, 0] = cand[:, 0] = 1.0  # both right
    rows = np.arange(n)
    a, b, c = only_reference, only_reference + only_candidate, only_reference + only_candidate + both_wrong
    cand[rows[:a], 0], cand[rows[:a], 1] = 0.0, 1.0  # only the reference right
    ref[rows[a:b], 0], ref[rows[a:b], 2] = 0.0, 1.0  # only the candidate right
    ref[rows[b:c], 0], ref[rows[b:c], 1] = 0.0, 1.0  # both wrong, the same answer
    cand[rows[b:c], 0], cand[rows[b:c], 1] = 0.0, 1.0
    return measure.parity(ref, cand, labels)


def _images_needed(p) -> tuple[float, float, float]:
    """(images the unpaired comparison needs, unpaired half-width, paired half-width), in points."""
    low, high = p.accuracy_change_interval()
    pr, pc, n = p.reference_accuracy, p.candidate_accuracy, p.labelled
    unpaired = 100 * 1.96 * math.sqrt((pr * (1 - pr) + pc * (1 - pc)) / n)
    paired = (high - low) / 2
    return n * (unpaired / paired) ** 2, unpaired, paired


NOISE = _parity(17, 21)  # a production choice: 17 broken, 21 fixed
REAL = _parity(400, 148)  # weak calibration: a real loss


def test_check_unpaired_images_passes_the_right_count_and_reads_the_guess():
    needed, unpaired, paired = _images_needed(NOISE)
    right = checks.check_unpaired_images(needed, needed, NOISE)
    assert right and right.message.startswith("Right: about") and "within a factor of two" in repr(right)
    assert "the 38 images on which exactly one model is right" in repr(right)
    assert checks.check_unpaired_images(20_000, needed * 1.02, NOISE)  # a rounding slip is forgiven
    far_off = checks.check_unpaired_images(needed / 50, needed, NOISE)
    assert far_off and "under by a factor of 50" in repr(far_off)
    assert checks.check_unpaired_images(1e6, _images_needed(REAL)[0], REAL)


def test_check_unpaired_images_names_each_slip_without_the_answer():
    needed, unpaired, paired = _images_needed(NOISE)
    n, ratio = NOISE.labelled, unpaired / paired
    slips = {
        n * ratio: "square root of the number of images",
        ratio**2: "multiply by the number of test images",
        needed * 1e4: "in fractions and the other in points",
        n
        * (100 * 1.96 * math.sqrt(NOISE.reference_accuracy * (1 - NOISE.reference_accuracy) / n) / paired)
        ** 2: "adds both their variances",
        12_345: "square the ratio",
    }
    for answer, hint in slips.items():
        result = checks.check_unpaired_images(needed, answer, NOISE)  # wrong() raises if it gave the count
        assert not result and hint in repr(result), (answer, result)


def test_check_unpaired_images_wants_a_guess_then_a_number():
    assert "answer_1_guess first" in repr(checks.check_unpaired_images(None, 5.0, NOISE))
    assert "No answer yet" in repr(checks.check_unpaired_images(1000, None, NOISE))
    assert "a number of images" in repr(checks.check_unpaired_images(1000, "many", NOISE))
    assert "a number of images" in repr(checks.check_unpaired_images("many", 5.0, NOISE))
    same = _parity(0, 0)  # no image is right in one model only: the paired interval has no width
    assert "no width" in repr(checks.check_unpaired_images(1000, 5.0, same))


# ---------------------------------------------------------------------------------------------------
# Exercise 2: the prediction of which variants fail, written before the verdicts
# ---------------------------------------------------------------------------------------------------
def _verdicts(failing: dict[str, str]) -> dict:
    """Lesson 04's four variants: those in `failing` fail with its advice, the others pass."""
    from course_lib.measure import Verdict

    names = ["per-channel, reduce_range", "per-channel", "per-tensor", "weak calibration"]
    verdicts = {name: Verdict(True, 0.1, 0.997, "passes") for name in names}
    verdicts.update({name: Verdict(False, 3.1, 0.93, advice) for name, advice in failing.items()})
    return verdicts


# As measured on an AVX2 CPU without VNNI: full 8-bit per-channel weights saturate, weak calibration fails.
WEAK = {"weak calibration": "drop over 3 points: per_channel is often missing"}
NO_VNNI = _verdicts({"per-channel": "agreement 93.00% not above 99%", **WEAK})
VNNI = _verdicts(WEAK)  # on a VNNI CPU nothing saturates: only the weak calibration fails
PLANTED = {"per-channel": "U8S8 saturation", "weak calibration": "calibration data"}


def test_check_failing_variants_passes_the_measured_set_with_its_causes():
    right = checks.check_failing_variants(PLANTED, NO_VNNI, saturates=True)
    assert right and "can saturate" in repr(right) and "On a CPU with VNNI the answer differs" in repr(right)
    assert "is only a first guess" in repr(right)  # the rule's advice names per_channel, not the data
    on_vnni = checks.check_failing_variants({"weak calibration": "Calibration"}, VNNI, saturates=False)
    assert on_vnni and "cannot saturate" in repr(on_vnni)  # the earlier name of the reason still counts
    assert "without VNNI the answer can differ" in repr(on_vnni)
    assert checks.check_failing_variants({}, _verdicts({}), saturates=True)  # none fails, none predicted
    assert checks.check_failing_variants("none fails", _verdicts({}), saturates=False)


def test_check_failing_variants_says_how_a_wrong_set_misses_without_naming_the_failures():
    missed = checks.check_failing_variants({"weak calibration": "calibration data"}, NO_VNNI, saturates=True)
    assert not missed and "1 that fails here is missing" in repr(missed) and "can saturate" in repr(missed)
    assert "U8S8 saturation" not in repr(missed)
    extra = {**PLANTED, "per-tensor": "per-tensor scale"}
    too_many = checks.check_failing_variants(extra, NO_VNNI, saturates=True)
    assert not too_many and "1 of the variants you predicted to fail passes here" in repr(too_many)
    vnni_guess = checks.check_failing_variants(PLANTED, VNNI, saturates=False)  # the no-VNNI answer on VNNI
    assert not vnni_guess and "passes here" in repr(vnni_guess) and "cannot saturate" in repr(vnni_guess)
    nothing = checks.check_failing_variants({}, NO_VNNI, saturates=True)
    assert not nothing and "2 that fail here are missing" in repr(nothing)
    assert "per-channel" not in repr(nothing) and "weak calibration" not in repr(nothing)


def test_check_failing_variants_names_a_right_set_with_a_wrong_reason():
    coarse = {"per-channel": "per-tensor scale", "weak calibration": "calibration data"}
    wrong = checks.check_failing_variants(coarse, NO_VNNI, saturates=True)
    assert not wrong and "Right variants, but the reason is not right for per-channel." in repr(wrong)
    swapped = {"per-channel": "calibration data", "weak calibration": "U8S8 saturation"}
    both = checks.check_failing_variants(swapped, NO_VNNI, saturates=True)
    assert not both and "not right for per-channel, weak calibration" in repr(both)
    # On a VNNI CPU the reduce_range variant is the one with a changed setting: 7 bits, not saturation.
    reduced = _verdicts({"per-channel, reduce_range": "drop over 0.5 points: not accepted"})
    vnni = checks.check_failing_variants({"per-channel, reduce_range": "U8S8 saturation"}, reduced, False)
    assert not vnni and "cannot saturate" in repr(vnni)
    assert checks.check_failing_variants({"per-channel, reduce_range": "7-bit weights"}, reduced, False)


def test_check_failing_variants_wants_a_dict_of_known_variants_and_reasons():
    assert "No answer yet" in repr(checks.check_failing_variants(None, NO_VNNI, saturates=True))
    assert "write a dict" in repr(checks.check_failing_variants(["per-channel"], NO_VNNI, saturates=True))
    unknown = checks.check_failing_variants({"per channel": "U8S8 saturation"}, NO_VNNI, saturates=True)
    assert not unknown and "not one of the variants" in repr(unknown)
    reason = checks.check_failing_variants({"per-channel": "overflow"}, NO_VNNI, saturates=True)
    assert not reason and "not one of the reasons" in repr(reason) and "'U8S8 saturation'" in repr(reason)


# ---------------------------------------------------------------------------------------------------
# Exercise 3 (capstone): the learner is told which answer to set
# ---------------------------------------------------------------------------------------------------
def test_check_capstone_asks_for_the_capstones_own_answer(tmp_path):
    waiting = checks.check_capstone(None, tmp_path / "fp32.onnx", np.zeros((1, 4)), np.zeros(1))
    assert not waiting and "set answer_3 to the path" in repr(waiting)
