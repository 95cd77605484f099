"""Self-checks for lesson 05 (hardware and speed) and its deep dive 05b (measuring traps, a second runtime)."""

from __future__ import annotations

from .result import CheckResult, needs_answer, speedup_interval


def _verdict(comparison) -> str:
    """'faster', 'slower' or 'unsettled': what a ratio's interval says against 1x (fp32's speed)."""
    return {True: "faster", False: "slower", None: "unsettled"}[comparison.speedup_at_least(1.0)]


def check_float_island_time(guess: str, answer: float, s8s8_profile, fp32_profile, ran=None) -> CheckResult:
    """Exercise (predict, then compute): the kernel time of the S8S8 file's float convolutions (`Conv` in
    its profile) over that of all fp32's convolutions (`Conv` in fp32's profile), at the same batch.

    `guess`: "less" or "more", predicted before timing; `answer`: the ratio computed from the two
    `kernels.Profile`s; `ran`: the S8S8 file's `kernels.Kernels`, for the counts in the feedback."""
    said = None if guess is None else str(guess).strip().lower()
    if said is None:
        return CheckResult(False, 'Write your prediction in answer_1_guess first: "less" or "more".')
    if said not in ("less", "more"):
        return CheckResult(False, f'Got {guess!r} as the prediction; write "less" or "more".')
    if answer is None:
        return CheckResult(False, "No answer yet: divide the S8S8 profile's Conv time by fp32's Conv time.")
    island = s8s8_profile.ms_per_run.get("Conv", 0.0)
    whole = fp32_profile.ms_per_run.get("Conv", 0.0)
    if island == 0.0:  # ARM: every S8S8 convolution runs on an integer kernel
        return CheckResult(
            True,
            "This CPU runs every convolution of the S8S8 file on an integer kernel: it has no float island to "
            "price (on ARM, ONNX Runtime fuses int8 activations too).",
        )
    expected = island / whole
    try:
        got = float(answer)
    except (TypeError, ValueError):
        return CheckResult(False, f"Got {answer!r}; give one number, the ratio of the two Conv times.")
    if abs(got - expected) > 0.02 * expected:
        slips = {
            "inverted": (
                whole / island,
                "you divided fp32's time by the S8S8 file's; divide S8S8's by fp32's.",
            ),
            "totals": (
                s8s8_profile.total_ms / fp32_profile.total_ms,
                "that is the ratio of the whole profiles; take the op type `Conv` of each (the float "
                "convolutions), not every op.",
            ),
        }
        for value, hint in slips.values():
            if abs(got - value) <= 0.02 * value:
                return CheckResult(False, f"Got {got:.2f}, expected {expected:.2f}: {hint}")
        return CheckResult(
            False,
            f"Got {got:.2f}, expected {expected:.2f}: read `ms_per_run['Conv']` of each profile and divide the "
            "S8S8 file's by fp32's.",
        )
    actual = "more" if expected > 1 else "less"
    counts = ""
    if ran is not None and ran.compute_count:
        floats = ran.compute_count - ran.integer_count
        counts = f" ({floats} float convolutions against fp32's {fp32_profile.nodes.get('Conv', 0)})"
    qdq = sum(s8s8_profile.ms_per_run.get(op, 0.0) for op in ("QuantizeLinear", "DequantizeLinear"))
    verdict = "as you predicted" if said == actual else f"you predicted {said!r}"
    return CheckResult(
        True,
        f"{expected:.2f}: the S8S8 file's float convolutions{counts} take {actual} kernel time than all of "
        f"fp32's convolutions; {verdict}. They do part of fp32's arithmetic, but unpacked (no NCHWc layout) and "
        f"on weights dequantized every run; its QuantizeLinear and DequantizeLinear nodes add {qdq:.1f} ms per "
        "run on top.",
    )


@needs_answer("guess", message="Write your prediction in answer_2_guess first (a ratio such as 1.5 or 0.5).")
@needs_answer("answer", hint="time the fused session in turn with fp32 (compare_latency).")
def check_fused_s8s8(guess: float, answer, default=None) -> CheckResult:
    """Exercise (predict, then measure): the S8S8 file with `session.qdqisint8allowed = "1"` (every group
    fused into integer ops), timed in turn with fp32.

    `guess`: the ratio (fp32's time over the fused file's) predicted first; `answer`: the measured
    `LatencyComparison`; `default`: the S8S8 file's comparison with ONNX Runtime's default, for the
    feedback."""
    if not hasattr(answer, "speedup_at_least"):
        return CheckResult(
            False, f"Got {type(answer).__name__}; give the LatencyComparison that compare_latency returns."
        )
    if answer.baseline != "fp32" and "fp32" in answer.latency:
        return CheckResult(
            False, "Put fp32 first in the dict you time, so the ratio is fp32's time over S8S8's."
        )
    measured, verdict = speedup_interval(answer), _verdict(answer)
    g = float(guess)
    if answer.speedup_low <= g <= answer.speedup_high:
        said = f"your prediction, {g:g}x, is inside the interval"
    elif (g >= 1) == (verdict == "faster") and verdict != "unsettled":
        said = f"your prediction, {g:g}x, was on the right side of 1x"
    else:
        said = f"you predicted {g:g}x"
    beside = (
        f" ONNX Runtime's default for the same file ran at {speedup_interval(default)}." if default else ""
    )
    why = {
        "slower": " Every convolution now runs on an integer kernel, and that is what costs: on x86, MLAS's "
        "symmetric convolution kernels take uint8 activations only, and it sets a vectorised S8S8 matrix "
        "product only for CPUs with AVX-VNNI-INT8 (platform.cpp), so the fused S8S8 convolutions take a "
        "generic path. Integer coverage is not speed: the kernel behind an integer op decides.",
        "faster": " This CPU has a fast S8S8 kernel for them (ARM's dot product, where this is the default, or "
        "x86 with AVX-VNNI-INT8): fusing paid.",
        "unsettled": " The interval reaches both sides of 1x: time again with more runs to settle it.",
    }[verdict]
    return CheckResult(
        True,
        f"{verdict.capitalize()}: the fused S8S8 file ran at {measured} fp32's speed; {said}.{beside}{why}",
    )


@needs_answer("guess", message='Write your prediction in answer_1_guess first: "above", "below" or "inside".')
@needs_answer("answer", hint='where did the careless ratio land? "above", "below" or "inside".')
def check_careless_swap(
    guess: str, answer: str, careless: float, careful_low: float, careful_high: float
) -> CheckResult:
    """Exercise (predict, then measure, lesson 05b): the careless loop with the busy process running
    while INT8 is timed instead of fp32. `guess` and `answer`: "above", "below" or "inside" the careful
    loop's interval (`careful_low`..`careful_high`); `careless`: the ratio that loop gave."""
    words = ("above", "below", "inside")
    said, predicted = str(answer).strip().lower(), str(guess).strip().lower()
    if said not in words or predicted not in words:
        return CheckResult(False, f'Got {guess!r} and {answer!r}; each must be "above", "below" or "inside".')
    expected = "above" if careless > careful_high else "below" if careless < careful_low else "inside"
    where = f"{careless:.2f}x against the careful {careful_low:.2f}–{careful_high:.2f}"
    if said != expected:
        return CheckResult(False, f"Got {answer!r}, expected {expected!r}: {where}.")
    note = "as you predicted" if predicted == expected else f"you predicted {predicted!r}"
    why = (
        " The load now slows INT8's runs, the denominator of fp32's time over INT8's, so the ratio drops: the "
        "same slip that inflated INT8's gain now hides it. Its direction says only when the load came."
        if expected == "below"
        else " The load did not slow INT8's runs enough to move the ratio out of the interval here; on a busier "
        "machine, or a longer load, it would."
        if expected == "inside"
        else " The ratio rose although the load slowed INT8: look at both means, something else changed too."
    )
    return CheckResult(True, f"{expected.capitalize()} ({where}); {note}.{why}")


@needs_answer("guess", message="Write your prediction in answer_2_guess first (a number).")
@needs_answer("answer", hint="compute the intensity with measure.weight_work.")
def check_intensity(guess: float, answer: float, path, input_shapes) -> CheckResult:
    """Exercise (predict, then compute, lesson 05b): multiply-adds per byte of INT8 weights for one run
    of the float graph at `path` on inputs of `input_shapes`, as `measure.weight_work` counts them."""
    from ..measure import weight_work

    work = weight_work(path, input_shapes)
    expected, got = work.intensity(8), float(answer)
    if abs(got - expected) > 0.01 * expected:
        if abs(got - work.intensity(32)) <= 0.01 * work.intensity(32):
            return CheckResult(
                False,
                f"Got {got:,.1f}: that is per byte of fp32 weights; INT8 weights take 8 bits: intensity(8).",
            )
        return CheckResult(False, f"Got {got:,.1f}, expected {expected:,.1f}: weight_work(...).intensity(8).")
    off = abs(float(guess) - expected) / expected
    close = "within a tenth" if off <= 0.1 else f"{off:.0%} off"
    return CheckResult(
        True,
        f"{expected:,.1f} multiply-adds per byte of INT8 weights at {input_shapes}; your prediction, "
        f"{float(guess):,.1f}, was {close}. A convolution uses each weight once per output position and image, "
        "so the intensity grows in proportion to the batch: still low at batch 8, where reading the weights "
        "weighs more than the arithmetic.",
    )


def _bootstrap(a, b, stat, low_q: float, high_q: float, paired: bool = True, resamples: int = 20000):
    """Percentiles of stat(resampled a) / stat(resampled b), resampling pairs (or each side apart)."""
    import numpy as np

    rng = np.random.default_rng(20260)
    n = len(a)
    ia = rng.integers(0, n, size=(resamples, n))
    ib = ia if paired else rng.integers(0, n, size=(resamples, n))
    ratios = stat(a[ia], axis=1) / stat(b[ib], axis=1)
    return tuple(float(v) for v in np.percentile(ratios, [low_q, high_q]))


@needs_answer("answer", hint="compute (low, high) from the two arrays of timed runs.")
def check_bootstrap_interval(answer, fp32_ms, int8_ms, confidence: float = 0.9) -> CheckResult:
    """Exercise (write code): the paired-bootstrap 90% interval of the ratio of medians, fp32 over INT8,
    from the raw timed runs (milliseconds, run i of each taken in the same turn of the loop)."""
    import numpy as np

    a, b = np.asarray(fp32_ms, dtype=float), np.asarray(int8_ms, dtype=float)
    try:
        got = tuple(float(v) for v in np.asarray(answer, dtype=float).reshape(-1))
    except (TypeError, ValueError):
        got = ()
    if len(got) != 2:
        return CheckResult(
            False,
            f"Got {answer!r}; give two numbers, (low, high): the 5th and 95th percentiles of the resampled "
            "ratios of medians.",
        )
    if got[0] > got[1]:
        return CheckResult(False, f"Got {got[0]:.3f} > {got[1]:.3f}; give (low, high), the low end first.")
    tail = 100 * (1 - confidence) / 2
    right = _bootstrap(a, b, np.median, tail, 100 - tail)
    width = right[1] - right[0]
    tolerance = max(0.01, 0.15 * width)
    median_ratio = float(np.median(a) / np.median(b))
    candidates = {
        "right": right,
        "inverted": (1 / right[1], 1 / right[0]),
        "means": _bootstrap(a, b, np.mean, tail, 100 - tail),
        "per-run ratios": tuple(float(v) for v in np.percentile(a / b, [tail, 100 - tail])),
        "unpaired": _bootstrap(a, b, np.median, tail, 100 - tail, paired=False),
        "95%": _bootstrap(a, b, np.median, 2.5, 97.5),
    }
    distance = {name: max(abs(got[0] - c[0]), abs(got[1] - c[1])) for name, c in candidates.items()}
    shown = f"({right[0]:.3f}, {right[1]:.3f})"
    if distance["right"] <= tolerance:
        return CheckResult(
            True,
            f"({got[0]:.3f}, {got[1]:.3f}) against the check's {shown}, with {len(a)} runs of each: a new "
            f"timing of this pair would give a ratio of medians ({median_ratio:.2f}x here) inside about that "
            "range, nine times in ten. Bootstrap intervals move a little with the random draws; this one is "
            "close enough.",
        )
    hints = {
        "inverted": "you divided INT8's median by fp32's; the ratio is fp32's time over INT8's (2.0 means "
        "INT8 takes half the time).",
        "means": "you took the ratio of means; take the median of each resample, which a few slow runs do not "
        "move.",
        "per-run ratios": "you took percentiles of the run-by-run ratios: that is the spread of single runs, not "
        "how far the ratio of medians could move. Resample the pairs, and take the ratio of medians of each "
        "resample.",
        "unpaired": "you resampled the two arrays independently; draw the same indices for both, since run i of "
        "each was taken at nearly the same moment.",
        "95%": "that is a 95% interval (2.5th to 97.5th percentiles); the course's is 90%: the 5th and 95th.",
    }
    nearest = min((name for name in candidates if name != "right"), key=distance.get)
    if distance[nearest] <= tolerance and distance[nearest] < distance["right"]:
        return CheckResult(
            False, f"Got ({got[0]:.3f}, {got[1]:.3f}), expected about {shown}: {hints[nearest]}"
        )
    return CheckResult(
        False,
        f"Got ({got[0]:.3f}, {got[1]:.3f}), expected about {shown}. Draw {len(a)} indices with replacement "
        "(the same for both arrays), take np.median of each side and their ratio; repeat a couple of thousand "
        "times; the interval is the 5th and 95th percentiles of those ratios.",
    )
