"""Student and instructor editions of the lessons.

The notebooks in `notebooks/` are the instructor edition: each exercise holds its solution, every
statement of which carries a trailing `# solution` comment on at least one of its lines, and is
followed by a self-check (`cl.checks.…`). The student edition removes the solutions and keeps the
checks: an `answer_… = …` assignment becomes `answer_… = None`, so the check says "No answer yet";
any other solution statement (a helper class, a call) is removed, leaving one `# your code here`.

The student edition is committed in `notebooks/student/` (the Colab and Binder badges open it), generated
from the instructor edition by `python -m course_lib notebooks` (or `make notebooks`); a test keeps the
two in step. `python -m course_lib student --out DIR` writes a copy elsewhere.
"""

from __future__ import annotations

import ast
import copy
from pathlib import Path

import nbformat

MARKER = "# solution"
STUDENT_DIR = "student"  # notebooks/student/
PLACEHOLDER = "# your code here"


def _solution_spans(source: str) -> list[tuple[int, int, ast.stmt]]:
    """(first line, last line, statement), 1-based, of each top-level statement with a marked line."""
    lines = source.splitlines()
    marked = {i + 1 for i, line in enumerate(lines) if line.rstrip().endswith(MARKER)}
    if not marked:
        return []
    tree = ast.parse(source)
    spans = []
    for stmt in tree.body:
        first = min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", []))])
        if marked & set(range(first, stmt.end_lineno + 1)):
            spans.append((first, stmt.end_lineno, stmt))
    covered = {n for first, last, _ in spans for n in range(first, last + 1)}
    stray = sorted(marked - covered)
    if stray:
        raise ValueError(
            f"Line(s) {stray} carry {MARKER!r} outside any top-level statement; mark whole statements."
        )
    return spans


def _answer_name(stmt: ast.stmt) -> str | None:
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
        name = stmt.targets[0].id
        return name if name.startswith("answer") else None
    return None


def strip_solutions(source: str) -> str:
    """A code cell's source with its solution statements replaced (answers) or removed (the rest)."""
    spans = _solution_spans(source)
    if not spans:
        return source
    lines = source.splitlines()
    starts = {first: (last, stmt) for first, last, stmt in spans}
    out: list[str] = []
    n = 1
    while n <= len(lines):
        if n in starts:
            last, stmt = starts[n]
            name = _answer_name(stmt)
            if name:
                out.append(f"{name} = None  # your answer")
            elif not out or out[-1] != PLACEHOLDER:
                out.append(PLACEHOLDER)
            n = last + 1
            continue
        out.append(lines[n - 1])
        n += 1
    text = "\n".join(out)
    while "\n\n\n\n" in text:  # removed blocks leave runs of blank lines
        text = text.replace("\n\n\n\n", "\n\n\n")
    return text.strip("\n")


def student_notebook(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A copy with every code cell stripped of solutions and of outputs."""
    nb = copy.deepcopy(notebook)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.source = strip_solutions(cell.source)
            cell.outputs, cell.execution_count = [], None
    nb.metadata["course_edition"] = "student"
    return nb


def write_student_edition(notebooks: Path, out_dir: Path) -> list[Path]:
    """Write the student edition of every lesson notebook in `notebooks` to `out_dir`."""
    from .runner import lesson_notebooks

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for path in lesson_notebooks(notebooks):
        target = out_dir / path.name
        nbformat.write(student_notebook(nbformat.read(path, as_version=4)), target)
        written.append(target)
    return written


def _cells(nb: nbformat.NotebookNode) -> list[tuple[str, str]]:
    return [(c.cell_type, c.source) for c in nb.cells]


def sync_student_edition(notebooks: Path, dry_run: bool = False, only: set[str] | None = None) -> list[Path]:
    """Bring the committed student edition (`notebooks/student/`) in step with the instructor edition.

    Returns the student notebooks that changed (with `dry_run`, that would change), and any
    student notebook whose lesson is gone (removed unless `dry_run`)."""
    from .runner import lesson_notebooks

    out_dir = notebooks / STUDENT_DIR
    changed = []
    lessons = lesson_notebooks(notebooks)
    for path in lessons:
        if only is not None and path.name.split("_", 1)[0] not in only:
            continue
        target = out_dir / path.name
        wanted = student_notebook(nbformat.read(path, as_version=4))
        if not target.exists() or _cells(nbformat.read(target, as_version=4)) != _cells(wanted):
            changed.append(target)
            if not dry_run:
                out_dir.mkdir(parents=True, exist_ok=True)
                nbformat.write(wanted, target)
    names = {p.name for p in lessons}
    for extra in sorted(out_dir.glob("*.ipynb")) if out_dir.exists() and only is None else []:
        if extra.name not in names:
            changed.append(extra)
            if not dry_run:
                extra.unlink()
    return changed


# --------------------------------------------------------------------------------------------
# The instructor guide's timings: from a measured `python -m course_lib run`
# --------------------------------------------------------------------------------------------
TIMINGS_START = "<!-- timings:start (generated by `python -m course_lib timings` from docs/timings.json) -->"
TIMINGS_END = "<!-- timings:end -->"


class TimingsError(ValueError):
    """The run record cannot back the guide's timings (missing, failed or incomplete run)."""


def run_record(results: list, prepare_seconds: float | None = None) -> dict:
    """What `python -m course_lib run` measured: each lesson's wall time and peak memory, and where."""
    import platform
    from datetime import UTC, datetime

    from course_lib.versions import package_version as version
    from course_machinery.hardware import cpu_report, cpu_summary

    from .bundle import git_commit

    git = git_commit()
    commit = git.get("git_commit", "")[:7]
    if git.get("git_uncommitted_changes"):
        commit += " with uncommitted changes"
    cpu = cpu_report()
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": commit or None,
        "cpu": cpu["cpu"],
        "machine": cpu_summary(),
        "logical_cores": cpu["logical_cores"],
        "python": platform.python_version(),
        "onnxruntime": version("onnxruntime"),
        "torch": version("torch"),
        "prepare_seconds": prepare_seconds,
        "lessons": [
            {
                "notebook": r.notebook.name,
                "ok": r.ok,
                "seconds": round(r.seconds, 1),
                "peak_memory_bytes": r.peak_memory_bytes,
                "claims": {k: len(v) for k, v in (r.claims or {}).items()},
            }
            for r in results
        ],
    }


def check_record(record: dict, lessons: list[str]) -> None:
    """Refuse a record that misses a lesson, has a failed one, or lacks a measurement."""
    found = [entry["notebook"] for entry in record.get("lessons", [])]
    if found != lessons:
        raise TimingsError(f"the run covers {found}, the course has {lessons}: run every lesson again")
    bad = [
        e["notebook"]
        for e in record["lessons"]
        if not e["ok"] or not e["seconds"] or not e["peak_memory_bytes"]
    ]
    if bad:
        raise TimingsError(f"{', '.join(bad)} failed or were not measured: fix them and run again")


def machine_of(record: dict) -> str:
    """The machine a run record was measured on: the CPU with its INT8 features, where recorded."""
    return record.get("machine") or record["cpu"]


def timings_runs(timings: dict) -> list[dict]:
    """The run records in docs/timings.json: one per machine (an older file holds a single record)."""
    return timings.get("runs", [timings])


def merge_run(timings: dict | None, record: dict) -> dict:
    """docs/timings.json's content with `record` added, replacing an earlier run on the same machine.

    Lesson times depend on the CPU (its cores, its vector and INT8 instructions), so the
    guide keeps the latest run of each machine it has seen rather than only the last one.
    """
    runs = [r for r in timings_runs(timings or {"runs": []}) if machine_of(r) != machine_of(record)]
    return {"runs": [*runs, record]}


def timings_table(record: dict) -> str:
    """The guide's table: each lesson's run time and peak memory, with the machine that measured them."""
    from course_lib.measure import markdown_table
    from course_lib.units import format_duration as duration

    rows = [
        {
            "lesson": e["notebook"],
            "runs in": duration(e["seconds"]),
            "peak memory": f"{e['peak_memory_bytes'] / 1e9:.2f} GB",
        }
        for e in record["lessons"]
    ]
    total = duration(sum(e["seconds"] for e in record["lessons"]))
    return (
        f"**{machine_of(record)}**\n\n"
        + markdown_table(rows)
        + f"\n\nAll {len(rows)} lessons, one after another: {total}. Measured by `python -m course_lib run` "
        f"on {record['date'][:10]} (commit {record['commit']}): {machine_of(record)}, {record['logical_cores']} "
        f"logical cores, Python {record['python']}, ONNX Runtime {record['onnxruntime']}, torch {record['torch']}, "
        "with the demo models already trained and cached."
    )


def render_guide(guide: str, timings: dict) -> str:
    """The guide with the tables between its markers replaced: one per machine in `timings`."""
    if TIMINGS_START not in guide or TIMINGS_END not in guide:
        raise TimingsError(f"the guide has no {TIMINGS_START!r} … {TIMINGS_END!r} block")
    before, rest = guide.split(TIMINGS_START, 1)
    return (
        before
        + TIMINGS_START
        + "\n"
        + "\n\n".join(timings_table(record) for record in timings_runs(timings))
        + "\n"
        + TIMINGS_END
        + rest.split(TIMINGS_END, 1)[1]
    )


def write_timings(run_json: Path, docs: Path, notebooks: Path) -> Path:
    """Add a measured run to docs/timings.json (replacing the same machine's) and regenerate the guide."""
    import json

    from .runner import lesson_notebooks

    if not run_json.exists():
        raise TimingsError(f"{run_json} does not exist: run `python -m course_lib run` (or `make run`) first")
    record = json.loads(run_json.read_text())
    lessons = [p.name for p in lesson_notebooks(notebooks)]
    check_record(record, lessons)
    guide, store = docs / "instructor.md", docs / "timings.json"
    timings = merge_run(json.loads(store.read_text()) if store.exists() else None, record)
    # Another machine's run of an older set of lessons times a course that no longer exists.
    kept = [r for r in timings_runs(timings) if [e["notebook"] for e in r.get("lessons", [])] == lessons]
    for stale in timings_runs(timings):
        if stale not in kept:
            print(
                f"Dropped the run on {machine_of(stale)} (commit {stale.get('commit', '?')}): it timed "
                f"{len(stale.get('lessons', []))} lessons, the course has {len(lessons)}; run them there again."
            )
    timings = {"runs": kept}
    text = render_guide(guide.read_text(), timings)
    store.write_text(json.dumps(timings, indent=2) + "\n")
    guide.write_text(text)
    return guide
