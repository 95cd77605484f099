"""The check cell: a section's sentences checked on this run, in one table beside the reference CPUs.

Each section of a lesson that states measured results ends with one short cell,

    cl.verify("03.3", scored=scored, ran=ran)

which hands what the section measured to the lesson's claims module (course_machinery/checks/claimsNN.py),
turns it into figures, checks every sentence of that section on them and shows one table: the
sentence, this machine's figure, each reference CPU's figure with its stored verdict, and this
run's verdict. The lesson's last cell, `cl.end_lesson("03")`, says how many sentences held and lists
every one that did not, with its evidence.

Every call also saves the lesson's figures and verdicts so far (`reference.save_figures`), which
`python -m course_lib reference record` stores as this CPU class's reference run.
"""

from __future__ import annotations

from typing import Any

from .claims import (
    DIFFERS,
    MARKS,
    Claim,
    MissingFigure,
    Sentence,
    _timings_stand_in,
    book_of,
    cpu_facts,
    enter,
    ledger,
)

# This kernel's figures, by lesson (one kernel runs one lesson; a cell run again replaces its figures).
_FIGURES: dict[str, dict[str, Any]] = {}
ORDER = ("held", "contradicted", "unsettled", "not measured", "not for this CPU", "not timed")
STALE = "○"  # the reference run checked an earlier wording or rule of this sentence, or none


def _split(section: str) -> tuple[str, str]:
    lesson, _, part = str(section).partition(".")
    if not part:
        raise ValueError(
            f"verify() takes 'lesson.section', e.g. '03.3' for lesson 03's section 3; got {section!r}."
        )
    return lesson, part


def figures(lesson: str) -> dict[str, Any]:
    """The figures lesson `lesson` has measured so far in this kernel."""
    return _FIGURES.setdefault(str(lesson), {})


def _short(label: str) -> str:
    """'Zen 3 (AVX2)' for 'AMD EPYC Zen 3, AVX2 only': a reference CPU as a column heading."""
    name, _, isa = label.partition(", ")
    words = [w for w in name.split() if w not in ("AMD", "EPYC", "Intel", "Apple", "Ampere", "AWS")]
    if "AMX" in isa:
        short_isa = "AMX"
    elif "VNNI" in isa:
        short_isa = "VNNI"
    elif "AVX2" in isa:
        short_isa = "AVX2"
    elif isa.startswith("emulated"):  # 'ARM, emulated (Cortex-A72): not timed' -> 'ARM (emulated)'
        short_isa = "emulated"
    else:
        short_isa = isa.replace("ARM ", "").replace(", emulated", "")
    return f"{' '.join(words) or name} ({short_isa})" if short_isa else " ".join(words) or name


def reference_cell(sentence: Sentence, run: Any) -> str:
    """One reference CPU's cell for a sentence: its figure and its stored verdict's mark, or ○ when
    that run checked an earlier version of the sentence (or never checked it)."""
    record = run.sentences.get(sentence.lesson, {}).get(sentence.name) if hasattr(run, "sentences") else None
    if record and record.get("fingerprint") == sentence.fingerprint:
        shown = record.get("evidence") or ""
        return f"{shown} {MARKS.get(record['verdict'], '?')}".strip()
    from .claims import Figures, NotMeasured, show

    stored = {
        k: v.get("value", v) if isinstance(v, dict) and "masked" in v else v
        for k, v in run.figures.get(sentence.lesson, {}).items()
    }
    try:
        shown = show(sentence.shows, Figures(stored)) if sentence.shows else ""
    except (MissingFigure, NotMeasured, KeyError, ValueError, TypeError):
        shown = ""
    return f"{shown} {STALE}".strip()


class CheckTable:
    """A section's verdicts: Markdown in a notebook, one verdict line per sentence as plain text."""

    def __init__(self, section: str, claims: list[tuple[Sentence, Claim]], runs: list[Any]):
        self.section, self.claims, self.runs = section, claims, runs

    def rows(self) -> list[dict[str, str]]:
        rows = []
        for sentence, found in self.claims:
            row = {"sentence": sentence.text, "this machine": found.evidence or "—"}
            for run in self.runs:
                row[_short(run.label)] = reference_cell(sentence, run)
            verdict = found.verdict
            if found.unmeasured:
                verdict += f": {found.unmeasured}"
            elif not found.applies:
                verdict += f" (about {found.scope})"
            row["verdict here"] = f"{found.status.split()[0]} {verdict}"
            rows.append(row)
        return rows

    def _repr_markdown_(self) -> str:
        from course_lib.measure import markdown_table

        legend = "; ".join(
            f"{_short(r.label)}: {r.label}, commit {getattr(r, 'sentences_commit', '') or r.commit}"
            for r in self.runs
        )
        lines = [markdown_table(self.rows())]
        if self.runs:
            lines.append(
                f"\n*Reference CPUs* (the course's stored runs): {legend}. ✔ held, ✘ contradicted, "
                f"≈ unsettled, ∅ not measured, – not for that CPU, {STALE} not checked there since the "
                "sentence last changed."
            )
        for _, found in self.claims:
            if found.failed:
                lines.append(f"\n{found}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return "\n".join(str(found) for _, found in self.claims)


def _show(table: Any) -> None:
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:  # pragma: no cover - IPython comes with the course's dependencies
        print(repr(table))
        return
    if get_ipython() is None:
        print(repr(table))
    else:
        display(table)


def _save(lesson: str) -> None:
    from .reference import save_figures

    found = figures(lesson)
    timed = [
        k
        for k, v in found.items()
        if (isinstance(v, dict) and v.get("unit") == "x") or k in book_of(lesson).timed
    ]
    save_figures(lesson, found, timed=timed)


def check_section(lesson: str, section: str, measured: dict[str, Any]) -> list[tuple[Sentence, Claim]]:
    """Add a section's figures to the lesson's and check its sentences on them (no display)."""
    book = book_of(lesson)
    current = figures(lesson)
    current.setdefault("cpu_facts", cpu_facts())
    current.update(measured)
    untimed = _timings_stand_in()
    out = []
    for sentence in book.of_section(section):
        try:
            found = sentence.check(current, current["cpu_facts"], untimed)
        except MissingFigure as missing:
            raise KeyError(
                f"Sentence {sentence.id} reads the figure {missing.args[0]!r}, which section {section} of lesson "
                f"{lesson} did not measure. Return it from the section's @book.figures function."
            ) from None
        enter(found)
        out.append((sentence, found))
    return out


def verify(section: str, **measured: Any) -> None:
    """Check a section's sentences on what it measured, and show them in one table beside the
    reference CPUs. `section` is 'lesson.section' ('03.3'); the keyword arguments are the objects
    the section measured, as its figures function in the lesson's claims module takes them."""
    from .reference import reference_runs

    lesson, part = _split(section)
    book = book_of(lesson)
    function = book.figure_functions.get(part)
    if function is None and measured:
        raise ValueError(
            f"Lesson {lesson} has no figures function for section {part} (@book.figures({part!r}))."
        )
    found = function(**measured) if function else {}
    claims = check_section(lesson, part, found)
    _save(lesson)
    if claims:
        _show(CheckTable(section, claims, reference_runs()))


def counts(claims: list[Claim]) -> dict[str, int]:
    """How many claims got each verdict, in the course's order."""
    out = {verdict: 0 for verdict in ORDER}
    for c in claims:
        out[c.verdict] += 1
    return out


def counts_line(lesson: str, claims: list[Claim]) -> str:
    from course_machinery.hardware import cpu_summary

    found = counts(claims)
    parts = ", ".join(f"{n} {verdict}" for verdict, n in found.items() if n or verdict in ORDER[:5])
    return f"Lesson {lesson} on this machine ({cpu_summary()}): {len(claims)} sentences checked: {parts}."


def end_lesson(lesson: str, **measured: Any) -> None:
    """The lesson's last cell: its bookkeeping, how many of its sentences held here, and every one
    that did not, with its evidence."""
    book = book_of(lesson)
    if book.at_end is not None:
        book.at_end(**measured)
    mine = [c for c in ledger() if c.id.startswith(f"{lesson}.")]
    _save(lesson)
    lines = [counts_line(lesson, mine)]
    missing = [s.id for s in book.sentences.values() if s.id not in {c.id for c in mine}]
    if missing:
        lines.append(f"Not checked in this run (their cells did not run): {', '.join(missing)}.")
    for c in mine:
        if c.verdict in ("contradicted", "unsettled", "not measured"):
            lines.append(f"  {c}")
    print("\n".join(lines))


def failed(claims: list[Claim]) -> list[Claim]:
    return [c for c in claims if c.status == DIFFERS]
