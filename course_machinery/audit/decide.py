"""The decision: which variant to ship, from the measurements alone (a pure function).

The rule, in the course's words: a variant is a candidate only if it passes the quality rule
(lesson 04's acceptance rule with labels; cosine with fp32 without; the user's own metric when one
is given) and is clearly faster than fp32 at the batch the decision reads, meaning the whole
interval of its speed ratio lies at or above MIN_SPEEDUP, 1.05x: at least 5 % faster however the
noise of the run fell (lesson 05: a ratio is noisy, read its interval; lessons 02 and 05 ask
`LatencyComparison.speedup_at_least(1.05)` for the same thing). The batch the decision reads is
the batch the user serves when they say it, else the largest batch timed. The recommendation is
the fastest candidate; candidates whose intervals overlap the fastest one's are tied on speed, and
among those the one closest to fp32 wins, then the smaller file. None passes, or none is clearly
faster: no recommendation, and the reason says which.

    MIN_SPEEDUP  the speed-up the whole interval must reach, 1.05
    Measured     what the decision reads of one variant
    Decision     the recommendation (or None), why, and one verdict per variant
    decide       Measured records in, Decision out
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from course_lib.units import format_ratio

# "Clearly faster": the whole interval of the speed ratio (fp32's median time over the variant's)
# at or above this. 5 %, as lessons 02 and 05 ask with `speedup_at_least(1.05)`: below that, a
# quantized file's gain is within what the next machine, the next ONNX Runtime release or a busier
# neighbour moves, and it costs a second file to test, ship and keep in step with fp32.
MIN_SPEEDUP = 1.05

# The lesson that teaches each kind of verdict.
LESSONS = {
    "recommended": "05_hardware_and_speed.ipynb",
    "tied": "05_hardware_and_speed.ipynb",
    "slower than the choice": "05_hardware_and_speed.ipynb",
    "not faster": "05_hardware_and_speed.ipynb",
    "not timed": "05_hardware_and_speed.ipynb",
    "fails": "04_parity.ipynb",
    "refused": "05c_a_second_runtime.ipynb",
}


@dataclass(frozen=True)
class Measured:
    """One measured variant, as the decision reads it.

    `quality`: higher is closer to fp32, comparable between the variants of one audit (agreement
    with fp32, or mean cosine); `speed`: batch size -> (ratio of medians fp32 / variant, interval
    low, interval high); `why`: the quality rule's advice when it fails."""

    name: str
    passes: bool
    quality: float
    file_bytes: int
    speed: dict[int, tuple[float, float, float]] = field(default_factory=dict)
    why: str = ""


@dataclass
class Decision:
    """`recommended`: a variant's name or None; `batch`: the batch the decision read, and `basis`
    why that one ("the batch you serve", "the largest batch timed"); `reason`: why, in a sentence;
    `verdicts`: variant -> (kind, sentence), kind one of LESSONS' keys; `tied`: the variants tied
    with the choice; `min_speedup`: the speed-up the whole interval had to reach."""

    recommended: str | None
    batch: int
    reason: str
    verdicts: dict[str, tuple[str, str]]
    tied: list[str] = field(default_factory=list)
    basis: str = "the largest batch timed"
    min_speedup: float = MIN_SPEEDUP

    @property
    def decided_at(self) -> str:
        """'batch 1, the batch you serve'."""
        return f"batch {self.batch}, {self.basis}"

    def to_dict(self) -> dict:
        d = asdict(self)
        d["verdicts"] = {name: {"kind": kind, "text": text} for name, (kind, text) in self.verdicts.items()}
        d["decided_at"] = self.decided_at
        return d


def ratio_text(speed: tuple[float, float, float]) -> str:
    """'1.53x (1.48–1.58)'."""
    return format_ratio(*speed)


def rule_words(min_speedup: float = MIN_SPEEDUP) -> str:
    """'at least 5% faster than fp32 over its whole interval (lower bound >= 1.05x)'."""
    return (
        f"at least {min_speedup - 1:.0%} faster than fp32 over its whole interval "
        f"(lower bound >= {min_speedup:.2f}x)"
    )


def decide(
    variants: Sequence[Measured],
    batch: int,
    *,
    basis: str = "the largest batch timed",
    min_speedup: float = MIN_SPEEDUP,
) -> Decision:
    """The fastest variant that passes and is clearly faster than fp32 (the whole interval at or
    above `min_speedup`) at `batch`, judged by intervals; or None, saying why. `basis` says why the
    decision reads that batch, for the reasons."""
    at = f"at batch {batch} ({basis})"
    rule = rule_words(min_speedup)
    verdicts: dict[str, tuple[str, str]] = {}
    candidates = []
    for v in variants:
        if not v.passes:
            verdicts[v.name] = ("fails", f"don't ship: fails the quality rule ({v.why})")
        elif batch not in v.speed:
            verdicts[v.name] = ("not timed", f"passes, but was not timed at batch {batch}")
        elif v.speed[batch][1] < min_speedup:
            high = v.speed[batch][2]
            where = "slower than fp32" if high < 1.0 else "not clearly faster than fp32"
            verdicts[v.name] = (
                "not faster",
                f"passes, but {where} {at}: {ratio_text(v.speed[batch])}, whose lower bound is below "
                f"{min_speedup:.2f}x",
            )
        else:
            candidates.append(v)
    if not candidates:
        passing = [v for v in variants if v.passes]
        if not variants:
            reason = "no variant was built for this model on this CPU (see the skipped variants)"
        elif not passing:
            reason = "no variant passes the quality rule: every INT8 file answers too differently from fp32"
        else:
            reason = (
                f"the variants that pass the quality rule are not clearly faster than fp32 {at}: none is "
                f"{rule}, so on this CPU they buy size, not speed"
            )
        return Decision(None, batch, reason, verdicts, basis=basis, min_speedup=min_speedup)

    fastest = max(candidates, key=lambda v: v.speed[batch][0])
    low = fastest.speed[batch][1]
    tied = [v for v in candidates if v.speed[batch][2] >= low]  # intervals overlap the fastest one's
    choice = max(tied, key=lambda v: (v.quality, -v.file_bytes, v.speed[batch][0]))
    others = [v.name for v in tied if v is not choice]
    for v in candidates:
        if v is choice:
            continue
        if v in tied:
            verdicts[v.name] = (
                "tied",
                f"passes, {ratio_text(v.speed[batch])}: as fast as {choice.name} within the intervals; "
                f"{choice.name} is closer to fp32 or smaller",
            )
        else:
            verdicts[v.name] = (
                "slower than the choice",
                f"passes, {ratio_text(v.speed[batch])}: clearly slower than {choice.name}",
            )
    verdicts[choice.name] = (
        "recommended",
        f"recommended: passes the quality rule and runs at {ratio_text(choice.speed[batch])} fp32's speed "
        f"{at}, {rule}",
    )
    reason = (
        f"{choice.name} is the fastest variant that passes, {at}: {ratio_text(choice.speed[batch])}, {rule}"
    )
    if others:
        reason += f"; tied on speed with {', '.join(others)}, and closer to fp32 or smaller"
    return Decision(choice.name, batch, reason, verdicts, others, basis=basis, min_speedup=min_speedup)
