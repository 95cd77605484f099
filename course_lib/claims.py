"""Claim cells: a sentence of a lesson that depends on the machine, checked where the lesson runs.

The markdown states a result in words ("S8S8 runs slower than fp32 on x86 CPUs"), with the
reference runs' figures beside it. A claim cell right after the measurement checks that sentence
on this run and says so in one line:

    ✔ Checked here: ...        the sentence holds on this machine (with the evidence)
    ✘ Not so on this machine: ...   it does not: the text describes other CPUs; read this run's
                               figures instead (the course's notebook test fails on this line)
    ≈ Unsettled here: ...      the measurement cannot tell (an interval straddles the line)
    · Not for this CPU: ...    the sentence is about another kind of CPU (e.g. AVX2 without VNNI)

`claim(...)` prints the line (and returns nothing, so a cell shows it once); `evaluate(...)` builds
the `Claim` without printing it.
"""

from __future__ import annotations

from dataclasses import dataclass

HOLDS, DIFFERS, UNSETTLED, ELSEWHERE = (
    "✔ Checked here",
    "✘ Not so on this machine",
    "≈ Unsettled here",
    "· Not for this CPU",
)


@dataclass(frozen=True)
class Claim:
    """A lesson's sentence, and what this run says about it."""

    statement: str
    holds: bool | None  # None: the measurement cannot tell
    evidence: str = ""
    applies: bool = True  # False: the sentence is about other CPUs (see `scope`)
    scope: str = ""  # which CPUs the sentence is about, e.g. "x86 without VNNI"

    @property
    def status(self) -> str:
        if not self.applies:
            return ELSEWHERE
        return {True: HOLDS, False: DIFFERS, None: UNSETTLED}[self.holds]

    @property
    def failed(self) -> bool:
        """True only when the sentence applies here and this run contradicts it."""
        return self.applies and self.holds is False

    def __str__(self) -> str:
        evidence = f" ({self.evidence})" if self.evidence else ""
        if not self.applies:
            return f"{ELSEWHERE} ({self.scope or 'another kind of CPU'}): {self.statement}{evidence}"
        line = f"{self.status}: {self.statement}{evidence}"
        if self.failed:
            from .hardware import cpu_summary

            line += (
                f". The lesson's text does not hold on {cpu_summary()}: trust this run's figures, and tell the "
                "course's maintainers which CPU this was."
            )
        return line


def evaluate(
    statement: str, holds: bool | None, evidence: str = "", *, applies: bool = True, scope: str = ""
) -> Claim:
    """Build a claim without printing it."""
    if not statement.strip():
        raise ValueError("A claim needs its sentence: the statement the lesson's markdown makes.")
    if holds is not None and not isinstance(holds, bool):
        holds = bool(holds)  # numpy bools
    return Claim(statement.strip(), holds, evidence, applies, scope)


def claim(
    statement: str, holds: bool | None, evidence: str = "", *, applies: bool = True, scope: str = ""
) -> None:
    """Check one sentence of the lesson on this run and print the verdict line.

    `holds`: True, False, or None when the measurement cannot tell. `applies=False` (with `scope`
    naming the CPUs the sentence is about) when the sentence does not concern this machine."""
    print(evaluate(statement, holds, evidence, applies=applies, scope=scope))
