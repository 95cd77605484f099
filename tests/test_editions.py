"""The student edition: solutions gone, self-checks kept; the instructor edition is the notebooks themselves."""

from __future__ import annotations

import ast
import json
import shutil

import nbformat
import pytest

from conftest import ROOT
from course_machinery import editions
from course_machinery.runner import NotebookRun, execute_notebook, lesson_notebooks

NOTEBOOKS = lesson_notebooks(ROOT / "notebooks")

SAMPLE = """x = load()
answer_1 = compute(x,
                   more=True)  # solution
class Helper:  # solution
    def go(self):  # solution
        return 1  # solution


answer_2 = Helper().go()  # solution
check(answer_1, answer_2)
"""


def test_strip_solutions_replaces_answers_and_removes_the_rest():
    out = editions.strip_solutions(SAMPLE)
    assert out.splitlines() == [
        "x = load()",
        "answer_1 = None  # your answer",
        "# your code here",
        "",
        "",
        "answer_2 = None  # your answer",
        "check(answer_1, answer_2)",
    ]
    assert editions.strip_solutions("y = 1\nprint(y)") == "y = 1\nprint(y)"  # no marker: unchanged


def test_a_marker_inside_a_compound_statement_must_mark_the_whole_statement():
    source = "for i in range(3):\n    pass\nif True:\n    y = 1  # solution\n"
    assert editions.strip_solutions(source).startswith("for i in range(3):")  # the marked `if` goes whole
    with pytest.raises(ValueError, match="outside any top-level statement"):
        editions.strip_solutions("x = 1\n# solution\n")


@pytest.fixture(scope="module")
def student(tmp_path_factory):
    out = tmp_path_factory.mktemp("student")
    return {p.name: p for p in editions.write_student_edition(ROOT / "notebooks", out)}


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_solution_survives_and_every_check_stays(notebook, student):
    teacher = nbformat.read(notebook, as_version=4)
    pupil = nbformat.read(student[notebook.name], as_version=4)
    t_code = [c.source for c in teacher.cells if c.cell_type == "code"]
    s_code = [c.source for c in pupil.cells if c.cell_type == "code"]
    assert len(t_code) == len(s_code)
    everything = "\n".join(s_code)
    assert editions.MARKER not in everything
    solutions = [
        line.split(editions.MARKER)[0].strip()
        for src in t_code
        for line in src.splitlines()
        if line.rstrip().endswith(editions.MARKER)
    ]
    assert solutions, f"{notebook.name} has no marked solution"
    for line in solutions:
        if line and not line.startswith(("def ", "class ", "return", ")")) and len(line) > 12:
            assert line not in everything, f"solution line survived in the student edition: {line}"
    assert everything.count("cl.checks.check_") == "\n".join(t_code).count("cl.checks.check_") > 0
    for src in s_code:
        ast.parse(src)  # still valid Python
    assert all(
        c["outputs"] == [] for c in json.loads(student[notebook.name].read_text())["cells"] if "outputs" in c
    )


@pytest.mark.notebook
@pytest.mark.parametrize("name", ["00_start_here.ipynb", "01_affine_encoding.ipynb"])
def test_student_notebooks_run_and_their_checks_wait_for_answers(name, student, tmp_path):
    run = execute_notebook(student[name], tmp_path, cwd=ROOT / "notebooks")
    assert run.ok, run.error
    outputs = json.dumps([c.get("outputs", []) for c in nbformat.read(run.output, as_version=4).cells])
    assert "No answer yet" in outputs and "✅" not in outputs  # every check waits; none passes by itself


def test_the_committed_student_edition_follows_the_instructor_edition(tmp_path):
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    for path in NOTEBOOKS[:2]:
        shutil.copy(path, notebooks / path.name)
    assert editions.sync_student_edition(notebooks) == [notebooks / "student" / p.name for p in NOTEBOOKS[:2]]
    assert editions.sync_student_edition(notebooks, dry_run=True) == []
    teacher = nbformat.read(notebooks / NOTEBOOKS[0].name, as_version=4)
    teacher.cells[-1].source += "\nprint('changed')"
    nbformat.write(teacher, notebooks / NOTEBOOKS[0].name)
    (notebooks / "student" / "99_gone.ipynb").write_text("{}")
    stale = editions.sync_student_edition(notebooks, dry_run=True)
    assert stale == [notebooks / "student" / NOTEBOOKS[0].name, notebooks / "student" / "99_gone.ipynb"]
    editions.sync_student_edition(notebooks)
    pupil = nbformat.read(notebooks / "student" / NOTEBOOKS[0].name, as_version=4)
    assert (
        pupil.cells[-1].source.endswith("print('changed')")
        and not (notebooks / "student" / "99_gone.ipynb").exists()
    )


# The instructor guide's timings table -------------------------------------------------------
LESSONS = [p.name for p in lesson_notebooks(ROOT / "notebooks")]


def test_instructor_guide_timings_come_from_a_measured_run_of_every_lesson():
    timings = json.loads((ROOT / "docs" / "timings.json").read_text())
    guide = (ROOT / "docs" / "instructor.md").read_text()
    assert editions.render_guide(guide, timings) == guide, "run `python -m course_lib timings`"
    for record in editions.timings_runs(timings):
        editions.check_record(record, LESSONS)  # every lesson, in order, ran and was measured
        assert f"**{editions.machine_of(record)}**" in guide
        for entry in record["lessons"]:
            assert entry["peak_memory_bytes"] < 2 * 1024**3  # Binder


def _record(tmp_path, **changes):
    runs = [
        NotebookRun(ROOT / "notebooks" / name, None, 10.0 + i, None, 1_000_000_000 + i)
        for i, name in enumerate(LESSONS)
    ]
    for name, error in changes.items():
        runs[LESSONS.index(name)].error = error
    return editions.run_record(runs, prepare_seconds=1.0)


def test_timings_table_is_written_from_the_run_record(tmp_path):
    record = _record(tmp_path)
    assert record["lessons"][0] == {
        "notebook": LESSONS[0],
        "ok": True,
        "seconds": 10.0,
        "peak_memory_bytes": 1_000_000_000,
        "claims": {},
    }
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "instructor.md").write_text(
        f"intro\n{editions.TIMINGS_START}\nold\n{editions.TIMINGS_END}\nrest\n"
    )
    run_json = tmp_path / "run.json"
    run_json.write_text(json.dumps(record))
    editions.write_timings(run_json, docs, ROOT / "notebooks")
    guide = (docs / "instructor.md").read_text()
    assert "old" not in guide and guide.startswith("intro\n") and guide.endswith("rest\n")
    assert f"| {LESSONS[1]} | 11 s | 1.00 GB |" in guide
    assert json.loads((docs / "timings.json").read_text()) == {"runs": [record]}


def test_timings_keep_one_run_per_machine(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "instructor.md").write_text(f"{editions.TIMINGS_START}\n{editions.TIMINGS_END}\n")
    run_json = tmp_path / "run.json"

    def write(machine, seconds):
        record = _record(tmp_path) | {"machine": machine}
        record["lessons"][0]["seconds"] = seconds
        run_json.write_text(json.dumps(record))
        editions.write_timings(run_json, docs, ROOT / "notebooks")

    stale = _record(tmp_path) | {"machine": "CPU C (AVX-512, VNNI, AMX)"}
    stale["lessons"].pop()  # a run from before the last lesson existed
    (docs / "timings.json").write_text(json.dumps({"runs": [stale]}))
    write("CPU A (AVX2, no AVX-512, no VNNI)", 61.0)
    write("CPU B (AVX-512, VNNI)", 7.0)
    write("CPU A (AVX2, no AVX-512, no VNNI)", 125.0)  # a newer run on A replaces A's, keeps B's
    runs = json.loads((docs / "timings.json").read_text())["runs"]
    assert [(r["machine"], r["lessons"][0]["seconds"]) for r in runs] == [
        ("CPU B (AVX-512, VNNI)", 7.0),
        ("CPU A (AVX2, no AVX-512, no VNNI)", 125.0),
    ]
    guide = (docs / "instructor.md").read_text()
    assert f"| {LESSONS[0]} | 7.0 s |" in guide and f"| {LESSONS[0]} | 2 min 5 s |" in guide
    assert "1 min 1 s" not in guide
    assert guide.index("**CPU B (AVX-512, VNNI)**") < guide.index("**CPU A (AVX2, no AVX-512, no VNNI)**")


def test_an_older_single_run_timings_file_is_still_read():
    old = {"cpu": "AMD EPYC", "lessons": []}
    assert editions.timings_runs(old) == [old] and editions.machine_of(old) == "AMD EPYC"
    assert (
        editions.merge_run(old, {"cpu": "AMD EPYC", "machine": "AMD EPYC (AVX-512, VNNI)"})["runs"][0] is old
    )


def test_timings_refuse_a_failed_lesson_or_a_missing_one(tmp_path):
    with pytest.raises(editions.TimingsError, match=LESSONS[2]):
        editions.check_record(_record(tmp_path, **{LESSONS[2]: "NameError"}), LESSONS)
    partial = _record(tmp_path)
    partial["lessons"].pop()
    with pytest.raises(editions.TimingsError, match="run every lesson again"):
        editions.check_record(partial, LESSONS)
    with pytest.raises(editions.TimingsError, match="course_lib run"):
        editions.write_timings(tmp_path / "absent.json", tmp_path, ROOT / "notebooks")
