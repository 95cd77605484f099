"""Claim cells: a sentence of a lesson that depends on the machine, checked where the lesson runs.

The markdown states a result in words ("S8S8 runs slower than fp32 on x86 CPUs"), with the
reference runs' figures beside it. A claim cell right after the measurement checks that sentence
on this run and says so in one line:

    ✔ Checked here: ...        the sentence holds on this machine (with the evidence)
    ✘ Not so on this machine: ...   it does not: the text describes other machines; read this run's
                               figures instead (the course's notebook test fails on this line)
    ≈ Unsettled here: ...      the measurement cannot tell (an interval straddles the line)
    · Not for this CPU: ...    the sentence is about another kind of CPU (e.g. AVX2 without VNNI)
    · Not timed here: ...      a sentence about speed, on a run whose CPU features are masked or
                               overridden (the timings are the host's, not the class's)

Every claim says what it depends on (`depends`, keys of DEPENDS): the CPU's speed, its
instructions, the weights trained here, the data, the runtime's version. That is what a learner
should report when a sentence fails, and what a sentence has to hold across: one about the
weights must hold for weights trained on any CPU with any seed.

`claim(...)` prints the line (and returns nothing, so a cell shows it once) and enters the claim in
this kernel's ledger, which `reference.save_figures` stores beside the lesson's figures, so that a
reference run keeps every sentence's verdict (`python -m course_lib reference record`);
`evaluate(...)` builds the `Claim` without printing or entering it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

# Set by `python -m course_lib run --cpu-mask ...` (course_lib.tooling.cpumask) and by the explicit
# override of the CPU's features: the CPU reading then describes another class than the host's,
# so a timing taken here is the host's, not that class's.
from .hardware import FLAGS_ENV, MASK_ENV

HOLDS, DIFFERS, UNSETTLED, ELSEWHERE, UNTIMED = (
    "✔ Checked here",
    "✘ Not so on this machine",
    "≈ Unsettled here",
    "· Not for this CPU",
    "· Not timed here",
)

# What a sentence can depend on, in the words a verdict line uses.
DEPENDS: dict[str, str] = {
    "speed": "this CPU's speed (its kernels, its clock, what else runs on it)",
    "cpu": "this CPU's instructions and the kernels they select",
    "weights": "the weights trained here (they differ with the CPU and the seed they were trained with)",
    "data": "the data the lesson samples",
    "runtime": "the installed runtime's version",
}

# A ledger entry's verdict, by the status line it printed.
VERDICTS = {
    HOLDS: "held",
    DIFFERS: "contradicted",
    UNSETTLED: "unsettled",
    ELSEWHERE: "not for this CPU",
    UNTIMED: "not timed",
}


def _timings_stand_in() -> str:
    """Why this run's timings do not describe the CPU class it reports ('' when they do)."""
    if os.environ.get(MASK_ENV):
        return f"CPU features masked ({MASK_ENV}={os.environ[MASK_ENV]}): the timings are the host's"
    if os.environ.get(FLAGS_ENV):
        return f"CPU features overridden ({FLAGS_ENV}): the timings are the host's"
    return ""


@dataclass(frozen=True)
class Claim:
    """A lesson's sentence, and what this run says about it."""

    statement: str
    holds: bool | None  # None: the measurement cannot tell
    evidence: str = ""
    applies: bool = True  # False: the sentence is about other CPUs (see `scope`)
    scope: str = ""  # which CPUs the sentence is about, e.g. "x86 without VNNI"
    depends: tuple[str, ...] = ()  # keys of DEPENDS
    untimed: str = ""  # why a sentence about speed was not checked on this run (see _timings_stand_in)

    @property
    def status(self) -> str:
        if not self.applies:
            return ELSEWHERE
        if self.untimed:
            return UNTIMED
        return {True: HOLDS, False: DIFFERS, None: UNSETTLED}[self.holds]

    @property
    def verdict(self) -> str:
        """The ledger's word for the status: held, contradicted, unsettled, not for this CPU, not timed."""
        return VERDICTS[self.status]

    @property
    def failed(self) -> bool:
        """True only when the sentence applies here and this run contradicts it."""
        return self.status == DIFFERS

    def depends_on(self) -> str:
        """What the sentence depends on, in words."""
        return "; ".join(DEPENDS[d] for d in self.depends)

    def __str__(self) -> str:
        evidence = f" ({self.evidence})" if self.evidence else ""
        if not self.applies:
            return f"{ELSEWHERE} ({self.scope or 'another kind of CPU'}): {self.statement}{evidence}"
        if self.untimed:
            return f"{UNTIMED} ({self.untimed}): {self.statement}{evidence}"
        line = f"{self.status}: {self.statement}{evidence}"
        if self.failed:
            line += (
                f". The lesson's text does not hold here. It depends on {self.depends_on()}: {_report(self)}"
            )
        return line

    def to_record(self) -> dict:
        """The ledger entry a reference run stores (plain JSON)."""
        return {
            "statement": self.statement,
            "verdict": self.verdict,
            "depends": list(self.depends),
            "scope": self.scope,
            "evidence": self.evidence,
        }


def _report(claim: Claim) -> str:
    """What to tell the course's maintainers, by what the sentence depends on."""
    parts = []
    if {"speed", "cpu"} & set(claim.depends):
        from .hardware import cpu_summary

        parts.append(f"the CPU ({cpu_summary()})")
    if "weights" in claim.depends:
        parts.append("where the weights came from (`python -m course_lib doctor` says)")
    if "runtime" in claim.depends:
        parts.append("the runtime's version")
    what = " and ".join(parts) or "this run's figures"
    return f"trust this run's figures, and tell the course's maintainers {what}."


def _depends(depends: str | Iterable[str]) -> tuple[str, ...]:
    found = (depends,) if isinstance(depends, str) else tuple(depends)
    unknown = [d for d in found if d not in DEPENDS]
    if not found or unknown:
        raise ValueError(
            f"A claim says what it depends on, one or more of {', '.join(map(repr, DEPENDS))}; got "
            f"{list(found) or 'nothing'}. Name what could make the sentence false elsewhere, e.g. "
            "depends=('weights', 'cpu') for an accuracy that rests on trained weights and INT8 kernels."
        )
    return tuple(dict.fromkeys(found))


def evaluate(
    statement: str,
    holds: bool | None,
    evidence: str = "",
    *,
    depends: str | Iterable[str],
    applies: bool = True,
    scope: str = "",
) -> Claim:
    """Build a claim without printing it or entering it in the ledger."""
    if not statement.strip():
        raise ValueError("A claim needs its sentence: the statement the lesson's markdown makes.")
    if holds is not None and not isinstance(holds, bool):
        holds = bool(holds)  # numpy bools
    found = _depends(depends)
    untimed = _timings_stand_in() if "speed" in found else ""
    return Claim(statement.strip(), holds, evidence, applies, scope, found, untimed)


_LEDGER: dict[str, Claim] = {}


def claim(
    statement: str,
    holds: bool | None,
    evidence: str = "",
    *,
    depends: str | Iterable[str],
    applies: bool = True,
    scope: str = "",
) -> None:
    """Check one sentence of the lesson on this run, print the verdict line and enter it in the ledger.

    `holds`: True, False, or None when the measurement cannot tell. `depends`: what the sentence
    rests on (keys of DEPENDS: "speed", "cpu", "weights", "data", "runtime"). `applies=False` (with
    `scope` naming the CPUs the sentence is about) when the sentence does not concern this machine."""
    found = evaluate(statement, holds, evidence, depends=depends, applies=applies, scope=scope)
    _LEDGER[found.statement] = found  # a cell run again replaces its earlier verdict
    print(found)


def ledger() -> list[Claim]:
    """The claims this kernel has checked, in order (one per sentence: the latest verdict)."""
    return list(_LEDGER.values())


def clear_ledger() -> None:
    """Forget the claims checked so far (a lesson's first cell need not: one kernel, one lesson)."""
    _LEDGER.clear()


def all_of(*verdicts: bool | None | Iterable[bool | None]) -> bool | None:
    """Several verdicts as one sentence's: False if one is False, None if one cannot tell, else True.

    Takes verdicts one by one (`all_of(a, b)`) or in one iterable (`all_of(v for v in ...)`)."""
    flat = [v for item in verdicts for v in (item if isinstance(item, Iterable) else (item,))]
    if any(v is not None and not v for v in flat):
        return False
    return None if any(v is None for v in flat) else True
