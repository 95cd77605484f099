"""Self-checks for lesson 05 (hardware and speed) and its deep dive 05b (measuring traps)."""

from __future__ import annotations

from .result import CheckResult, invalid, needs_answer, speedup_interval, wrong


def _verdict(comparison) -> str:
    """'faster', 'slower' or 'unsettled': what a ratio's interval says against 1x (fp32's speed)."""
    return {True: "faster", False: "slower", None: "unsettled"}[comparison.speedup_at_least(1.0)]


def check_float_island_time(guess: str, answer: float, s8s8_profile, fp32_profile, ran=None) -> CheckResult:
    """Exercise (predict, then compute): the kernel time of the S8S8 file's float convolutions (`Conv` in
    its profile) over that of all fp32's convolutions (`Conv` in fp32's profile), at the same batch.

    `guess`: "less" or "more", predicted before timing; `answer`: the ratio computed from the two
    `kernels.Profile`s (0 where the CPU runs no float convolution); `ran`: the S8S8 file's
    `kernels.Kernels`, for the counts in the feedback."""
    said = None if guess is None else str(guess).strip().lower()
    if said is None:
        return invalid('Write your prediction in answer_1_guess first: "less" or "more".')
    if said not in ("less", "more"):
        return invalid(f'Got {guess!r} as the prediction; write "less" or "more".')
    if answer is None:
        return invalid("No answer yet: divide the S8S8 profile's Conv time by fp32's Conv time.")
    try:
        got = float(answer)
    except (TypeError, ValueError):
        return invalid(f"Got {answer!r}; give one number, the ratio of the two Conv times.")
    island = s8s8_profile.ms_per_run.get("Conv", 0.0)
    whole = fp32_profile.ms_per_run.get("Conv", 0.0)
    if island == 0.0:  # ARM: every S8S8 convolution runs on an integer kernel
        if got != 0.0:
            return wrong(
                "The S8S8 profile has no `Conv` time on this CPU: read it with ms_per_run.get('Conv', 0.0).",
                0.0,
            )
        return CheckResult(
            True,
            "This CPU runs every convolution of the S8S8 file on an integer kernel: it has no float island to "
            "price (on ARM, ONNX Runtime fuses int8 activations too).",
        )
    expected = island / whole
    if abs(got - expected) > 0.02 * expected:
        slips = (
            (whole / island, "you divided fp32's time by the S8S8 file's; divide S8S8's by fp32's."),
            (
                s8s8_profile.total_ms / fp32_profile.total_ms,
                "that is the ratio of the whole profiles; take the op type `Conv` of each (the float "
                "convolutions), not every op.",
            ),
        )
        for value, hint in slips:
            if abs(got - value) <= 0.02 * value:
                return wrong(f"Not the check's ratio: {hint}", expected)
        return wrong(
            "Not the check's ratio: read `ms_per_run['Conv']` of each profile and divide the S8S8 file's by fp32's.",
            expected,
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
        return invalid(
            f"Got {type(answer).__name__}; give the LatencyComparison that compare_latency returns."
        )
    if answer.baseline != "fp32" and "fp32" in answer.latency:
        return invalid("Put fp32 first in the dict you time, so the ratio is fp32's time over S8S8's.")
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
        return invalid(f'Got {guess!r} and {answer!r}; each must be "above", "below" or "inside".')
    expected = "above" if careless > careful_high else "below" if careless < careful_low else "inside"
    where = f"{careless:.2f}x against the careful {careful_low:.2f}–{careful_high:.2f}"
    if said != expected:
        return wrong(
            f"Got {answer!r}, which is not where the careless ratio landed: set the ratio the cell printed "
            "beside the two ends of the careful loop's interval (`careful.speedup_low`, `careful.speedup_high`).",
            expected,
        )
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
    from course_lib.measure import weight_work

    work = weight_work(path, input_shapes)
    try:
        got = float(answer)
    except (TypeError, ValueError):
        return invalid(f"Got {answer!r}; give one number, the multiply-adds per byte of INT8 weights.")
    expected = work.intensity(8)
    if abs(got - expected) > 0.01 * expected:
        if abs(got - work.intensity(32)) <= 0.01 * work.intensity(32):
            return wrong(
                f"Got {got:,.1f}: that is per byte of fp32 weights; INT8 weights take 8 bits: intensity(8).",
                expected,
            )
        return wrong(
            f"Got {got:,.1f}: compute it with measure.weight_work(path, input_shapes).intensity(8), on the "
            "fp32 file at the batch-8 shapes.",
            expected,
        )
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


@needs_answer(
    "guess", message='Write your prediction in answer_3_guess first: "narrower", "same" or "wider".'
)
@needs_answer(
    "answer", hint="compute (low, high) from the two arrays of timed runs, drawing the same indices."
)
@needs_answer("unpaired", hint="compute (low, high) again, with independent indices for the two arrays.")
def check_bootstrap_interval(
    guess: str, answer, unpaired, fp32_ms, int8_ms, confidence: float = 0.9
) -> CheckResult:
    """Exercise (predict, then write code): the bootstrap 90% interval of the ratio of medians, fp32 over
    INT8, from the raw timed runs (milliseconds, run i of each taken in the same turn of the loop),
    resampled in pairs (`answer`) and with independent indices (`unpaired`); `guess`: whether the
    paired interval comes out "narrower" than the unpaired one, about the "same", or "wider"."""
    import numpy as np

    predicted = str(guess).strip().lower()
    if predicted not in ("narrower", "same", "wider"):
        return invalid(f'Got {guess!r} as the prediction; write "narrower", "same" or "wider".')
    a, b = np.asarray(fp32_ms, dtype=float), np.asarray(int8_ms, dtype=float)
    given = {}
    for label, value in (("answer_3", answer), ("answer_3_unpaired", unpaired)):
        try:
            pair = tuple(float(v) for v in np.asarray(value, dtype=float).reshape(-1))
        except (TypeError, ValueError):
            pair = ()
        if len(pair) != 2:
            return invalid(
                f"Got {value!r} in {label}; give two numbers, (low, high): the 5th and 95th percentiles of the "
                "resampled ratios of medians."
            )
        if pair[0] > pair[1]:
            return invalid(f"{label} has its high end first; give (low, high).")
        given[label] = pair
    tail = 100 * (1 - confidence) / 2
    right = _bootstrap(a, b, np.median, tail, 100 - tail)
    right_unpaired = _bootstrap(a, b, np.median, tail, 100 - tail, paired=False)

    def distance(x, y):
        return max(abs(x[0] - y[0]), abs(x[1] - y[1]))

    def near(x, y):
        return distance(x, y) <= max(0.01, 0.15 * (y[1] - y[0]))

    slips = {
        "inverted": "you divided INT8's median by fp32's; the ratio is fp32's time over INT8's (2.0 means INT8 "
        "takes half the time).",
        "means": "you took the ratio of means; take the median of each resample, which a few slow runs do not "
        "move.",
        "per-run ratios": "you took percentiles of the run-by-run ratios: that is the spread of single runs, not "
        "how far the ratio of medians could move. Resample, and take the ratio of medians of each resample.",
        "95%": "that is a 95% interval (2.5th to 97.5th percentiles); the course's is 90%: the 5th and 95th.",
    }

    def slipped(got, paired: bool) -> str:
        candidates = {
            "inverted": (
                1 / (right if paired else right_unpaired)[1],
                1 / (right if paired else right_unpaired)[0],
            ),
            "means": _bootstrap(a, b, np.mean, tail, 100 - tail, paired=paired),
            "per-run ratios": tuple(float(v) for v in np.percentile(a / b, [tail, 100 - tail])),
            "95%": _bootstrap(a, b, np.median, 2.5, 97.5, paired=paired),
        }
        found = [name for name, c in candidates.items() if near(got, c)]
        return min(found, key=lambda n: distance(got, candidates[n])) if found else ""

    got, got_unpaired = given["answer_3"], given["answer_3_unpaired"]
    if not near(got, right):
        if near(got, right_unpaired) and distance(got, right_unpaired) < distance(got, right):
            return wrong(
                "answer_3 is not paired: draw the same indices for both arrays, since run i of each was taken "
                "at nearly the same moment.",
                *right,
            )
        slip = slipped(got, paired=True)
        return wrong(
            f"answer_3 is not the paired interval: {slips[slip]}"
            if slip
            else f"answer_3 is not the paired interval. Draw {len(a)} indices with replacement (the same for "
            "both arrays), take np.median of each side and their ratio; repeat a couple of thousand times; "
            "the interval is the 5th and 95th percentiles of those ratios.",
            *right,
        )
    if not near(got_unpaired, right_unpaired):
        if near(got_unpaired, right):
            return wrong(
                "answer_3_unpaired is the paired interval again: draw a second set of indices for the INT8 "
                "array, independent of the first.",
                *right_unpaired,
            )
        slip = slipped(got_unpaired, paired=False)
        return wrong(
            f"answer_3_unpaired is not the unpaired interval: {slips[slip]}"
            if slip
            else "answer_3_unpaired is not the unpaired interval: draw one set of indices for fp32's runs and "
            "another for INT8's, then proceed as for answer_3.",
            *right_unpaired,
        )
    share = (right[1] - right[0]) / (right_unpaired[1] - right_unpaired[0])
    actual = "narrower" if share < 0.9 else "wider" if share > 1.1 else "same"
    said = "as you predicted" if predicted == actual else f"you predicted {predicted!r}"
    why = {
        "narrower": "Run i of each model shared the machine's state of that moment; resampling the pairs keeps "
        "what moved both together out of the ratio, and the interval shrinks. Unpaired, that common noise "
        "counts twice.",
        "same": "Here the two models' runs hardly moved together from turn to turn, so pairing had little "
        "common noise to cancel: what slowed a run here slowed it alone.",
        "wider": "Unusual: the runs of the two models moved in opposite directions from turn to turn. Time "
        "the pair again before trusting either interval.",
    }[actual]
    shown = "about the same as" if actual == "same" else f"{actual} than"
    return CheckResult(
        True,
        f"Paired ({got[0]:.3f}, {got[1]:.3f}), unpaired ({got_unpaired[0]:.3f}, {got_unpaired[1]:.3f}) against "
        f"the check's ({right[0]:.3f}, {right[1]:.3f}) and ({right_unpaired[0]:.3f}, {right_unpaired[1]:.3f}), "
        f"with {len(a)} runs of each: the paired interval is {shown} the unpaired one ({share:.0%} of its "
        f"width), {said}. {why} A new timing of this pair would give a ratio of medians "
        f"({float(np.median(a) / np.median(b)):.2f}x here) inside about the paired range, nine times in ten.",
    )
