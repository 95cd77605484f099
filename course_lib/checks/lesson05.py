"""Self-checks for lesson 05 (hardware and speed)."""

from __future__ import annotations

from .result import CheckResult


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
