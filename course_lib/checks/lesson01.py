"""Self-checks for lesson 01 (affine encoding)."""

from __future__ import annotations

import numpy as np

from .result import CheckResult, needs_answer


@needs_answer("scale", "zero_point", hint="replace None with your computation.")
def check_scale_zero_point(
    scale: float, zero_point: int, rmin: float = -1.0, rmax: float = 3.0, dtype: str = "uint8"
) -> CheckResult:
    """Exercise: the asymmetric scale and zero point that map [rmin, rmax] onto `dtype`."""
    from .. import affine

    qmin, qmax = affine.qrange(dtype)
    expected_scale, expected_zp = affine.scale_zero_point(rmin, rmax, dtype)
    expected_scale, expected_zp = float(expected_scale), int(expected_zp)
    where = f"{dtype} asymmetric on [{rmin:g}, {rmax:g}]"
    if not np.isclose(float(scale), expected_scale, rtol=1e-4):
        hint = ""
        if np.isclose(float(scale), (rmax - rmin) / (qmax - qmin + 1), rtol=1e-4):
            hint = (
                f" You divided by the number of levels ({qmax - qmin + 1}); divide by the number of "
                f"steps between them, qmax - qmin = {qmax - qmin}."
            )
        return CheckResult(
            False,
            f"Your scale is {float(scale):.6g}; for {where} it should be {expected_scale:.6g}: "
            f"s = (max - min) / (qmax - qmin) = ({rmax:g} - ({rmin:g})) / ({qmax} - {qmin}).{hint}",
        )
    if float(zero_point) == expected_zp:
        return CheckResult(
            True,
            f"s = {expected_scale:.6g}, z = {expected_zp}: real 0 is the code {expected_zp} and decodes to "
            f"exactly {float(affine.dequantize(np.array([expected_zp]), expected_scale, expected_zp)[0])}.",
        )
    exact = qmin - rmin / expected_scale
    hint = f" z = round(qmin - min / scale) = round({qmin} - ({rmin:g}) / {expected_scale:.6g}) = round({exact:.4g})."
    if float(zero_point) != round(float(zero_point)):
        hint += (
            " The zero point must be an integer: it is the code that stands for real 0, so that padding "
            "and ReLU zeros come back as exactly 0."
        )
    elif int(zero_point) == -expected_zp:
        hint += " Check the sign: the minimum is negative, so -min / scale is positive."
    elif int(zero_point) in ((qmin + qmax) // 2, (qmin + qmax + 1) // 2):
        hint += " The middle of the codes is the symmetric convention; asymmetric places 0 where the range puts it."
    return CheckResult(
        False, f"Your zero point is {zero_point}; for {where} it should be {expected_zp}.{hint}"
    )


@needs_answer("answer", hint="replace None with your computation.")
def check_decoded_value(
    answer: float, x: float = 7.0, scale: float = 0.05, zero_point: int = 0, dtype: str = "int8"
) -> CheckResult:
    """Exercise: what x comes back as after quantize and dequantize (it may be clipped)."""
    from .. import affine

    q = affine.quantize(np.float32([x]), scale, zero_point, dtype)
    expected = float(affine.dequantize(q, scale, zero_point)[0])
    clipped = bool(affine.clipped_mask(np.float32([x]), scale, zero_point, dtype)[0])
    lo, hi = affine.representable_range(scale, zero_point, dtype)
    qmin, qmax = affine.qrange(dtype)
    if np.isclose(float(answer), expected, atol=1e-5):
        return CheckResult(
            True,
            f"{x:g} comes back as {expected:.6g} (code {int(q[0])}); the error is {abs(x - expected):.4g}"
            + (", far more than half a step: it was clipped." if clipped else "."),
        )
    hint = ""
    unclipped = round(x / scale) + zero_point
    if np.isclose(float(answer), x, atol=1e-5):
        hint = (
            f" x / s + z = {x / scale + zero_point:g} is beyond qmax = {qmax}, so the code saturates at "
            f"{int(q[0])}: {dtype} with this scale covers only [{float(lo):g}, {float(hi):g}]."
        )
    elif float(answer) in (unclipped, float(q[0])):
        hint = f" {answer:g} is a code; decode it: x̂ = s · (q - z), with q clipped to [{qmin}, {qmax}]."
    return CheckResult(False, f"Got {answer:g}, expected {expected:.6g}.{hint}")


@needs_answer("guess", message="Write your guess in answer_5_guess first, before you compute.")
@needs_answer("answer", hint="compute the codes with affine.quantize.")
def check_codes(guess, answer, values, scale: float, zero_point: int, dtype: str = "int8") -> CheckResult:
    """Exercise (predict, then check): the codes `affine.quantize` gives `values`; the hints name the
    three usual slips: truncating instead of rounding, ties rounded away from zero, no saturation."""
    from .. import affine

    x = np.asarray(values, dtype=np.float32)
    expected = affine.quantize(x, scale, zero_point, dtype).astype(np.int64)
    qmin, qmax = affine.qrange(dtype)
    exact = x / np.float32(scale) + zero_point
    slips = {
        "truncated instead of rounded": np.trunc(exact),
        "rounded ties away from zero (ONNX rounds them to even)": np.sign(exact)
        * np.floor(np.abs(exact) + 0.5),
        f"not saturated to [{qmin}, {qmax}]": np.rint(exact),
    }

    def matches(candidate) -> bool:
        return np.shape(candidate) == expected.shape and np.array_equal(
            np.asarray(candidate, np.int64), expected
        )

    def slip_of(candidate) -> str:
        return next(
            (what for what, codes in slips.items() if np.array_equal(np.asarray(candidate), codes)), ""
        )

    if not matches(answer):
        slip = slip_of(answer)
        return CheckResult(
            False,
            f"Got {np.asarray(answer).tolist()}, expected {expected.tolist()}."
            + (f" Those are {slip}." if slip else ""),
        )
    if matches(guess):
        return CheckResult(True, f"Codes {expected.tolist()}, and you predicted them.")
    slip = slip_of(guess)
    return CheckResult(
        True,
        f"Codes {expected.tolist()}; you guessed {np.asarray(guess).tolist()}"
        + (
            f": {slip}."
            if slip
            else ". Compare them value by value: x / s + z, rounded half to even, saturated."
        ),
    )


@needs_answer("answer", hint="replace None with your computation.")
def check_accumulator(answer: int, qa, a_zero_point: int, qb, b_zero_point: int) -> CheckResult:
    """Exercise: the int32 accumulator of a quantized dot product, sum((qa - za) * (qb - zb))."""
    qa, qb = np.asarray(qa, dtype=np.int64), np.asarray(qb, dtype=np.int64)
    expected = int(np.sum((qa - a_zero_point) * (qb - b_zero_point)))
    if float(answer) != round(float(answer)):
        return CheckResult(
            False,
            f"Got {answer}: the accumulator is an integer sum of integer products ({expected}); "
            "multiply by the scales only afterwards, when you rescale.",
        )
    if int(answer) == expected:
        return CheckResult(
            True,
            f"{expected}: zero points subtracted, products summed in int32. The real value is "
            f"s_a · s_b · {expected}.",
        )
    hint = ""
    if int(answer) == int(np.sum(qa * qb)):
        hint = " You multiplied the raw codes: subtract each zero point first, (qa - za) · (qb - zb)."
    elif int(answer) == int(np.sum((qa - a_zero_point) * qb)) or int(answer) == int(
        np.sum(qa * (qb - b_zero_point))
    ):
        hint = " Subtract both zero points, the activation's and the weight's."
    return CheckResult(False, f"Got {answer}, expected {expected}.{hint}")


@needs_answer("answer", hint="replace None with your computation.")
def check_packed_int4_bytes(answer: int, shape: tuple[int, ...], block_size: int = 32) -> CheckResult:
    """Exercise: bytes of a weight (output channels first) stored as symmetric int4, packed two per
    byte, with one float32 scale per block of `block_size` values within each output channel."""
    n = int(np.prod(shape))
    per_channel = n // shape[0]
    n_blocks = shape[0] * -(-per_channel // block_size)
    payload, scales = -(-n // 2), 4 * n_blocks
    expected = payload + scales
    if int(answer) == expected:
        return CheckResult(
            True,
            f"{expected:,} bytes: {payload:,} of packed int4 values and {scales:,} of scales "
            f"({n_blocks:,} blocks × 4 bytes), that is {100 * scales / payload:.1f}% on top of the payload.",
        )
    hints = {
        n: "That is one byte per value, an int4 simulation held in int8; packing puts two values in a byte.",
        n + scales: "Right metadata, but pack the values: two 4-bit values per byte.",
        payload: f"Right payload; now add the metadata: one float32 scale (4 bytes) for each of the {n_blocks:,} blocks.",
        payload + n_blocks: "Each scale is a float32: 4 bytes, not 1.",
        payload
        + scales
        + n_blocks: "Symmetric int4 stores no zero points (they are all 0); count the scales only.",
        payload
        + 4
        * shape[0]: f"That is one scale per output channel; blocks of {block_size} give {n_blocks:,} scales.",
    }
    return CheckResult(False, f"Got {answer:,}, expected {expected:,}. " + hints.get(int(answer), ""))


@needs_answer("guess", message="Write your guess in answer_6_guess first, before you measure.")
@needs_answer("answer", hint="measure the SQNR of both ranges for bits 2 to 8.")
def check_clipping_crossover(guess, answer, w, percentile: float = 99.9) -> CheckResult:
    """Exercise (predict, then check): the largest bit width (2 to 8) at which a symmetric range that
    keeps the central `percentile` % of `w` beats min/max in SQNR."""
    from ..explorers import error_study

    gain = {
        bits: error_study(w, bits, symmetric=True, method="percentile", percentile=percentile).error.sqnr_db
        - error_study(w, bits, symmetric=True).error.sqnr_db
        for bits in range(2, 9)
    }
    wins = [bits for bits, g in gain.items() if g > 0]
    expected = max(wins) if wins else None
    table = ", ".join(f"{bits}: {g:+.1f} dB" for bits, g in gain.items())
    if expected is None:
        return CheckResult(False, f"Clipping never wins on this tensor ({table}): no bit width answers.")
    if int(answer) != expected:
        hint = ""
        if int(answer) == expected + 1:
            hint = " That is the first bit width where min/max wins; the question asks for the last where clipping wins."
        elif int(answer) == min(wins):
            hint = " That is the smallest bit width where clipping wins; the question asks for the largest."
        return CheckResult(
            False, f"Got {answer}; clipping beats min/max up to {expected} bits ({table}).{hint}"
        )
    why = (
        "Each bit halves the step, so the bulk's rounding error shrinks with every bit while the clipped "
        "values' error stays: past some width, rounding is too small to be worth the clipping."
    )
    if expected == 8:  # no crossover up to 8 bits on these weights
        import numpy as np

        spread = float(np.abs(w).max() / np.percentile(np.abs(w), percentile))
        why = (
            f"On these weights clipping still wins at 8 bits, the widest asked ({gain[8]:+.2f} dB): the "
            f"largest |w| is only {spread:.2f}x the {percentile}th percentile, so clipping barely moves the "
            "range and costs the few clipped weights little, at every width. Where the largest weights sit "
            "far from the bulk, the gain is large at few bits and turns into a loss at more: each bit halves "
            "the step, and the clipped weights' error stays."
        )
    if int(guess) == expected:
        return CheckResult(True, f"Up to {expected} bits, and you predicted it ({table}). {why}")
    return CheckResult(True, f"Up to {expected} bits; you guessed {guess} ({table}). {why}")
