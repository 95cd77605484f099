"""Claim cells: each verdict line says what it means and what the sentence depends on, only a
contradicted claim fails a run, and every claim checked enters the ledger a reference run keeps."""

from __future__ import annotations

import nbformat
import numpy as np
import pytest

from course_lib import claims, reference
from course_lib.tooling.runner import claim_lines


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


def test_claim_prints_one_line_enters_the_ledger_and_the_runner_finds_it(capsys):
    claims.claim("a sentence", True, "why", depends="cpu")
    claims.claim("another", False, depends="weights")
    claims.claim("a sentence", None, "run again", depends="cpu")  # a cell run again: the latest verdict
    out = capsys.readouterr().out
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=out)]
    nb.cells = [cell]
    found = claim_lines(nb)
    assert found["holds"] == ["✔ Checked here: a sentence (why)"]
    assert len(found["differs"]) == 1 and found["differs"][0].startswith("✘ Not so on this machine: another")
    assert [(c.statement, c.verdict) for c in claims.ledger()] == [
        ("a sentence", "unsettled"),
        ("another", "contradicted"),
    ]


def test_saved_figures_keep_the_ledger_and_which_figures_are_timings(private_data_dir, capsys):
    claims.claim("U8S8 beats fp32", True, "1.4x", depends="speed")
    claims.claim("agreement at 99 %", True, depends=("weights", "cpu"))
    reference.save_figures("05", {"speedup": 1.4, "agreement": 99.5}, timed=["speedup"])
    saved = reference.load_figures("05")
    assert saved["timed"] == ["speedup"]
    assert saved["claims"] == [
        {
            "statement": "U8S8 beats fp32",
            "verdict": "held",
            "depends": ["speed"],
            "scope": "",
            "evidence": "1.4x",
        },
        {
            "statement": "agreement at 99 %",
            "verdict": "held",
            "depends": ["weights", "cpu"],
            "scope": "",
            "evidence": "",
        },
    ]
    with pytest.raises(ValueError, match="timed= names figures this lesson does not save: \\['ms'\\]"):
        reference.save_figures("05", {"speedup": 1.4}, timed=["ms"])


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
