"""Every sentence of a lesson that states a result is bound to the claim that checks it, and every
claim can fail (course_machinery/sentences.py, course_machinery/claims.py)."""

from __future__ import annotations

import ast
import re

import jupytext
import pytest

from conftest import ROOT
from course_machinery.claims import Book, book_of, faster, lessons_with_claims, noise
from course_machinery.reference import reference_runs
from course_machinery.sentences import (
    bound_claims,
    can_fail,
    constant_verdicts,
    sentences_of_markdown,
    size_words_unchecked,
    unbound,
)

SOURCES = sorted((ROOT / "notebooks" / "src").glob("[0-9][0-9]*_*.py"))
LESSONS = [s.name.split("_", 1)[0] for s in SOURCES]


def _sentences():
    return [s for lesson in lessons_with_claims() for s in book_of(lesson).sentences.values()]


# --------------------------------------------------------------------------------------------
# The finder itself, on planted text
# --------------------------------------------------------------------------------------------
def _problems(markdown: str) -> list[str]:
    return [s.text for s in sentences_of_markdown(markdown, "99") if s.problem()]


def test_a_planted_unbound_sentence_is_found():
    text = "Pre-processing is a step. U8S8 runs 1.4x faster than fp32 on this CPU. The end."
    assert _problems(text) == ["U8S8 runs 1.4x faster than fp32 on this CPU."]


@pytest.mark.parametrize(
    "sentence",
    [
        "S8S8 is slower.",
        "Both files agree.",
        "It takes several minutes.",
        "The file is far smaller.",
        "It shrinks the file by 75 %.",
        "A run takes 12.5 ms.",
        "The gap is 6 dB.",
        "It uses 44 MB.",
        "Every op runs on an integer kernel.",
        "None of them saturates.",
        "It runs as fast as fp32.",
        "Accuracy falls a few points.",
    ],
)
def test_each_kind_of_result_word_needs_a_binding(sentence):
    assert _problems(sentence) == [sentence]


def test_a_claim_marker_binds_the_sentence_it_follows_or_sits_in():
    text = (
        "U8S8 runs faster than fp32. <!-- claim: u8s8-faster --> S8S8 runs slower, <!-- claim: s8s8-slower --> "
        "because fewer of its ops are integer. <!-- claim: fewer -->"
    )
    found = sentences_of_markdown(text, "03")
    assert [s.markers for s in found] == [
        (("claim", "u8s8-faster"),),
        (("claim", "s8s8-slower"), ("claim", "fewer")),
    ]
    assert _problems(text) == []


def test_quotes_definitions_settings_questions_and_reference_blocks_pass():
    text = "\n\n".join(
        [
            "> **Quote** (seed 000): INT8 is 2-4x faster.",
            "*Jargon:* every tensor has a scale.",
            "Seed 004 says that all calibration sets must be representative. <!-- quote -->",
            "The lesson times every file at batch 64. <!-- setting -->",
            "Is S8S8 faster on ARM?",
            "<!-- reference: U8S8 {x:.2f}x -->\n*Reference runs*: Zen 3 1.55x faster.\n<!-- /reference -->",
            "Write `every` in `answer`.",
            'Write "more" or "fewer".',
        ]
    )
    assert _problems(text) == []


def test_a_quote_must_name_its_source():
    assert _problems("All models are wrong. <!-- quote -->") == ["All models are wrong."]


# --------------------------------------------------------------------------------------------
# The lessons
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_every_sentence_that_states_a_result_is_bound(source):
    found = unbound(source)
    assert found == [], (
        f"{source.name}: bind these to a claim, or mark them (course_machinery/sentences.py):\n"
        + "\n".join(f"  {why}: {s.text[:140]}" for s, why in found)
    )


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_every_claim_marker_names_a_sentence_of_a_claims_module(source):
    known = {s.id for s in _sentences()}
    unknown = sorted(set(bound_claims(source)) - known)
    assert unknown == [], f"{source.name} binds sentences no claims module defines: {unknown}"


def test_every_sentence_of_a_claims_module_is_bound_in_the_markdown():
    bound = {key for source in SOURCES for key in bound_claims(source)}
    never = sorted(s.id for s in _sentences() if s.id not in bound)
    assert never == [], f"sentences no lesson's markdown carries (<!-- claim: name -->): {never}"


def test_every_lesson_has_a_claims_module():
    assert sorted(lessons_with_claims()) == sorted(LESSONS)


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_checks_stay_out_of_the_teaching_cells(source):
    """No claim code in a lesson: at most one short check cell per section, and the last cell ends it."""
    cells = jupytext.read(source).cells
    text = source.read_text()
    assert "cl.claim(" not in text and "save_figures(" not in text
    assert "reference-claim:" not in text, "reference-claim blocks are replaced by the check tables"
    section, per_section = "intro", {}
    for cell in cells:
        if cell.cell_type == "markdown":
            for heading in re.findall(r"^## (.+)$", cell.source, re.M):
                section = heading
        elif "cl.verify(" in cell.source:
            per_section[section] = per_section.get(section, 0) + 1
            code = [line for line in cell.source.splitlines() if line.strip()]
            assert len(code) <= 4, f"{source.name}: a check cell of {len(code)} lines:\n{cell.source}"
            assert all(isinstance(s, ast.Expr) for s in ast.parse(cell.source).body), cell.source
    assert all(n == 1 for n in per_section.values()), per_section
    assert "cl.end_lesson(" in cells[-1].source, f"{source.name}: its last cell is cl.end_lesson(...)"


# --------------------------------------------------------------------------------------------
# Every claim can fail, and says what its size words say
# --------------------------------------------------------------------------------------------
def _stored_figures(sentence):
    """A stored run's figures that the sentence's rule reads without a missing figure."""
    from course_machinery.claims import Figures, MissingFigure, NotMeasured

    for run in reference_runs():
        figures = run.figures.get(sentence.lesson, {})
        figures = {k: v["value"] if isinstance(v, dict) and "masked" in v else v for k, v in figures.items()}
        try:
            sentence.rule(Figures(figures))
        except (MissingFigure, NotMeasured):
            continue
        return figures
    return sentence.example  # a case no reference CPU has met yet: the rule's own example


@pytest.mark.parametrize("sentence", _sentences(), ids=lambda s: s.id)
def test_no_rule_is_a_constant(sentence):
    assert constant_verdicts(sentence.rule) == []


@pytest.mark.parametrize("sentence", _sentences(), ids=lambda s: s.id)
def test_every_claim_can_fail(sentence):
    figures = _stored_figures(sentence)
    if figures is None:
        pytest.skip(f"no stored reference run has {sentence.id}'s figures yet (`reference record`)")
    assert can_fail(sentence, figures), f"{sentence.id}: no value of its figures makes the rule say False"


@pytest.mark.parametrize("sentence", _sentences(), ids=lambda s: s.id)
def test_size_words_are_decided_by_their_function(sentence):
    assert size_words_unchecked(sentence) == []


def test_every_sentence_has_a_stored_run_to_be_checked_against():
    missing = [s.id for s in _sentences() if _stored_figures(s) is None]
    assert missing == [], f"record a reference run: no stored run has the figures of {missing}"


def test_the_can_fail_check_catches_planted_rules():
    book = Book("99")

    @book.sentence("1", "never-false", "U8S8 runs faster", depends="speed")
    def _(f):
        return True if faster(f["speed"]) else None

    @book.sentence("1", "honest", "U8S8 runs faster", depends="speed")
    def _(f):
        return faster(f["speed"])

    @book.sentence("1", "barely", "The difference is within the noise or better", depends="weights")
    def _(f):
        return noise(f["gain"]) or f["gain"].value > -100

    figures = {
        "speed": {"value": 1.4, "low": 1.3, "high": 1.5, "unit": "x"},
        "gain": {"value": 0.1, "low": -0.1, "high": 0.3, "unit": "points"},
    }
    never, honest, barely = book.sentences.values()
    assert constant_verdicts(never.rule) and not can_fail(never, figures)
    assert not constant_verdicts(honest.rule) and can_fail(honest, figures)
    # a rule that fails only for values no run could measure (a loss of 100 points) barely can fail
    assert not constant_verdicts(barely.rule) and not can_fail(barely, figures)


def test_the_size_word_check_catches_a_planted_sentence():
    book = Book("99")

    @book.sentence("1", "a-few", "A few channels hold the outliers", depends="weights")
    def _(f):
        return f["channels"] < 60

    @book.sentence("1", "a-few-right", "A few channels hold the outliers", depends="weights")
    def _(f):
        from course_machinery.claims import a_few

        return a_few(f["channels"])

    loose, right = book.sentences.values()
    assert size_words_unchecked(loose) == ["'a few' (decide it with claims.a_few)"]
    assert size_words_unchecked(right) == []
