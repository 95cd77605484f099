"""Reference runs: the lessons' reference blocks are generated from the stored runs and kept current."""

from __future__ import annotations

import json

import pytest

from conftest import ROOT
from course_machinery import notebooks, reference
from course_machinery import recording as blocks
from course_machinery.reference import ReferenceRun

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


def test_a_block_lists_each_reference_cpu_on_one_line_with_its_commits():
    out = blocks.render_source(SOURCE, "03", [ZEN3, ZEN4])
    assert "stale text" not in out and out.startswith("# %% [markdown]\n# Before.\n")
    assert (
        "# *Reference runs* (the course's stored measurements, not yours): **Zen 3 (AVX2)** S8S8 ran at 0.48x, "
        "with 10 integer kernels; **Zen 4 (VNNI)** not measured yet (commits 63a1acc, ce0944a).\n" in out
    )
    assert "# <!-- /reference -->\n# After.\n" in out
    # the table: one row per CPU, a missing figure named as such, another lesson's figure by its number
    assert "# | **AMD EPYC Zen 3, AVX2 only** (commit ce0944a) | 0.5x | not measured |" in out
    assert "# | **AMD EPYC Zen 4, AVX-512 VNNI** (commit b8fa592) | 0.4x | 2.2x |" in out
    assert blocks.render_source(out, "03", [ZEN3, ZEN4]) == out  # regenerating changes nothing


def test_templates_and_their_fields_are_read_back():
    [(sentence, sentence_kind), (table, table_kind)] = blocks.templates(SOURCE)
    assert (sentence_kind, table_kind) == ("sentence", "table")
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
    with pytest.raises(blocks.ReferenceRunError, match=message):
        blocks.render_source(broken, "03", [ZEN4])


def test_a_figure_that_cannot_take_its_format_names_itself():
    with pytest.raises(blocks.ReferenceRunError, match="s8s8"):
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
        path = ROOT / "course_machinery" / "reference_runs" / f"{run.cpu_class}.json"
        assert json.loads(path.read_text())["cpu_class"] == run.cpu_class


def test_recording_stores_this_machines_class_and_refuses_an_incomplete_run(tmp_path, private_data_dir):
    root = tmp_path / "course"
    (root / "notebooks" / "src").mkdir(parents=True)
    (root / "notebooks" / "src" / "03_x.py").write_text(
        "# %% [markdown]\n# <!-- reference: {a:.1f} and {b} -->\n# <!-- /reference -->\n"
    )
    with pytest.raises(blocks.ReferenceRunError, match="lesson 03 saved no figures"):
        blocks.record(root, commit="abc1234")
    reference.save_figures("03", {"a": 1.25})
    with pytest.raises(blocks.ReferenceRunError, match="did not save b"):
        blocks.record(root, commit="abc1234")
    reference.save_figures("03", {"a": 1.25, "b": "two"})
    path = blocks.record(root, commit="abc1234", directory=tmp_path / "runs")
    [run] = reference.reference_runs(tmp_path / "runs")
    assert path.stem == run.cpu_class == reference.cpu_class().slug
    assert run.figure("03", "a") == (1.25, "abc1234") and run.label == reference.cpu_class().label
    out = blocks.render_source((root / "notebooks" / "src" / "03_x.py").read_text(), "03", [run])
    assert "1.2 and two (commit abc1234)." in out


def test_recording_replaces_its_class_stored_under_an_older_file_name(tmp_path, private_data_dir):
    root = tmp_path / "course"
    (root / "notebooks" / "src").mkdir(parents=True)
    source = "# %% [markdown]\n# <!-- reference: {a} -->\n# <!-- /reference -->\n"
    (root / "notebooks" / "src" / "03_x.py").write_text(source)
    reference.save_figures("03", {"a": 2.5})
    runs = tmp_path / "runs"
    runs.mkdir()
    here = reference.cpu_class()
    older = {"cpu_class": "older-name", "label": here.label, "machine": "x86_64", "commit": "0000000"}
    older |= {"date": "2026-12-01", "source": "an older run"}
    (runs / "older-name.json").write_text(json.dumps({**older, "figures": {"03": {"a": {"value": 1.0}}}}))
    path = blocks.record(root, commit="abc1234", directory=runs)
    [run] = reference.reference_runs(runs)  # one run for the class, not two
    assert path.name == "older-name.json" and run.figure("03", "a") == (2.5, "abc1234")


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


# --------------------------------------------------------------------------------------------
# The claims ledger
# --------------------------------------------------------------------------------------------
def _claim(statement, verdict, depends=("speed",), scope=""):
    return {
        "statement": statement,
        "verdict": verdict,
        "depends": list(depends),
        "scope": scope,
        "evidence": "",
    }


AVX2 = ReferenceRun(
    cpu_class="amd-epyc-avx2-only",
    label="AMD EPYC Zen 3, AVX2 only",
    commit="ce0944a",
    date="2026-11-30",
    source="quoted",
    figures={
        "05": {"agreement": {"value": 98.9, "commit": "abc1234", "masked": "Intel Xeon"}, "speed": 1.58}
    },
    claims={
        "05": [_claim("U8S8 beats fp32", "not timed"), _claim("Saturation costs agreement", "held", ["cpu"])]
    },
    claims_commit="abc1234",
    claims_source="masked: CPUID masked to avx2 on an Intel Xeon",
)
AMX = ReferenceRun(
    cpu_class="intel-xeon-avx-512-vnni-amx",
    label="Intel Xeon, AVX-512 VNNI, AMX",
    commit="def5678",
    date="2026-12-04",
    source="run",
    figures={"05": {"agreement": 99.9, "speed": 1.35}},
    claims={
        "05": [
            _claim("U8S8 beats fp32", "held"),
            _claim("Saturation costs agreement", "not for this CPU", ["cpu"], "x86 without VNNI"),
        ]
    },
)


def test_a_figure_measured_on_a_masked_cpu_is_named_as_emulated():
    out = blocks.render_source(
        "# <!-- reference: agreement {agreement:.1f} %, speed {speed:.2f}x -->\n# <!-- /reference -->\n"
        "# <!-- reference: agreement {agreement:.1f} % -->\n# <!-- /reference -->\n",
        "05",
        [AVX2],
    )
    # a line with one figure from the masked run is named as emulated, with both commits
    assert "**Zen 3 (AVX2), emulated** agreement 98.9 %, speed 1.58x (commits abc1234, ce0944a)." in out
    assert "**Zen 3 (AVX2), emulated** agreement 98.9 % (commit abc1234)." in out


def _ledgers(*runs):
    return [blocks.Ledger(r.label, r.claims_commit or r.commit, r.claims_source, r.claims) for r in runs]


def test_the_ledger_check_finds_a_planted_contradiction_across_classes():
    assert blocks.conflicts(_ledgers(AVX2, AMX)) == []  # scope sets them apart; not timed is no verdict
    planted = ReferenceRun(**{**AVX2.__dict__, "claims": {"05": [_claim("U8S8 beats fp32", "contradicted")]}})
    [conflict] = blocks.conflicts(_ledgers(planted, AMX))
    assert (conflict.lesson, conflict.statement) == ("05", "U8S8 beats fp32")
    assert conflict.held == ("Intel Xeon, AVX-512 VNNI, AMX",)
    assert conflict.contradicted == ("AMD EPYC Zen 3, AVX2 only",) and conflict.depends == ("speed",)
    assert "reword it to what holds on all of them, or scope it" in str(conflict)
    assert blocks.contradictions(_ledgers(planted)) == [
        "AMD EPYC Zen 3, AVX2 only (commit abc1234), lesson 05: U8S8 beats fp32"
    ]


def test_the_stored_ledgers_have_no_contradiction_and_no_conflict():
    found = blocks.ledgers()
    assert found, "no stored ledger: `python -m course_lib reference record` after a full run"
    assert blocks.contradictions(found) == []
    assert [str(c) for c in blocks.conflicts(found)] == []


def test_a_planted_contradiction_in_the_stored_ledgers_is_caught():
    found = blocks.ledgers()
    held = [
        (lesson, c)
        for ledger in found
        for lesson, cs in ledger.claims.items()
        for c in cs
        if c["verdict"] == "held"
    ]
    lesson, record = held[0]
    planted = blocks.Ledger("planted", "0000000", "test", {lesson: [{**record, "verdict": "contradicted"}]})
    [conflict] = blocks.conflicts([*found, planted])
    assert conflict.statement == record["statement"] and conflict.contradicted == ("planted",)


def test_the_stored_runs_contradict_no_current_sentence():
    found = blocks.sentence_ledgers()
    assert [key for ledger in found for key in ledger.contradicted()] == []
    assert blocks.sentence_conflicts(found) == []


def test_a_stale_verdict_is_never_counted_for_the_sentence_as_it_reads_now():
    """A stored run's verdict on an earlier version of a sentence (another fingerprint) is not a
    verdict on the sentence now: `reference check` counts it as not checked since it changed."""
    from course_machinery.claims import book_of, lessons_with_claims

    sentence = next(iter(book_of(lessons_with_claims()[0]).sentences.values()))
    record = {"verdict": "held", "fingerprint": sentence.fingerprint, "evidence": "x"}
    current = ReferenceRun(**{**ZEN4.__dict__, "sentences": {sentence.lesson: {sentence.name: record}}})
    planted = ReferenceRun(
        **{
            **ZEN4.__dict__,
            "sentences": {sentence.lesson: {sentence.name: {**record, "fingerprint": "stale0000000"}}},
        }
    )
    [fresh], [old] = blocks.sentence_ledgers([current]), blocks.sentence_ledgers([planted])
    assert fresh.verdicts[sentence.id]["verdict"] == "held" and sentence.id not in fresh.stale
    assert sentence.id not in old.verdicts and sentence.id in old.stale and old.counts() == {}
    against = ReferenceRun(
        **{
            **ZEN3.__dict__,
            "sentences": {sentence.lesson: {sentence.name: {**record, "verdict": "contradicted"}}},
        }
    )
    both = blocks.sentence_ledgers([current, against])
    assert blocks.sentence_conflicts(both) == [
        f"{sentence.id} held on AMD EPYC Zen 4, AVX-512 VNNI and was contradicted on AMD EPYC Zen 3, AVX2 only"
    ]


def test_recording_keeps_the_claims_and_a_masked_run_stands_in_for_its_class(
    tmp_path, private_data_dir, monkeypatch
):
    from course_machinery import claims, results

    root = tmp_path / "course"
    (root / "notebooks" / "src").mkdir(parents=True)
    (root / "notebooks" / "src" / "05_x.py").write_text(
        "# %% [markdown]\n# <!-- reference: {agreement:.1f} and {speed:.2f} -->\n# <!-- /reference -->\n"
    )
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "amd-epyc-avx2-only.json").write_text(json.dumps(AVX2.to_dict()))
    masked = {
        "cpu": "Intel(R) Xeon(R) Processor",
        "machine": "x86_64",
        "int8_features": ["AVX2"],
        "cpu_mask": "avx2",
        "hash": "feedbeef",
        "versions": {},
    }
    monkeypatch.setattr(results, "environment_fingerprint", lambda: masked)
    claims.clear_ledger()
    claims.enter(claims.evaluate("Saturation costs agreement", True, depends="cpu"))
    reference.save_figures("05", {"agreement": 97.5, "speed": 0.02}, timed=["speed"])
    path = blocks.record(root, commit="9999999", directory=runs)
    [run] = reference.reference_runs(runs)
    assert path.name == "amd-epyc-avx2-only.json" and run.label == AVX2.label  # the class it stands in for
    assert (
        run.figure("05", "agreement") == (97.5, "9999999")
        and run.masked_host("05", "agreement") == "Intel Xeon"
    )
    assert run.figure("05", "speed") == (1.58, "ce0944a")  # the host's timing is not the class's
    assert run.claims == {"05": [_claim("Saturation costs agreement", "held", ["cpu"])]}
    assert run.claims_commit == "9999999" and "masked" in run.claims_source
    # keeping what the class measured itself: its own figure stays, a masked one is replaced
    (runs / "amd-epyc-avx2-only.json").write_text(
        json.dumps({**AVX2.to_dict(), "figures": {"05": {"agreement": 98.9, "speed": 1.58}}})
    )
    reference.save_figures("05", {"agreement": 96.5, "speed": 0.02, "new": 3}, timed=["speed"])
    blocks.record(root, commit="8888888", directory=runs, keep_measured=True)
    [run] = reference.reference_runs(runs)
    assert run.figure("05", "agreement") == (98.9, "ce0944a") and run.figure("05", "new") == (3, "8888888")
    # a second environment in the same run is refused
    monkeypatch.setattr(results, "environment_fingerprint", lambda: {**masked, "hash": "other"})
    reference.save_figures("04", {"x": 1})
    (root / "notebooks" / "src" / "04_y.py").write_text(
        "# %% [markdown]\n# <!-- reference: {x} -->\n# <!-- /reference -->\n"
    )
    with pytest.raises(blocks.ReferenceRunError, match="2 environments"):
        blocks.record(root, commit="9999999", directory=runs)


def test_an_extra_ledger_is_stored_beside_the_runs(tmp_path, private_data_dir):
    from course_machinery import claims

    root = tmp_path / "course"
    (root / "notebooks" / "src").mkdir(parents=True)
    (root / "notebooks" / "src" / "01_x.py").write_text(
        "# %% [markdown]\n# A lesson without reference blocks.\n"
    )
    with pytest.raises(blocks.ReferenceRunError, match="no lesson saved its claims"):
        blocks.record_ledger("Intel Xeon, seed 2", root, directory=tmp_path / "runs")
    claims.clear_ledger()
    claims.enter(claims.evaluate("At 4 bits clipping wins", True, depends="weights"))
    reference.save_figures("01", {"gain": 6.5})
    path = blocks.record_ledger("Intel Xeon, seed 2", root, directory=tmp_path / "runs", commit="1234567")
    assert path == tmp_path / "runs" / "ledgers" / "intel-xeon-seed-2.json"
    [ledger] = blocks.ledgers(tmp_path / "runs")
    assert ledger.name == "Intel Xeon, seed 2" and ledger.counts() == {"held": 1}


def test_an_order_block_ranks_the_classes_by_its_first_figure():
    source = "# <!-- reference-order: {speed:.2f}x (agreement {agreement:.1f} %) -->\n# <!-- /reference -->\n"
    out = blocks.render_source(source, "05", [AMX, AVX2, ZEN4])
    assert (
        "# *Reference runs, largest first* (the course's stored measurements): **AMD EPYC Zen 3, AVX2 only** "
        "(commit ce0944a; commit abc1234, emulated: CPUID masked on an Intel Xeon) 1.58x (agreement 98.9 %); "
        "**Intel Xeon, AVX-512 VNNI, AMX** (commit def5678) 1.35x (agreement 99.9 %). "
        "Not measured on **AMD EPYC Zen 4, AVX-512 VNNI**." in out
    )
    with pytest.raises(blocks.ReferenceRunError, match="needs a figure to rank by"):
        blocks.render_source("# <!-- reference-order: no figure -->\n# <!-- /reference -->\n", "05", [AMX])


ZEN4_SLUG = "amd-epyc-avx-512-vnni"
RR_ID = "02b.rr-about-same-speed"


def _stored_class(tmp_path, slug, *, rr=None, stale=True):
    """A copy of a stored class's file in tmp_path, its 02b reduce_range verdict made stale (a rule
    since changed) or current, and, with `rr`, its stored rr_vs_pc interval replaced."""
    from course_machinery.claims import book_of

    raw = json.loads((reference.REFERENCE_DIR / f"{slug}.json").read_text())
    current = book_of("02b").sentences["rr-about-same-speed"].fingerprint
    raw["sentences"]["02b"]["rr-about-same-speed"]["fingerprint"] = "stale0000000" if stale else current
    if rr is not None:
        raw["figures"]["02b"]["rr_vs_pc"] = dict(zip(("value", "low", "high"), rr, strict=True)) | {
            "unit": "x"
        }
    (tmp_path / f"{slug}.json").write_text(json.dumps(raw))
    return tmp_path


@pytest.mark.parametrize(
    ("rr", "verdict"),
    [((1.04, 0.97, 1.10), "held"), ((1.32, 0.99, 1.59), "unsettled"), ((1.4, 1.3, 1.5), "contradicted")],
)
def test_a_changed_sentence_is_judged_again_from_the_classs_stored_figures(tmp_path, rr, verdict):
    folder = _stored_class(tmp_path, ZEN4_SLUG, rr=rr)
    (before,) = blocks.sentence_ledgers(reference.reference_runs(folder))
    assert RR_ID in before.stale
    blocks.rejudge(ZEN4_SLUG, [RR_ID], directory=folder, commit="test0001")
    (after,) = blocks.sentence_ledgers(reference.reference_runs(folder))
    assert RR_ID not in after.stale and after.verdicts[RR_ID]["verdict"] == verdict
    evidence = after.verdicts[RR_ID]["evidence"]
    assert (
        evidence.startswith(f"{rr[0]:.2f}x")
        and "judged again at test0001 from the figures of the run at" in evidence
    )
    # nothing else moved
    assert {k: v for k, v in after.verdicts.items() if k != RR_ID} == before.verdicts


def test_judging_again_refuses_what_it_cannot_do_soundly(tmp_path):
    folder = _stored_class(tmp_path, ZEN4_SLUG, stale=False)
    with pytest.raises(blocks.ReferenceRunError, match="has not changed since .* its stored verdict stands"):
        blocks.rejudge(ZEN4_SLUG, [RR_ID], directory=folder, commit="t")
    with pytest.raises(blocks.ReferenceRunError, match="found no '02b.no-such-sentence'"):
        blocks.rejudge(ZEN4_SLUG, ["02b.no-such-sentence"], directory=folder, commit="t")
    with pytest.raises(
        blocks.ReferenceRunError, match="found no amd-epyc-zen9.json .*stored: amd-epyc-avx-512-vnni"
    ):
        blocks.rejudge("amd-epyc-zen9", [RR_ID], directory=folder, commit="t")
    raw = json.loads((folder / f"{ZEN4_SLUG}.json").read_text())
    raw["sentences"]["02b"]["rr-about-same-speed"]["fingerprint"] = "stale0000000"
    del raw["figures"]["02b"]["rr_vs_pc"]
    (folder / f"{ZEN4_SLUG}.json").write_text(json.dumps(raw))
    with pytest.raises(
        blocks.ReferenceRunError, match="stored no figure 'rr_vs_pc' for 02b.rr-about-same-speed"
    ):
        blocks.rejudge(ZEN4_SLUG, [RR_ID], directory=folder, commit="t")
    masked = _stored_class(tmp_path, "amd-epyc-avx2-only")  # its verdicts come from a masked run
    with pytest.raises(blocks.ReferenceRunError, match="Expected a class measured natively.*masked"):
        blocks.rejudge("amd-epyc-avx2-only", [RR_ID], directory=masked, commit="t")
