"""Claims: a lesson's sentence about a measured result, and the rule that checks it on a run.

A lesson's markdown states its results in words before anything runs ("U8S8 runs faster than fp32
at batch 64"). Each such sentence carries a stable identifier in an HTML comment right after it,

    U8S8 runs faster than fp32 at batch 64. <!-- claim: u8s8-faster -->

and the lesson's claims module (`course_machinery/checks/claimsNN.py`) defines the same sentence once,
with the rule that decides it from the run's figures:

    book = Book("03")

    @book.sentence("3", "u8s8-faster", "U8S8 runs faster than fp32 at batch 64",
                   shows="{u8s8_b64}", scope=X86, depends="speed")
    def _(f):
        return faster(f["u8s8_b64"])

A rule returns True (the sentence holds), False (this run contradicts it) or None (the measurement
cannot tell: an interval straddles the line). It reads figures, never live objects, so that the
same rule decides a stored reference run as well as this one. The section's figures come from a
function the same module registers with `@book.figures("3")`; the lesson's check cell passes it the
objects it measured (`cl.verify("03.3", scored=scored)`, course_machinery/verdicts.py).

Size words are rules too: "a few", "several", "far", "about", "a quarter", "most", "nearly all"
each have the function of that name below, and a sentence that uses one must decide it with it
(tests/test_claims.py). A claim can fail: no rule may return a constant, or only True or None.

Verdicts:

    ✔ Checked here          the sentence holds on this machine
    ✘ Not so on this machine   this run contradicts it (the course's notebook test fails on it)
    ≈ Unsettled here        the measurement cannot tell (an interval straddles the line)
    · Not measured here     a figure it needs could not be taken (a refused file, a missing runtime)
    · Not for this CPU      the sentence is about another kind of CPU (its scope)
    · Not timed here        a sentence about speed, on a run whose CPU features are masked
"""

from __future__ import annotations

import hashlib
import inspect
import math
import os
import string
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

# Set by `python -m course_lib run --cpu-mask ...` (course_machinery.cpumask) and by the explicit
# override of the CPU's features: the CPU reading then describes another class than the host's,
# so a timing taken here is the host's, not that class's.
from course_machinery.hardware import FLAGS_ENV, MASK_ENV

HOLDS, DIFFERS, UNSETTLED, UNMEASURED, ELSEWHERE, UNTIMED = (
    "✔ Checked here",
    "✘ Not so on this machine",
    "≈ Unsettled here",
    "· Not measured here",
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
    UNMEASURED: "not measured",
    ELSEWHERE: "not for this CPU",
    UNTIMED: "not timed",
}
# One mark per verdict, for the reference columns of a check table.
MARKS = {
    "held": "✔",
    "contradicted": "✘",
    "unsettled": "≈",
    "not measured": "∅",
    "not for this CPU": "–",
    "not timed": "–",
}


def _timings_stand_in() -> str:
    """Why this run's timings do not describe the CPU class it reports ('' when they do)."""
    if os.environ.get(MASK_ENV):
        return f"CPU features masked ({MASK_ENV}={os.environ[MASK_ENV]}): the timings are the host's"
    if os.environ.get(FLAGS_ENV):
        return f"CPU features overridden ({FLAGS_ENV}): the timings are the host's"
    return ""


# --------------------------------------------------------------------------------------------
# Figures: what a rule reads
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Interval:
    """A measured value with its interval: a speed ratio ('x'), a share ('%', stored as a fraction),
    or a difference in points ('points'). Stored as {"value", "low", "high", "unit"}."""

    value: float
    low: float
    high: float
    unit: str = "x"

    def __format__(self, spec: str) -> str:
        if spec:
            return format(self.value, spec)
        if self.unit == "%":
            return f"{100 * self.value:.2f} % ({100 * self.low:.2f}–{100 * self.high:.2f})"
        if self.unit == "points":
            return f"{self.value:+.2f} points ({self.low:+.2f} to {self.high:+.2f})"
        return f"{self.value:.2f}x ({self.low:.2f}–{self.high:.2f})"

    def __str__(self) -> str:
        return format(self, "")

    def to_dict(self) -> dict:
        return {"value": self.value, "low": self.low, "high": self.high, "unit": self.unit}


def speed(comparison: Any) -> dict:
    """A speed ratio with its interval, as a figure: from `measure.compare_latency`'s comparison."""
    return Interval(comparison.speedup, comparison.speedup_low, comparison.speedup_high, "x").to_dict()


def interval(value: float, low: float, high: float, unit: str) -> dict:
    """Any measured value with its interval, as a figure ('x', '%' as a fraction, or 'points')."""
    return Interval(float(value), float(low), float(high), unit).to_dict()


def change(difference: Any) -> dict:
    """A paired difference in points (`Parity.compare`), as a figure."""
    return Interval(difference.points, difference.low, difference.high, "points").to_dict()


def not_measured(reason: str) -> dict:
    """A figure that could not be taken here, with the reason: every sentence that reads it is
    'not measured here' on this run, never unsettled."""
    if not reason.strip():
        raise ValueError("not_measured() needs the reason, e.g. 'OpenVINO is not installed'.")
    return {"not_measured": reason.strip()}


class MissingFigure(KeyError):
    """A rule read a figure the run did not save (a stored run recorded before the sentence changed)."""


class NotMeasured(Exception):
    """A rule read a figure that could not be measured on this run; the message is the reason."""


class Figures(Mapping):
    """A run's figures as a rule reads them: intervals as `Interval`, a not-measured figure raises
    NotMeasured, a missing one MissingFigure. Records what was read (`read`)."""

    def __init__(self, values: Mapping[str, Any]):
        self._values = dict(values)
        self.read: list[str] = []

    def __getitem__(self, key: str) -> Any:
        if key not in self._values:
            raise MissingFigure(key)
        self.read.append(key)
        return _as_figure(self._values[key])

    def __iter__(self):
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


def _as_figure(value: Any) -> Any:
    if isinstance(value, dict):
        if "not_measured" in value:
            raise NotMeasured(value["not_measured"])
        if {"value", "low", "high"} <= set(value):
            return Interval(value["value"], value["low"], value["high"], value.get("unit", "x"))
    return value


class _Shown(string.Formatter):
    def get_value(self, key, args, kwargs):
        return kwargs[key]


def show(template: str, figures: Figures) -> str:
    """The template filled from the figures, each interval in its unit ('1.38x (1.34–1.41)')."""
    return _Shown().vformat(template, (), figures)


# --------------------------------------------------------------------------------------------
# Rules: comparisons judged by their intervals, and the size words
# --------------------------------------------------------------------------------------------
def _ends(x: Any) -> tuple[float, float]:
    if isinstance(x, Interval):
        return x.low, x.high
    return float(x), float(x)


def at_least(x: Interval | float, bound: float) -> bool | None:
    """x reaches `bound`: True when its whole interval lies at or above it, False when wholly below,
    None when the interval reaches both sides."""
    low, high = _ends(x)
    if low >= bound:
        return True
    if high < bound:
        return False
    return None


def below(x: Interval | float, bound: float) -> bool | None:
    """x stays under `bound`, judged by its interval (None when it straddles it)."""
    reached = at_least(x, bound)
    return None if reached is None else not reached


def faster(ratio: Interval | float, than: float = 1.0) -> bool | None:
    """A speed ratio above `than` (1.0: faster than the baseline), judged by its interval."""
    low, high = _ends(ratio)
    if low > than:
        return True
    if high <= than:
        return False
    return None


def slower(ratio: Interval | float, than: float = 1.0) -> bool | None:
    """A speed ratio under `than` (1.0: slower than the baseline), judged by its interval."""
    low, high = _ends(ratio)
    if high < than:
        return True
    if low >= than:
        return False
    return None


def apart(a: Interval, b: Interval) -> bool | None:
    """a clearly above b: True when a's interval lies wholly above b's, False when wholly below,
    None when they overlap (touching ends included)."""
    if a.low > b.high:
        return True
    if b.low > a.high:
        return False
    return None


def noise(difference: Interval) -> bool:
    """A paired difference whose interval includes 0: the run cannot tell the two apart."""
    return difference.low <= 0 <= difference.high


def between(x: float, low: float, high: float) -> bool:
    """low <= x <= high."""
    return low <= float(x) <= high


# The size words, each with its one meaning. A sentence that uses the word decides it with the
# function of that name (tests/test_claims.py checks it).
SIZE_WORDS: dict[str, str] = {
    "a few": "a_few",
    "a step or two": "a_step_or_two",
    "several times": "several_times",
    "several": "several",
    "far": "far",
    "about": "about",
    "a quarter": "a_quarter",
    "about a quarter": "a_quarter",
    "most": "most",
    "nearly all": "nearly_all",
    "nearly every": "nearly_all",
}


def a_few(count: int) -> bool:
    """'a few': two to five."""
    return 2 <= count <= 5


def a_step_or_two(count: int) -> bool:
    """'a step or two': one or two."""
    return 1 <= count <= 2


def several(count: int) -> bool:
    """'several': three to nine (ten and more is 'many')."""
    return 3 <= count <= 9


def several_times(ratio: Interval | float) -> bool | None:
    """'several times' (faster, slower, larger): a factor of at least 3, judged by its interval.
    For 'several times slower', pass the inverse ratio (fp32's speed over the candidate's)."""
    return at_least(ratio, 3.0)


def far(ratio: Interval | float) -> bool | None:
    """'far' (far less, far more, far above): a factor of at least 2 between the two, judged by
    its interval. Pass the larger over the smaller."""
    return at_least(ratio, 2.0)


def about(x: Interval | float, target: float, tolerance: float = 0.2) -> bool | None:
    """'about': within `tolerance` (20 %) of `target`, relatively. A measured interval is judged by
    its ends: True when both are within, False when both lie outside on the same side, None when it
    reaches past the band (a noisy timing whose point is outside cannot contradict 'about')."""
    if not isinstance(x, Interval):
        return math.isclose(float(x), target, rel_tol=tolerance)
    inside = [math.isclose(end, target, rel_tol=tolerance) for end in (x.low, x.high)]
    if all(inside):
        return True
    if not any(inside) and (x.low > target or x.high < target):
        return False
    return None


def a_quarter(share: float) -> bool:
    """'a quarter', 'about a quarter' (of a size, a time): 20 % to 30 %."""
    return 0.2 <= float(share) <= 0.3


def most(share: float) -> bool:
    """'most': more than half."""
    return float(share) > 0.5


def nearly_all(share: float) -> bool:
    """'nearly all', 'nearly every': at least 90 %."""
    return float(share) >= 0.9


def all_of(*verdicts: bool | None | Iterable[bool | None]) -> bool | None:
    """Several verdicts as one sentence's: False if one is False, None if one cannot tell, else True.

    Takes verdicts one by one (`all_of(a, b)`) or in one iterable (`all_of(v for v in ...)`)."""
    flat = [v for item in verdicts for v in (item if isinstance(item, Iterable) else (item,))]
    if any(v is not None and not v for v in flat):
        return False
    return None if any(v is None for v in flat) else True


# --------------------------------------------------------------------------------------------
# Scopes: which CPUs a sentence is about
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Scope:
    """Which CPUs a sentence is about, in words and as a test of a run's CPU facts (`cpu_facts`)."""

    words: str
    test: Callable[[Mapping[str, bool]], bool] = field(compare=False)

    def applies(self, cpu: Mapping[str, bool]) -> bool:
        return bool(self.test(cpu))


X86 = Scope("x86", lambda cpu: cpu["x86"])
ARM = Scope("ARM", lambda cpu: cpu["arm"])
SATURATING = Scope("x86 without VNNI", lambda cpu: cpu["saturates"])
NOT_SATURATING = Scope("CPUs whose U8S8 kernels cannot saturate", lambda cpu: not cpu["saturates"])
VNNI = Scope("x86 with VNNI", lambda cpu: cpu["x86"] and cpu["vnni"])
AMX = Scope("x86 with AMX", lambda cpu: cpu["amx"])
NO_AMX = Scope("CPUs without AMX", lambda cpu: not cpu["amx"])


def cpu_facts() -> dict[str, bool]:
    """This machine's CPU facts that scopes test: x86, ARM, VNNI, AMX, and whether ONNX Runtime's
    U8S8 kernels can saturate here."""
    from course_machinery.hardware import cpu_report, u8s8_can_saturate

    cpu = cpu_report()
    features = {name for name, present in cpu["features"].items() if present}
    machine = cpu["machine"].lower()
    return {
        "x86": machine in ("x86_64", "amd64"),
        "arm": machine in ("arm64", "aarch64"),
        "vnni": bool({"AVX-512 VNNI", "AVX-VNNI"} & features),
        "amx": "AMX (INT8)" in features,
        "saturates": bool(u8s8_can_saturate()),
    }


# --------------------------------------------------------------------------------------------
# Sentences and their verdicts
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Claim:
    """A lesson's sentence, and what one run says about it."""

    statement: str
    holds: bool | None  # None: the measurement cannot tell
    evidence: str = ""
    applies: bool = True  # False: the sentence is about other CPUs (see `scope`)
    scope: str = ""  # which CPUs the sentence is about, e.g. "x86 without VNNI"
    depends: tuple[str, ...] = ()  # keys of DEPENDS
    untimed: str = ""  # why a sentence about speed was not checked on this run (see _timings_stand_in)
    unmeasured: str = ""  # why a figure it needs could not be measured here
    id: str = ""  # "03.u8s8-faster"
    fingerprint: str = ""  # of the sentence and its rule, as checked

    @property
    def status(self) -> str:
        if not self.applies:
            return ELSEWHERE
        if self.unmeasured:
            return UNMEASURED
        if self.untimed:
            return UNTIMED
        return {True: HOLDS, False: DIFFERS, None: UNSETTLED}[self.holds]

    @property
    def verdict(self) -> str:
        """The ledger's word: held, contradicted, unsettled, not measured, not for this CPU, not timed."""
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
        if self.unmeasured:
            return f"{UNMEASURED} ({self.unmeasured}): {self.statement}"
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
        record = {
            "statement": self.statement,
            "verdict": self.verdict,
            "depends": list(self.depends),
            "scope": self.scope,
            "evidence": self.evidence,
        }
        if self.id:
            record |= {"id": self.id, "fingerprint": self.fingerprint}
        if self.unmeasured:
            record["reason"] = self.unmeasured
        return record


def _report(claim: Claim) -> str:
    """What to tell the course's maintainers, by what the sentence depends on."""
    parts = []
    if {"speed", "cpu"} & set(claim.depends):
        from course_machinery.hardware import cpu_summary

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


@dataclass(frozen=True)
class Sentence:
    """One sentence of a lesson's markdown and the rule that decides it from a run's figures."""

    lesson: str
    section: str
    name: str  # stable: the markdown's `<!-- claim: name -->`
    text: str
    rule: Callable[[Figures], bool | None] = field(compare=False, repr=False)
    shows: str = ""  # the figures that back it, as a format template: "{u8s8_b64}"
    depends: tuple[str, ...] = ()
    scope: Scope | None = None
    # figures of a case no reference CPU has met yet (a file refused), for tests/test_sentences.py's
    # can-fail check: never read by a lesson
    example: dict[str, Any] | None = field(default=None, compare=False, repr=False)

    @property
    def id(self) -> str:
        return f"{self.lesson}.{self.name}"

    @property
    def fingerprint(self) -> str:
        """Of the sentence's definition (its words, scope, figures and rule) as written: a stored
        verdict counts for this sentence only while the fingerprint it was recorded with is this one."""
        try:
            source = inspect.getsource(self.rule)
        except (OSError, TypeError):
            source = repr(self.rule.__code__.co_code)
        return hashlib.sha256(" ".join(source.split()).encode()).hexdigest()[:12]

    def identity(self) -> dict[str, Any]:
        """What names this sentence in a verdict (its text, key, fingerprint, scope and dependencies),
        for a Claim made from a run or given without one (an emulated CPU's 'not timed')."""
        return dict(
            statement=self.text,
            depends=self.depends,
            scope=self.scope.words if self.scope else "",
            id=self.id,
            fingerprint=self.fingerprint,
        )

    def check(self, figures: Mapping[str, Any], cpu: Mapping[str, bool], untimed: str = "") -> Claim:
        """This sentence's verdict on a run with these figures and CPU facts.

        MissingFigure propagates: a rule that reads a figure the run never saved is not checked."""
        found = Figures(figures)
        base = self.identity()
        applies = self.scope.applies(cpu) if self.scope else True
        try:
            evidence = show(self.shows, found) if self.shows else ""
        except NotMeasured as reason:
            if not applies:  # a sentence about other CPUs is not for this one, measured or not
                return Claim(holds=None, applies=False, **base)
            return Claim(holds=None, unmeasured=str(reason), **base)
        if not applies:
            return Claim(holds=None, evidence=evidence, applies=False, **base)
        try:
            holds = self.rule(found)
        except NotMeasured as reason:
            return Claim(holds=None, evidence=evidence, unmeasured=str(reason), **base)
        if holds is not None and not isinstance(holds, bool):
            holds = bool(holds)  # numpy bools
        untimed = untimed if "speed" in self.depends else ""
        return Claim(holds=holds, evidence=evidence, untimed=untimed, **base)


FiguresOf = Callable[..., dict[str, Any]]


class Book:
    """A lesson's claims: its sentences by section, and the functions that turn what a section
    measured into figures. One per lesson, in course_machinery/checks/claimsNN.py."""

    def __init__(self, lesson: str, timed: Iterable[str] = ()):
        self.lesson = lesson
        # figures read off a clock besides the speed intervals (seconds, images per second): a run
        # with masked CPU features keeps the host's, never the class's (reference.save_figures)
        self.timed = frozenset(timed)
        self.sentences: dict[str, Sentence] = {}
        self.figure_functions: dict[str, FiguresOf] = {}
        self.at_end: Callable[..., None] | None = None

    def sentence(
        self,
        section: str,
        name: str,
        text: str,
        *,
        depends: str | Iterable[str],
        shows: str = "",
        scope: Scope | None = None,
        example: dict[str, Any] | None = None,
    ) -> Callable[[Callable[[Figures], bool | None]], Callable[[Figures], bool | None]]:
        """Register the decorated rule as the check of one sentence of section `section`. `example`:
        figures of a case no reference CPU has met yet, so that the tests can still see the rule fail."""
        if not name.replace("-", "").isalnum() or name != name.lower():
            raise ValueError(
                f"A sentence's name is lower-case words joined by hyphens ('u8s8-faster'); got {name!r}."
            )
        if not text.strip():
            raise ValueError(f"Sentence {name!r} needs its text: what the lesson's markdown says.")
        found = _depends(depends)

        def register(rule: Callable[[Figures], bool | None]) -> Callable[[Figures], bool | None]:
            if name in self.sentences:
                raise ValueError(f"Lesson {self.lesson} defines the sentence {name!r} twice.")
            self.sentences[name] = Sentence(
                self.lesson, str(section), name, text.strip(), rule, shows, found, scope, example
            )
            return rule

        return register

    def figures(self, section: str) -> Callable[[FiguresOf], FiguresOf]:
        """Register the decorated function as the one that turns section `section`'s measurements
        (the objects its check cell passes) into figures."""

        def register(function: FiguresOf) -> FiguresOf:
            self.figure_functions[str(section)] = function
            return function

        return register

    def end(self, function: Callable[..., None]) -> Callable[..., None]:
        """Register the lesson's bookkeeping at its end (results for the report, say)."""
        self.at_end = function
        return function

    def of_section(self, section: str) -> list[Sentence]:
        return [s for s in self.sentences.values() if s.section == str(section)]

    @property
    def sections(self) -> list[str]:
        return list(dict.fromkeys([*self.figure_functions, *(s.section for s in self.sentences.values())]))


def book_of(lesson: str) -> Book:
    """Lesson `lesson`'s claims (course_machinery/checks/claimsNN.py)."""
    import importlib

    try:
        module = importlib.import_module(f"course_machinery.checks.claims{lesson}")
    except ModuleNotFoundError as exc:
        if exc.name != f"course_machinery.checks.claims{lesson}":
            raise
        raise ValueError(
            f"Lesson {lesson!r} has no claims module (course_machinery/checks/claims{lesson}.py); lessons are "
            "named '00', '01b', ... as their files are."
        ) from None
    return module.book


def lessons_with_claims() -> list[str]:
    """Every lesson that has a claims module, in course order."""
    from pathlib import Path

    here = Path(__file__).parent / "checks"
    return sorted(p.stem.removeprefix("claims") for p in here.glob("claims[0-9][0-9]*.py"))


# --------------------------------------------------------------------------------------------
# The kernel's ledger (every verdict this kernel printed, latest per sentence)
# --------------------------------------------------------------------------------------------
_LEDGER: dict[str, Claim] = {}


def enter(found: Claim) -> None:
    """Enter a verdict in this kernel's ledger (a cell run again replaces its earlier verdict)."""
    _LEDGER[found.id or found.statement] = found


def ledger() -> list[Claim]:
    """The claims this kernel has checked, in order (one per sentence: the latest verdict)."""
    return list(_LEDGER.values())


def clear_ledger() -> None:
    """Forget the claims checked so far."""
    _LEDGER.clear()


def evaluate(
    statement: str,
    holds: bool | None,
    evidence: str = "",
    *,
    depends: str | Iterable[str],
    applies: bool = True,
    scope: str = "",
) -> Claim:
    """Build a one-off claim (outside a lesson's book) without printing it or entering it."""
    if not statement.strip():
        raise ValueError("A claim needs its sentence: the statement the lesson's markdown makes.")
    if holds is not None and not isinstance(holds, bool):
        holds = bool(holds)  # numpy bools
    found = _depends(depends)
    untimed = _timings_stand_in() if "speed" in found else ""
    return Claim(statement.strip(), holds, evidence, applies, scope, found, untimed)
