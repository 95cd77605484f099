"""Reference runs: the lessons' reference blocks are generated from the stored runs and kept current."""

from __future__ import annotations

import json

import pytest

from conftest import ROOT
from course_lib import reference
from course_lib.reference import ReferenceRun
from course_lib.tooling import notebooks
from course_lib.tooling import reference as blocks

ZEN3 = ReferenceRun(
    cpu_class="amd-epyc-avx2-only",
    label="AMD EPYC Zen 3, AVX2 only",
    commit="ce0944a",
    date="2026-11-30",
    source="quoted",
    figures={"03": {"s8s8": 0.4811, "kernels": {"value": 10, "commit": "63a1acc"}}},
)
ZEN4 = ReferenceRun(
    cpu_class="amd-epyc-avx-512-vnni",
    label="AMD EPYC Zen 4, AVX-512 VNNI",
    commit="b8fa592",
    date="2026-12-02",
    source="run",
    figures={"03": {"s8s8": 0.372}, "05": {"best": 2.2}},
)
SOURCE = """# %% [markdown]
# Before.
# <!-- reference: S8S8 ran at {s8s8:.2f}x, with {kernels} integer
# kernels -->
# stale text
# <!-- /reference -->
# After.

# %% [markdown]
# <!-- reference-table: S8S8 = {s8s8:.1f}x ; best of 05 = {05.best:.1f}x -->
# <!-- /reference -->
"""


def test_a_block_lists_each_reference_cpu_with_its_commits():
    out = blocks.render_source(SOURCE, "03", [ZEN3, ZEN4])
    assert "stale text" not in out and out.startswith("# %% [markdown]\n# Before.\n")
    assert (
        "# - **AMD EPYC Zen 3, AVX2 only** (commits 63a1acc, ce0944a): S8S8 ran at 0.48x, with 10 integer kernels"
        in out
    )
    assert "# - **AMD EPYC Zen 4, AVX-512 VNNI**: not measured on this CPU yet." in out  # no 'kernels' there
    assert "# <!-- /reference -->\n# After.\n" in out
    # the table: one row per CPU, a missing figure named as such, another lesson's figure by its number
    assert "# | **AMD EPYC Zen 3, AVX2 only** (commit ce0944a) | 0.5x | not measured |" in out
    assert "# | **AMD EPYC Zen 4, AVX-512 VNNI** (commit b8fa592) | 0.4x | 2.2x |" in out
    assert blocks.render_source(out, "03", [ZEN3, ZEN4]) == out  # regenerating changes nothing


def test_templates_and_their_fields_are_read_back():
    [(sentence, sentence_is_table), (table, table_is_table)] = blocks.templates(SOURCE)
    assert (sentence_is_table, table_is_table) == (False, True)
    assert sentence == "S8S8 ran at {s8s8:.2f}x, with {kernels} integer kernels"
    assert blocks.template_fields(table, "03") == [("03", "s8s8", ".1f"), ("05", "best", ".1f")]


@pytest.mark.parametrize(
    "broken, message",
    [
        ("# <!-- reference: {x} \n# no end\n", "no closing"),
        ("# <!-- reference: {x} -->\n# text\n", "no '# <!-- /reference -->'"),
        ("# <!-- reference-table: no equals sign -->\n# <!-- /reference -->\n", "header = text"),
    ],
)
def test_a_broken_block_says_what_is_wrong(broken, message):
    with pytest.raises(blocks.ReferenceError, match=message):
        blocks.render_source(broken, "03", [ZEN4])


def test_a_figure_that_cannot_take_its_format_names_itself():
    with pytest.raises(blocks.ReferenceError, match="s8s8"):
        blocks.render_source("# <!-- reference: {s8s8:d} -->\n# <!-- /reference -->\n", "03", [ZEN4])


def test_the_lessons_reference_blocks_are_current():
    assert blocks.stale() == [], "run `python -m course_lib notebooks`"


def test_everything_generated_from_the_sources_is_current():
    assert notebooks.regenerate(dry_run=True) == [], "run `python -m course_lib notebooks` (make notebooks)"


def test_every_quoted_figure_exists_in_a_stored_run():
    runs = reference.reference_runs()
    missing = sorted(
        f"{lesson}.{name}"
        for lesson, names in blocks.wanted_figures().items()
        for name in names
        if not any(run.figure(lesson, name) is not None for run in runs)
    )
    assert missing == [], f"templates quote figures no reference run has: {missing}"


def test_stored_runs_come_from_distinct_cpu_classes_with_their_provenance():
    runs = reference.reference_runs()
    assert len({r.cpu_class for r in runs}) == len(runs)
    for run in runs:
        assert run.label and run.commit and run.source and run.figures
        path = ROOT / "course_lib" / "reference_runs" / f"{run.cpu_class}.json"
        assert json.loads(path.read_text())["cpu_class"] == run.cpu_class


def test_recording_stores_this_machines_class_and_refuses_an_incomplete_run(tmp_path, private_data_dir):
    root = tmp_path / "course"
    (root / "notebooks" / "src").mkdir(parents=True)
    (root / "notebooks" / "src" / "03_x.py").write_text(
        "# %% [markdown]\n# <!-- reference: {a:.1f} and {b} -->\n# <!-- /reference -->\n"
    )
    with pytest.raises(blocks.ReferenceError, match="lesson 03 saved no figures"):
        blocks.record(root, commit="abc1234")
    reference.save_figures("03", {"a": 1.25})
    with pytest.raises(blocks.ReferenceError, match="did not save b"):
        blocks.record(root, commit="abc1234")
    reference.save_figures("03", {"a": 1.25, "b": "two"})
    path = blocks.record(root, commit="abc1234", directory=tmp_path / "runs")
    [run] = reference.reference_runs(tmp_path / "runs")
    assert path.stem == run.cpu_class == reference.cpu_class().slug
    assert run.figure("03", "a") == (1.25, "abc1234") and run.label == reference.cpu_class().label
    out = blocks.render_source((root / "notebooks" / "src" / "03_x.py").read_text(), "03", [run])
    assert "(commit abc1234): 1.2 and two" in out


def test_figures_refuse_what_json_cannot_hold(private_data_dir):
    with pytest.raises(TypeError, match="must be a number"):
        reference.save_figures("03", {"a": object()})
    with pytest.raises(ValueError, match="identifiers"):
        reference.save_figures("03", {"not a name": 1})


@pytest.mark.parametrize(
    "machine, features, label",
    [
        ("x86_64", ["AVX2"], "AVX2 only"),
        ("x86_64", ["AVX2", "AVX-512"], "AVX-512, no VNNI"),
        ("x86_64", ["AVX2", "AVX-512", "AVX-512 VNNI"], "AVX-512 VNNI"),
        ("x86_64", ["AVX2", "AVX-512", "AVX-512 VNNI", "AMX (INT8)"], "AVX-512 VNNI, AMX"),
        ("x86_64", ["AVX2", "AVX-VNNI"], "AVX2, AVX-VNNI"),
        ("arm64", ["ARM dot product", "ARM i8mm"], "ARM dot product, ARM i8mm"),
        ("aarch64", [], "ARM, no dot product"),
    ],
)
def test_cpu_classes_are_named_by_their_int8_instructions(machine, features, label):
    assert reference.isa_label(machine, features) == label
