"""Self-checks for lesson 05 (hardware and speed)."""

from __future__ import annotations

from .result import CheckResult, speedup_interval


def check_feature_count(answer: int) -> CheckResult:
    """Exercise: how many of the INT8-relevant CPU features this machine has."""
    from ..hardware import cpu_report

    if answer is None:
        return CheckResult(False, "No answer yet: replace None with your count.")
    features = cpu_report()["features"]
    present = [name for name, on in features.items() if on]
    if int(answer) == len(present):
        return CheckResult(True, f"{len(present)} of {len(features)}: {', '.join(present) or 'none'}.")
    return CheckResult(False, f"Got {answer}; count the True values of cpu_report()['features'].")


def check_pair_sum(answer: int, weight_bits: int = 7) -> CheckResult:
    """Exercise: the largest VPMADDUBSW pair sum, 2 x 255 x max|w|, and whether it fits in int16."""
    if answer is None:
        return CheckResult(False, "No answer yet: replace None with your computation.")
    max_w = 2 ** (weight_bits - 1)  # 7 bits: |w| <= 64, as ONNX Runtime's reduce_range stores them
    expected = 2 * 255 * max_w
    if int(answer) == expected:
        fits = expected <= 32767
        return CheckResult(
            True,
            f"{expected:,} {'fits' if fits else 'does not fit'} in a signed 16-bit sum (max 32,767): "
            + ("no pair can saturate." if fits else "pairs can saturate."),
        )
    if int(answer) == 2 * 255 * 127:
        return CheckResult(False, f"{answer:,} is for full 8-bit weights (|w| <= 127); use |w| <= {max_w}.")
    return CheckResult(False, f"Got {answer}, expected 2 x 255 x {max_w} = {expected:,}.")


def check_bottleneck(answer: str, profile, baseline_profile=None) -> CheckResult:
    """Exercise: name the op type that takes the largest share of a profile's kernel time."""
    if answer is None:
        return CheckResult(False, 'No answer yet: write the op type as a string, e.g. "Conv".')
    ranked = sorted(profile.ms_per_run, key=profile.ms_per_run.get, reverse=True)
    top = ranked[0]
    share = profile.ms_per_run[top] / profile.total_ms
    if str(answer) == top:
        return CheckResult(
            True, f"{top}: {share:.0%} of the kernel time of {profile.model}, where INT8 has to win."
        )
    if (
        baseline_profile is not None
        and str(answer) in baseline_profile.ms_per_run
        and str(answer) not in ranked
    ):
        return CheckResult(
            False,
            f"{answer} is in the fp32 profile; this one does not run it. Read the INT8 profile's table.",
        )
    if str(answer) in ranked:
        place = ranked.index(str(answer)) + 1
        return CheckResult(
            False, f"{answer} ranks {place} by time; look for the op type with the largest share."
        )
    return CheckResult(
        False, f"{answer!r} did not run in this profile; its op types are: {', '.join(ranked)}."
    )


def _verdict(comparison) -> str:
    """'faster', 'slower' or 'unsettled': what a ratio's interval says against 1x (fp32's speed)."""
    return {True: "faster", False: "slower", None: "unsettled"}[comparison.speedup_at_least(1.0)]


def check_s8s8_prediction(guess: float, answer: str, comparison, ran=None) -> CheckResult:
    """Exercise (predict, then interpret): the S8S8 file's speed against fp32 at batch 64.

    `guess`: the ratio (fp32's time over S8S8's) predicted from the kernel table before timing;
    `answer`: "faster", "slower" or "unsettled", what the measured 90% interval says;
    `comparison`: the measured `LatencyComparison`; `ran`: the S8S8 file's `kernels.Kernels`."""
    if guess is None:
        return CheckResult(
            False, "Write your prediction in answer_1_guess first (a ratio such as 1.5 or 0.7)."
        )
    if answer is None:
        return CheckResult(False, 'No answer yet: write "faster", "slower" or "unsettled".')
    expected, measured = _verdict(comparison), speedup_interval(comparison)
    said = str(answer).strip().lower()
    if said not in ("faster", "slower", "unsettled"):
        return CheckResult(False, f'Got {answer!r}; answer "faster", "slower" or "unsettled".')
    if said != expected:
        if expected == "unsettled":
            hint = (
                f"the interval {measured} reaches both sides of 1x: this run cannot tell, whatever the median "
                "says. Answer 'unsettled'."
            )
        elif said == "unsettled":
            hint = f"the whole interval {measured} lies on one side of 1x: it can tell."
        else:
            hint = (
                f"the ratio is fp32's time over S8S8's, {measured}: below 1 means S8S8 takes longer than fp32, "
                "above 1 that it takes less."
            )
        return CheckResult(False, f"Got {answer!r}, expected {expected!r}: {hint}")
    why = ""
    if ran is not None and ran.compute_count:
        floats = ran.compute_count - ran.integer_count
        why = (
            f" The kernel table said why: {floats} of its {ran.compute_count} compute ops run in float, reading "
            "dequantized INT8, so those layers do fp32's work and dequantize their inputs on top."
        )
    low, high = comparison.speedup_low, comparison.speedup_high
    g = float(guess)
    if low <= g <= high:
        verdict = f"your prediction, {g:g}x, is inside the interval."
    elif (g < 1) == (high < 1) and (g >= 1) == (low >= 1):
        verdict = f"your prediction, {g:g}x, was on the right side of 1x."
    elif g >= 1 > high:
        verdict = (
            f"you predicted {g:g}x: an INT8 file is not fast by being INT8; what runs decides, and here part of it "
            "runs in float."
        )
    else:
        verdict = f"you predicted {g:g}x; the measurement says otherwise."
    return CheckResult(True, f"{expected.capitalize()}: S8S8 ran at {measured} fp32's speed; {verdict}{why}")


def _batch_label(value) -> str | None:
    text = str(value).strip().lower().replace("batch", "").strip()
    if text in ("1", "64"):
        return f"batch {text}"
    if text in ("neither", "none", "overlap", "same", "no difference"):
        return "neither"
    return None


def check_batch_gain(guess: str, answer: str, b1, b64) -> CheckResult:
    """Exercise (predict, then interpret): at which batch size INT8's ratio is larger, by the intervals.

    `guess` and `answer`: "batch 1", "batch 64" or "neither" (the intervals overlap); `b1`, `b64`: the
    production variant's `LatencyComparison` at those batch sizes."""
    if guess is None:
        return CheckResult(False, 'Write your prediction in answer_2_guess first: "batch 1" or "batch 64".')
    if answer is None:
        return CheckResult(False, 'No answer yet: "batch 1", "batch 64" or "neither".')
    said = _batch_label(answer)
    if said is None:
        return CheckResult(False, f'Got {answer!r}; answer "batch 1", "batch 64" or "neither".')
    expected = {True: "batch 1", False: "batch 64", None: "neither"}[b1.speedup_clearly_above(b64)]
    both = f"batch 1 {speedup_interval(b1)}, batch 64 {speedup_interval(b64)}"
    if said != expected:
        by_median = "batch 1" if b1.speedup > b64.speedup else "batch 64"
        if expected == "neither":
            hint = (
                f"{both}: the medians differ, but the intervals overlap, so the difference is within the noise. "
                "Claim a larger ratio only when its interval lies wholly above the other's."
            )
        elif said == "neither":
            hint = f"{both}: the intervals do not overlap, so one is clearly larger."
        else:
            hint = (
                f"{both}: the ratio is fp32's time over INT8's, so the larger ratio is where INT8 gains more."
                if said != by_median
                else f"{both}."
            )
        return CheckResult(False, f"Got {answer!r}, expected {expected!r}: {hint}")
    predicted = _batch_label(guess)
    if expected == "neither":
        note = "your prediction cannot be settled by this run: time again, or with more runs."
    elif predicted == expected:
        note = "and you predicted it."
    else:
        note = f"you predicted {guess!r}."
    why = {
        "batch 1": " At batch 1 each weight is used only a few times per run: reading the weights takes much of "
        "fp32's time, and INT8 reads a quarter of the bytes (section 6). With spinning off, fp32's graph also "
        "pays more for waking its threads at batch 1 (section 2), so a server's batch-1 gain can be smaller.",
        "batch 64": " At batch 64 each weight is used many times: the run is arithmetic, INT8's fixed costs are "
        "spread over more images, and at batch 1 those costs (and waking threads) weigh more (section 6).",
        "neither": " The two effects (fewer bytes to read at batch 1, fixed costs spread thinner at batch 64) "
        "balance here, or the noise hides which one wins.",
    }[expected]
    return CheckResult(True, f"{expected.capitalize()} ({both}); {note}{why}")


def _bootstrap(a, b, stat, low_q: float, high_q: float, paired: bool = True, resamples: int = 20000):
    """Percentiles of stat(resampled a) / stat(resampled b), resampling pairs (or each side apart)."""
    import numpy as np

    rng = np.random.default_rng(20260)
    n = len(a)
    ia = rng.integers(0, n, size=(resamples, n))
    ib = ia if paired else rng.integers(0, n, size=(resamples, n))
    ratios = stat(a[ia], axis=1) / stat(b[ib], axis=1)
    return tuple(float(v) for v in np.percentile(ratios, [low_q, high_q]))


def check_bootstrap_interval(answer, fp32_ms, int8_ms, confidence: float = 0.9) -> CheckResult:
    """Exercise (write code): the paired-bootstrap 90% interval of the ratio of medians, fp32 over INT8,
    from the raw timed runs (milliseconds, run i of each taken in the same turn of the loop)."""
    import numpy as np

    if answer is None:
        return CheckResult(False, "No answer yet: compute (low, high) from the two arrays of timed runs.")
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
