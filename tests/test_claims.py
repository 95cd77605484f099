"""Claim cells: each verdict line says what it means and what the sentence depends on, only a
contradicted claim fails a run, and every claim checked enters the ledger a reference run keeps."""

from __future__ import annotations

import nbformat
import numpy as np
import pytest

from course_machinery import claims, reference, verdicts
from course_machinery.hardware import cpu_summary
from course_machinery.runner import claim_lines


@pytest.fixture(autouse=True)
def fresh_ledger(monkeypatch):
    for name in (claims.MASK_ENV, claims.FLAGS_ENV):
        monkeypatch.delenv(name, raising=False)
    claims.clear_ledger()
    yield
    claims.clear_ledger()


def test_each_verdict_reads_as_what_it_means():
    held = claims.evaluate("S8S8 runs slower than fp32 here", True, "0.37x (0.35–0.39)", depends="speed")
    assert str(held) == "✔ Checked here: S8S8 runs slower than fp32 here (0.37x (0.35–0.39))"
    assert not held.failed and held.verdict == "held"
    differs = claims.evaluate("INT8 is faster at batch 64", False, "0.9x", depends="speed")
    assert differs.failed and str(differs).startswith("✘ Not so on this machine: INT8 is faster")
    assert "trust this run's figures" in str(differs) and differs.verdict == "contradicted"
    unsettled = claims.evaluate("batch 1 gains more", None, "intervals overlap", depends="speed")
    assert not unsettled.failed and str(unsettled).startswith("≈ Unsettled here")
    elsewhere = claims.evaluate(
        "pairs saturate", False, applies=False, scope="x86 without VNNI", depends="cpu"
    )
    assert not elsewhere.failed and elsewhere.verdict == "not for this CPU"
    assert str(elsewhere) == "· Not for this CPU (x86 without VNNI): pairs saturate"


def test_a_failed_claim_names_what_it_depends_on_and_what_to_report():
    weights = claims.evaluate("The largest |w| is a small multiple", False, "3.04x", depends="weights")
    line = str(weights)
    assert "the weights trained here" in line and "where the weights came from" in line
    assert "the CPU (" not in line  # a sentence about the weights is no report about the CPU
    speed = claims.evaluate("INT8 runs the MLP faster", False, "0.89x", depends=("speed",))
    assert "this CPU's speed" in str(speed) and "the CPU (" in str(speed)
    both = claims.evaluate("agreement stays at 99 %", False, depends=("weights", "cpu"))
    assert "the weights trained here" in str(both) and "instructions" in str(both)


def test_a_claim_must_say_what_it_depends_on():
    with pytest.raises(TypeError):
        claims.evaluate("x", True)  # depends is required
    with pytest.raises(ValueError, match="'speed', 'cpu', 'weights'"):
        claims.evaluate("x", True, depends=())
    with pytest.raises(ValueError, match="got \\['clock'\\]"):
        claims.evaluate("x", True, depends="clock")


def test_a_numpy_bool_counts_and_an_empty_sentence_is_refused():
    assert claims.evaluate("x", np.bool_(False), depends="cpu").failed
    with pytest.raises(ValueError, match="sentence"):
        claims.evaluate("  ", True, depends="cpu")


def test_on_a_masked_cpu_a_sentence_about_speed_is_not_timed(monkeypatch):
    monkeypatch.setenv(claims.MASK_ENV, "avx2")
    speed = claims.evaluate("INT8 beats fp32 at batch 64", False, "0.9x", depends="speed")
    assert not speed.failed and speed.verdict == "not timed"
    assert str(speed).startswith("· Not timed here (CPU features masked (COURSE_CPU_MASK=avx2)")
    kernels = claims.evaluate("U8S8 runs on integer kernels", False, depends="cpu")
    assert kernels.failed  # what the masked CPU runs is checked as on that class
    monkeypatch.delenv(claims.MASK_ENV)
    monkeypatch.setenv(claims.FLAGS_ENV, "avx2 fma")
    assert claims.evaluate("x", True, depends=("speed", "cpu")).verdict == "not timed"


def _book(monkeypatch):
    """A lesson '99' with one figures function and three sentences, as a claims module defines them."""
    book = claims.Book("99")

    @book.figures("1")
    def _(latency, size_ratio, openvino=None):
        return {
            "int8_b64": claims.speed(latency),
            "size": size_ratio,
            "ov_b64": claims.speed(openvino)
            if openvino
            else claims.not_measured("OpenVINO is not installed"),
        }

    @book.sentence(
        "1", "faster", "INT8 runs faster than fp32 at batch 64", shows="{int8_b64}", depends="speed"
    )
    def _(f):
        return claims.faster(f["int8_b64"])

    @book.sentence(
        "1", "quarter", "The file is about a quarter of fp32's size", shows="{size:.3f}", depends="runtime"
    )
    def _(f):
        return claims.a_quarter(f["size"])

    @book.sentence(
        "1", "ov-faster", "OpenVINO runs it faster", shows="{ov_b64}", depends="speed", scope=claims.X86
    )
    def _(f):
        return claims.faster(f["ov_b64"])

    monkeypatch.setattr(verdicts, "book_of", lambda lesson: book)
    facts = {"x86": True, "arm": False, "vnni": True, "amx": False, "saturates": False}
    monkeypatch.setattr(verdicts, "cpu_facts", lambda: facts)
    return book


class _Comparison:
    def __init__(self, speedup, low, high):
        self.speedup, self.speedup_low, self.speedup_high = speedup, low, high


def test_verify_checks_a_section_prints_its_verdicts_and_saves_them(monkeypatch, private_data_dir, capsys):
    _book(monkeypatch)
    verdicts._FIGURES.clear()
    verdicts.verify("99.1", latency=_Comparison(0.9, 0.85, 0.95), size_ratio=0.26)
    out = capsys.readouterr().out
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=out)]
    nb.cells = [cell]
    found = claim_lines(nb)
    assert len(found["differs"]) == 1
    assert found["differs"][0].startswith(
        "✘ Not so on this machine: INT8 runs faster than fp32 at batch 64 (0.90x (0.85–0.95)). The lesson's text"
    )
    assert f"the CPU ({cpu_summary()})" in found["differs"][0]
    assert found["holds"] == ["✔ Checked here: The file is about a quarter of fp32's size (0.260)"]
    assert found["unmeasured"] == ["· Not measured here (OpenVINO is not installed): OpenVINO runs it faster"]
    saved = reference.load_figures("99")
    assert saved["timed"] == ["int8_b64"]
    records = {r["id"]: r for r in saved["claims"]}
    assert records["99.ov-faster"]["verdict"] == "not measured"
    assert records["99.ov-faster"]["reason"] == "OpenVINO is not installed"
    assert len(records["99.quarter"]["fingerprint"]) == 12
    verdicts.end_lesson("99")
    line = capsys.readouterr().out.splitlines()[0]
    assert line.startswith("Lesson 99 on this machine (") and line.endswith(
        "3 sentences checked: 1 held, 1 contradicted, 0 unsettled, 1 not measured, 0 not for this CPU."
    )


def test_a_reference_cpu_shows_its_verdict_only_for_the_sentence_it_checked(monkeypatch):
    """A stored verdict never stands beside a sentence it was not checked against: reworded or with a
    changed rule, the sentence has another fingerprint, and the reference column says ○."""
    book = _book(monkeypatch)
    sentence = book.sentences["quarter"]
    current = {"verdict": "held", "fingerprint": sentence.fingerprint, "evidence": "0.250"}
    stale = {**current, "fingerprint": "0123456789ab"}

    class Run:
        label, commit = "AMD EPYC Zen 3, AVX2 only", "abc1234"

        def __init__(self, record):
            self.sentences, self.figures = {"99": {"quarter": record}}, {"99": {"size": 0.25}}

    assert verdicts.reference_cell(sentence, Run(current)) == "0.250 ✔"
    assert verdicts.reference_cell(sentence, Run(stale)) == "0.250 ○"  # its figure, not its verdict
    assert verdicts.reference_cell(sentence, Run({})) == "0.250 ○"


def test_a_sentence_fingerprint_follows_its_words_and_its_rule():
    first, second, third = claims.Book("98"), claims.Book("98"), claims.Book("98")

    @first.sentence("1", "s", "INT8 runs faster", depends="speed")
    def _(f):
        return claims.faster(f["x"])

    @second.sentence("1", "s", "INT8 runs faster", depends="speed")
    def _(f):
        return claims.faster(f["x"], than=1.05)

    @third.sentence("1", "s", "INT8 runs quicker", depends="speed")
    def _(f):
        return claims.faster(f["x"])

    prints = {b.sentences["s"].fingerprint for b in (first, second, third)}
    assert len(prints) == 3


@pytest.mark.parametrize(
    "verdicts, expected",
    [
        ((True, True), True),
        ((True, None), None),
        ((None, False, True), False),
        (([True, np.bool_(True)],), True),
        ((iter([True, np.bool_(False)]),), False),
        (((v for v in (True, None)),), None),
    ],
)
def test_all_of_reads_several_verdicts_as_one(verdicts, expected):
    assert claims.all_of(*verdicts) is expected


@pytest.mark.parametrize(
    "value, low, high, expected",
    [
        (1.04, 0.97, 1.10, True),  # the Zen 4 reference run's reduce_range against per_channel
        (1.32, 0.99, 1.59, None),  # a noisy CI run: its point is outside 20 %, its interval reaches 1.0
        (1.50, 1.30, 1.70, False),  # wholly above the band
        (0.60, 0.50, 0.70, False),  # wholly below it
        (1.00, 0.50, 1.60, None),  # wider than the band on both sides: cannot tell
    ],
)
def test_about_judges_a_measured_interval_by_its_ends(value, low, high, expected):
    assert claims.about(claims.Interval(value, low, high, "x"), 1.0) is expected


def test_about_on_a_plain_number_is_within_twenty_percent():
    assert claims.about(1.19, 1.0) and not claims.about(1.3, 1.0)


def test_the_report_lists_every_sentence_that_did_not_hold_with_its_evidence(
    monkeypatch, private_data_dir, capsys
):
    from course_machinery import report

    _book(monkeypatch)
    verdicts._FIGURES.clear()
    verdicts.verify("99.1", latency=_Comparison(0.9, 0.85, 0.95), size_ratio=0.26)
    found = report.sentence_counts(["99"])
    assert found["counts"]["99"]["held"] == 1 and found["counts"]["99"]["contradicted"] == 1
    assert [(r["sentence"], r["verdict"], r["evidence"]) for r in found["not_held"]] == [
        ("INT8 runs faster than fp32 at batch 64", "contradicted", "0.90x (0.85–0.95)"),
        ("OpenVINO runs it faster", "not measured", "OpenVINO is not installed"),
    ]
    text = "\n".join(report.sentences_lines(found))
    assert "Every sentence that did not hold here" in text and "OpenVINO is not installed" in text
