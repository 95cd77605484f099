"""Self-checks for lessons 01 (affine encoding) and 01b (bytes and an integer matrix product)."""

from __future__ import annotations

import numpy as np

from .result import CheckResult, invalid, needs_answer, wrong

# Inputs for exercise 1's function: power-of-two scales, so that x / s is exact and the ties are ties.
_FAKE_QUANTIZE_CASES = (  # (values, scale, zero point, qmin, qmax)
    (np.float32([0.25, 0.75, 1.25, -0.25, -0.75, 3.1, -2.2, 40.0, -40.0]), 0.5, 0, -128, 127),
    (np.float32([0.125, 0.375, 1.0, -0.4, 2.6, 9.0, -9.0]), 0.25, 10, 0, 15),
)


def _fake_quantize(x, scale, zero_point, qmin, qmax) -> np.ndarray:
    """QuantizeLinear then DequantizeLinear on the codes qmin..qmax, as ONNX defines them."""
    from course_lib.affine import round_half_to_even

    q = np.clip(round_half_to_even(np.asarray(x, np.float32) / np.float32(scale)) + zero_point, qmin, qmax)
    return np.float32(scale) * (q - zero_point)


@needs_answer("function", hint="write my_fake_quantize and put it in answer_1.")
def check_fake_quantize(function) -> CheckResult:
    """Exercise (write code): a NumPy fake-quantize, x -> s·(clip(round(x/s) + z, qmin, qmax) - z),
    run on ties and on values beyond the range, against ONNX's rule."""
    if not callable(function):
        return invalid(
            f"answer_1 is a {type(function).__name__}; put the function itself in it (no parentheses)."
        )
    for x, scale, zero_point, qmin, qmax in _FAKE_QUANTIZE_CASES:
        try:
            got = np.asarray(function(x.copy(), scale, zero_point, qmin, qmax), dtype=np.float64)
        except Exception as err:  # the learner's code, whatever it raises
            return invalid(f"Your function raised {type(err).__name__}: {err}")
        expected = _fake_quantize(x, scale, zero_point, qmin, qmax)
        if got.shape != expected.shape:
            return invalid(
                f"Your function returned shape {got.shape} for {x.size} values; return one real per value."
            )
        if np.allclose(got, expected, atol=1e-6):
            continue
        ratio = x / np.float32(scale)
        exact = ratio + zero_point
        slips = {
            "It returns the codes; decode them back to reals: s · (q - z).": np.clip(
                np.rint(exact), qmin, qmax
            ),
            "Ties go the wrong way: ONNX rounds them half to even (section 2), as np.rint does; "
            "np.floor(x + 0.5) and math.floor round them up.": scale
            * (np.clip(np.floor(exact + 0.5), qmin, qmax) - zero_point),
            "Values beyond the range must saturate at qmin or qmax before you decode: clip the codes.": scale
            * (np.rint(exact) - zero_point),
            "The zero point goes in twice: add it when you encode, subtract it when you decode.": scale
            * np.clip(np.rint(exact), qmin, qmax),
        }
        said = next(
            (why for why, wrong_values in slips.items() if np.allclose(got, wrong_values, atol=1e-6)), ""
        )
        bad = int(np.flatnonzero(~np.isclose(got, expected, atol=1e-6))[0])
        where = f"at x / s = {ratio[bad]:g} (z = {zero_point})"
        return wrong(
            f"Not ONNX's rule {where}: your function gives {got[bad]:g}. "
            + (said or "Divide by s, round half to even, add z, clip to [qmin, qmax], then decode."),
            float(expected[bad]),
        )
    return CheckResult(
        True,
        "Your function quantizes and decodes as QuantizeLinear and DequantizeLinear do, ties to even and "
        "saturation included.",
    )


@needs_answer("guess", message="Write your guess in answer_2_guess first, before you count.")
@needs_answer("answer", hint="count the distinct codes with np.unique.")
def check_codes_used(guess, answer, rmin: float = 0.0, rmax: float = 6.0, dtype: str = "int8") -> CheckResult:
    """Exercise (predict, then count): how many distinct codes a tensor spread over [rmin, rmax] gets
    on the symmetric grid of `dtype` that ONNX Runtime would choose for that range."""
    from course_lib import affine

    s, z = affine.scale_zero_point(rmin, rmax, dtype, symmetric=True)
    ends = affine.quantize(np.float32([rmin, rmax]), s, z, dtype).astype(int)
    expected = int(ends[1] - ends[0] + 1)
    qmin, qmax = affine.qrange(dtype, narrow=True)
    levels = qmax - qmin + 1
    if isinstance(answer, bool) or not isinstance(answer, int | np.integer):
        return invalid(f"Got {answer!r}; answer with a whole number of codes, e.g. len(np.unique(codes)).")
    if int(answer) != expected:
        hint = " Quantize the dense linspace with the scale and zero point of the question, then count np.unique."
        if int(answer) == expected - 1:
            hint = " Count code 0 too: the values at 0 get it."
        elif int(answer) in (levels, levels + 1):
            hint = " That is the whole grid; quantize the values and count the codes they really get."
        return wrong(f"Got {answer}.{hint}", expected)
    said = "as you predicted" if int(guess) == expected else f"you guessed {guess}"
    return CheckResult(
        True,
        f"{expected} of the grid's {levels} codes ({ends[0]}..{ends[1]}), {said}: the grid spans [-{rmax:g}, "
        f"{rmax:g}] and nothing here is negative, so the codes below {ends[0]} are never used. Asymmetric uint8 "
        f"would spread [{rmin:g}, {rmax:g}] over 256 codes, a step about half as large.",
    )


@needs_answer("guess", message="Write your guess in answer_3_guess first, before you compute.")
@needs_answer("answer", hint="compute the codes with affine.quantize.")
def check_codes(guess, answer, values, scale: float, zero_point: int, dtype: str = "int8") -> CheckResult:
    """Exercise (predict, then check): the codes `affine.quantize` gives `values`; the hints name the
    three usual slips: truncating instead of rounding, ties rounded away from zero, no saturation."""
    from course_lib import affine

    x = np.asarray(values, dtype=np.float32)
    expected = affine.quantize(x, scale, zero_point, dtype).astype(np.int64)
    exact = x / np.float32(scale) + zero_point
    slips = {
        "truncated instead of rounded": np.trunc(exact),
        "rounded ties away from zero (ONNX rounds them to even)": np.sign(exact)
        * np.floor(np.abs(exact) + 0.5),
        f"not saturated to {dtype}'s range": np.rint(exact),
    }

    def matches(candidate) -> bool:
        return np.shape(candidate) == expected.shape and np.array_equal(
            np.asarray(candidate, np.int64), expected
        )

    def slip_of(candidate) -> str:
        return next(
            (what for what, codes in slips.items() if np.array_equal(np.asarray(candidate), codes)), ""
        )

    if np.shape(answer) != expected.shape:
        return invalid(f"Got {np.asarray(answer).tolist()}; give one code per value, {expected.size} in all.")
    if not matches(answer):
        slip = slip_of(answer)
        return wrong(
            "Not the codes affine.quantize gives."
            + (
                f" Those are {slip}."
                if slip
                else " Compute them with affine.quantize, this exercise's scale and zero point."
            ),
            *expected.tolist(),
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


@needs_answer("guess", message="Write your guess in answer_4_guess first, before you measure.")
@needs_answer("answer", hint="measure the SQNR of both ranges for bits 2 to 8.")
def check_clipping_crossover(guess, answer, w, percentile: float = 99.9) -> CheckResult:
    """Exercise (predict, then measure): the largest bit width (2 to 8) at which a symmetric range that
    keeps the central `percentile` % of `w` beats min/max in SQNR."""
    from course_lib.explorers import error_study

    gain = {
        bits: error_study(w, bits, symmetric=True, method="percentile", percentile=percentile).error.sqnr_db
        - error_study(w, bits, symmetric=True).error.sqnr_db
        for bits in range(2, 9)
    }
    wins = [bits for bits, g in gain.items() if g > 0]
    if not wins:
        return invalid(
            "Clipping never beats min/max on this tensor from 2 to 8 bits: the question has no answer here."
        )
    expected = max(wins)
    if isinstance(answer, bool) or not isinstance(answer, int | np.integer) or not 2 <= int(answer) <= 8:
        return invalid(f"Got {answer!r}; answer with a bit width, a whole number from 2 to 8.")
    if int(answer) != expected:
        if gain[int(answer)] <= 0:
            hint = f" At {answer} bits clipping does not win (min/max's SQNR is as high or higher)."
        else:
            hint = f" Clipping wins at {answer} bits, but that is not the widest: measure the wider ones too."
        return wrong(f"Got {answer}.{hint} Compare the two SQNRs at each width.", expected)
    table = ", ".join(f"{bits}: {g:+.1f} dB" for bits, g in gain.items())
    why = (
        "Each bit halves the step, so the bulk's rounding error shrinks with every bit while the clipped "
        "values' error stays: past some width, rounding is too small to be worth the clipping."
    )
    if expected == 8:
        why = (
            "Clipping still wins at 8 bits, the widest asked: on this tensor the largest values sit close "
            "to the bulk, so clipping them costs little at every width."
        )
    said = "and you predicted it" if int(guess) == expected else f"you guessed {guess}"
    return CheckResult(True, f"Up to {expected} bits, {said} (clipping's gain: {table}). {why}")


def _accumulator_cases():
    """Codes for exercise 1 of lesson 01b: (qa, za, qb, zb), zero points that are not 0 on both sides."""
    rng = np.random.default_rng(1)
    qa = rng.integers(0, 256, (3, 64)).astype(np.uint8)
    return (
        (qa, 128, rng.integers(0, 256, (64, 4)).astype(np.uint8), 7),
        (qa, 3, rng.integers(-128, 128, (64, 4)).astype(np.int8), -5),
    )


@needs_answer("function", hint="write corrected_accumulator and put it in answer_1.")
def check_corrected_accumulator(function) -> CheckResult:
    """Exercise (write code), lesson 01b: the int32 accumulator sum_k (qa - za)(qb - zb) computed as
    an integer kernel does, from the raw product qa @ qb and corrections by row and column sums."""
    if not callable(function):
        return invalid(
            f"answer_1 is a {type(function).__name__}; put the function itself in it (no parentheses)."
        )
    for qa, za, qb, zb in _accumulator_cases():
        try:
            got = np.asarray(function(qa.copy(), za, qb.copy(), zb))
        except Exception as err:  # the learner's code, whatever it raises
            return invalid(f"Your function raised {type(err).__name__}: {err}")
        a, b = qa.astype(np.int64), qb.astype(np.int64)
        expected = (a - za) @ (b - zb)
        if got.shape != expected.shape:
            return invalid(
                f"Your function returned shape {got.shape}; the product of A and B has {expected.shape}."
            )
        if np.array_equal(got.astype(np.int64), expected):
            continue
        raw, rows, cols, k = a @ b, a.sum(axis=1, keepdims=True), b.sum(axis=0, keepdims=True), a.shape[1]
        slips = {
            "That is the raw product alone; subtract the corrections for the two zero points.": raw,
            "One term is missing: the two zero points multiply each other K times.": raw
            - zb * rows
            - za * cols,
            "The constant term is added, not subtracted: it comes from two minus signs.": raw
            - zb * rows
            - za * cols
            - k * za * zb,
            "Each zero point multiplies the sums of the other matrix: zb with A's rows, za with B's columns.": raw
            - za * rows
            - zb * cols
            + k * za * zb,
        }
        said = next(
            (why for why, values in slips.items() if np.array_equal(got.astype(np.int64), values)), ""
        )
        if not said and got.dtype.itemsize < 4:
            said = f"Your result is {got.dtype}: cast the codes to int32 before you multiply, or the sums wrap around."
        return wrong(
            "Not the accumulator of the direct form on the check's codes. "
            + (said or "Expand (qa - za)(qb - zb) term by term and sum each over k."),
        )
    return CheckResult(
        True,
        "Your function gives the accumulator of the direct form: one product of the raw codes, then "
        "corrections that need only each row's and each column's sum, so a kernel can compute the weights' "
        "column sums once, ahead of time, and the activations' row sums once per input.",
    )


@needs_answer("guess", message='Write your guess in answer_2_guess first: "more" or "fewer".')
@needs_answer("answer", hint="count the bytes of the 4-bit layout.")
def check_blocked_int4_bytes(guess, answer, shape, block_size: int, symmetric: bool) -> CheckResult:
    """Exercise (predict, then write code), lesson 01b: the bytes of a weight (output channels first)
    in a 4-bit layout with blocks within each channel, each channel padded to whole blocks, values
    packed two per byte, a float32 scale per block and, asymmetric, 4-bit zero points packed two per
    byte within each channel; against int8 per channel (a byte per weight, a scale and a zero point)."""
    said = str(guess).strip().lower()
    if said not in ("more", "fewer"):
        return invalid(f'Got {guess!r}; predict with one word: "more" or "fewer".')
    if isinstance(answer, bool) or not isinstance(answer, int | np.integer):
        return invalid(f"Got {answer!r}; answer with a whole number of bytes.")
    channels = int(shape[0])
    per_channel = int(np.prod(shape[1:]))
    blocks = -(-per_channel // block_size)
    zero_points = 0 if symmetric else -(-blocks // 2)
    expected = channels * (blocks * block_size // 2 + 4 * blocks + zero_points)
    int8 = channels * (per_channel + 5)
    if int(answer) != expected:
        flat = channels * per_channel
        flat_blocks = -(-flat // block_size)
        slips = {
            channels * (-(-per_channel // 2) + 4 * blocks + zero_points): (
                "Pad each channel to a whole number of blocks: the last block of a channel is stored in full."
            ),
            flat_blocks * block_size // 2 + 4 * flat_blocks + (0 if symmetric else -(-flat_blocks // 2)): (
                "The blocks lie within each output channel, not across the whole flattened tensor."
            ),
            channels * (blocks * block_size // 2 + 4 * blocks): (
                "The layout is asymmetric: add the 4-bit zero points, packed two per byte in each channel."
            ),
            channels
            * (blocks * block_size + 4 * blocks + zero_points): "Pack the values: two 4-bit values per byte.",
            channels * (blocks * block_size // 2 + blocks + zero_points): "Each scale is a float32: 4 bytes.",
        }
        slips.pop(expected, None)
        return wrong(
            f"Got {int(answer):,}. "
            + slips.get(int(answer), "Count per channel: values, scales, zero points."),
            expected,
        )
    actual = "more" if expected > int8 else "fewer"
    verdict = "as you predicted" if said == actual else f"not {said} as you predicted"
    return CheckResult(
        True,
        f"{expected:,} bytes against int8 per channel's {int8:,}: {actual}, {verdict}. Each channel holds "
        f"{per_channel} weights, padded to {blocks * block_size}: where a row is shorter than a block, the "
        "padding and the per-block metadata can cost more than the four bits save.",
    )
