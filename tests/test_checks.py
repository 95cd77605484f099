"""course_lib.checks: each exercise check passes the right answer and teaches on a typical wrong one."""

from __future__ import annotations

import numpy as np

from course_lib import checks

# ---------------------------------------------------------------------------------------------------
# Lesson 01
# ---------------------------------------------------------------------------------------------------


def test_check_scale_zero_point():
    right = checks.check_scale_zero_point(4 / 255, 64, rmin=-1.0, rmax=3.0, dtype="uint8")
    assert right and "z = 64" in repr(right) and repr(right).startswith("✅")

    middle = checks.check_scale_zero_point(4 / 255, 127)
    assert not middle
    assert "your zero point is 127; for uint8 asymmetric on [-1, 3] it should be 64" in middle.message.lower()
    assert "round(qmin - min / scale)" in middle.message and "symmetric convention" in middle.message

    fractional = checks.check_scale_zero_point(4 / 255, 63.75)
    assert not fractional and "must be an integer" in fractional.message

    levels = checks.check_scale_zero_point(4 / 256, 64)
    assert not levels and "number of levels (256)" in levels.message and "qmax - qmin = 255" in levels.message

    sign = checks.check_scale_zero_point(4 / 255, -64)
    assert not sign and "Check the sign" in sign.message
    assert not checks.check_scale_zero_point(None, None)


def test_check_decoded_value():
    right = checks.check_decoded_value(6.35, x=7.0, scale=0.05, zero_point=0, dtype="int8")
    assert right and "clipped" in right.message

    unclipped = checks.check_decoded_value(7.0)
    assert not unclipped and "saturates at 127" in unclipped.message and "[-6.4, 6.35]" in unclipped.message

    code = checks.check_decoded_value(127)
    assert not code and "is a code; decode it" in code.message
    assert not checks.check_decoded_value(140) and "decode it" in checks.check_decoded_value(140).message

    inside = checks.check_decoded_value(0.3, x=0.26, scale=0.1, zero_point=0)
    assert inside and "clipped" not in inside.message


def test_check_accumulator():
    qa, qb = np.array([130, 120, 200, 128], dtype=np.uint8), np.array([5, -3, 10, 77], dtype=np.int8)
    assert checks.check_accumulator(754, qa, 128, qb, 0)

    raw = checks.check_accumulator(int(np.sum(qa.astype(int) * qb.astype(int))), qa, 128, qb, 0)
    assert not raw and "subtract each zero point first" in raw.message

    scaled = checks.check_accumulator(754 * 0.02 * 0.01, qa, 128, qb, 0)
    assert not scaled and "integer sum" in scaled.message

    one_zp = checks.check_accumulator(int(np.sum(qa.astype(int) * (qb.astype(int) - 3))), qa, 128, qb, 3)
    assert not one_zp and "both zero points" in one_zp.message


def test_check_packed_int4_bytes():
    shape = (256, 256, 3, 3)  # 589,824 weights, 72 blocks of 32 per output channel
    assert checks.check_packed_int4_bytes(294_912 + 4 * 256 * 72, shape, 32)

    unpacked = checks.check_packed_int4_bytes(589_824, shape, 32)
    assert not unpacked and "two values in a byte" in unpacked.message

    no_meta = checks.check_packed_int4_bytes(294_912, shape, 32)
    assert not no_meta and "add the metadata" in no_meta.message and "18,432 blocks" in no_meta.message

    one_byte = checks.check_packed_int4_bytes(294_912 + 256 * 72, shape, 32)
    assert not one_byte and "4 bytes, not 1" in one_byte.message

    per_channel = checks.check_packed_int4_bytes(294_912 + 4 * 256, shape, 32)
    assert not per_channel and "one scale per output channel" in per_channel.message

    other = checks.check_packed_int4_bytes(12345, shape, 32)
    assert not other and "expected 368,640" in other.message
