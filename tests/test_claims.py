"""Claim cells: each verdict line says what it means, and only a contradicted claim fails a run."""

from __future__ import annotations

import nbformat
import pytest

from course_lib import claims
from course_lib.tooling.runner import claim_lines


def test_each_verdict_reads_as_what_it_means():
    held = claims.evaluate("S8S8 runs slower than fp32 here", True, "0.37x (0.35–0.39)")
    assert str(held) == "✔ Checked here: S8S8 runs slower than fp32 here (0.37x (0.35–0.39))"
    assert not held.failed
    differs = claims.evaluate("INT8 is faster at batch 64", False, "0.9x")
    assert differs.failed and str(differs).startswith("✘ Not so on this machine: INT8 is faster")
    assert "trust this run's figures" in str(differs)
    unsettled = claims.evaluate("batch 1 gains more", None, "intervals overlap")
    assert not unsettled.failed and str(unsettled).startswith("≈ Unsettled here")
    elsewhere = claims.evaluate("pairs saturate", False, applies=False, scope="x86 without VNNI")
    assert not elsewhere.failed
    assert str(elsewhere) == "· Not for this CPU (x86 without VNNI): pairs saturate"


def test_a_numpy_bool_counts_and_an_empty_sentence_is_refused():
    import numpy as np

    assert claims.evaluate("x", np.bool_(False)).failed
    with pytest.raises(ValueError, match="sentence"):
        claims.evaluate("  ", True)


def test_claim_prints_one_line_and_the_runner_finds_it(capsys):
    claims.claim("a sentence", True, "why")
    claims.claim("another", False)
    out = capsys.readouterr().out
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=out)]
    nb.cells = [cell]
    found = claim_lines(nb)
    assert found["holds"] == ["✔ Checked here: a sentence (why)"]
    assert len(found["differs"]) == 1 and found["differs"][0].startswith("✘ Not so on this machine: another")
