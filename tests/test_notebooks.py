"""Every lesson notebook: in step with its source, committed clean, and runs top to bottom."""

from __future__ import annotations

import getpass
import json

import jupytext
import nbformat
import pytest

from conftest import ROOT
from course_machinery import recording as reference
from course_machinery.reference import load_figures
from course_machinery.runner import execute_notebook, lesson_notebooks

NOTEBOOKS = lesson_notebooks(ROOT / "notebooks")
BINDER_MEMORY_BYTES = 2 * 1024**3
SOURCES = sorted((ROOT / "notebooks" / "src").glob("*.py"))
# Names libraries create in the temporary directory whatever a lesson does: ONNX Runtime's
# telemetry session id (a few bytes, rewritten on import) and PyTorch's empty compile-cache folder.
LIBRARY_TEMP_NAMES = {".ses", f"torchinductor_{getpass.getuser()}"}


def _cells(nb):
    return [(c.cell_type, c.source.strip()) for c in nb.cells]


def test_every_notebook_has_a_source_and_every_source_a_notebook():
    assert [p.stem for p in NOTEBOOKS] == [p.stem for p in SOURCES]
    assert NOTEBOOKS, "no lesson notebooks found"


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_notebook_is_in_step_with_its_source(source):
    notebook = ROOT / "notebooks" / f"{source.stem}.ipynb"
    assert _cells(jupytext.read(source)) == _cells(nbformat.read(notebook, as_version=4)), (
        f"{notebook.name} differs from {source.relative_to(ROOT)}: run `make notebooks`."
    )


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_committed_without_outputs(notebook):
    for cell in json.loads(notebook.read_text())["cells"]:
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [] and cell["execution_count"] is None


@pytest.mark.notebook
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_top_to_bottom_in_a_fresh_kernel(notebook, tmp_path, monkeypatch):
    scratch = tmp_path / "tmp"  # the kernel's temporary directory (it inherits TMPDIR)
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    run = execute_notebook(notebook, ROOT / "build" / "test-notebooks", timeout=600)
    assert run.ok, f"{notebook.name} failed: {run.error} (executed copy: {run.output})"
    # A lesson keeps its files in its lesson folder; runs on Binder and Colab must not fill /tmp.
    # Two libraries leave one fixed name each, rewritten rather than added to on every run.
    left = sorted(str(p.relative_to(scratch)) for p in scratch.rglob("*") if p.name not in LIBRARY_TEMP_NAMES)
    assert left == [], f"{notebook.name} left files in the temporary directory: {left[:10]}"
    assert sum(p.stat().st_size for p in scratch.rglob("*") if p.is_file()) < 10_000
    executed = nbformat.read(run.output, as_version=4)
    outputs = json.dumps([c.get("outputs", []) for c in executed.cells], ensure_ascii=False)
    assert "❌" not in outputs  # every exercise's solution passes its own check
    checked = [c for c in executed.cells if c.cell_type == "code" and "cl.checks.check_" in c.source]
    assert checked, f"{notebook.name} has no self-checking exercise"
    for cell in checked:  # each check's own cell shows it passed
        assert "✅" in json.dumps(cell.get("outputs", []), ensure_ascii=False), cell.source
    # Every sentence the lesson binds to a claim is checked in its check cells, and none is false on this CPU.
    assert run.claims["differs"] == [], f"{notebook.name}: claims false on this CPU:\n" + "\n".join(
        run.claims["differs"]
    )
    # The figures the lesson's reference blocks quote were saved by this run (for `reference record`).
    lesson = reference.lesson_of(notebook)
    wanted = reference.wanted_figures(ROOT).get(lesson, set())
    found = load_figures(lesson) or {"figures": {}, "claims": []}
    saved = set(found["figures"])
    assert wanted <= saved, f"{notebook.name} did not save the figures {sorted(wanted - saved)}"
    # ... and the verdict of every claim it printed, for the reference runs' ledgers.
    printed = sum(len(lines) for lines in run.claims.values())
    assert len(found["claims"]) == printed, (
        f"{notebook.name}: {printed} claims printed, {len(found['claims'])} saved"
    )
    # Binder gives a notebook about 2 GB: the kernel and what it starts must stay below that.
    print(f"{notebook.name}: {run.seconds:.0f} s, peak memory {run.peak_memory_bytes / 1e6:.0f} MB")
    assert run.peak_memory_bytes > 50e6  # the kernel was seen at all
    assert run.peak_memory_bytes < BINDER_MEMORY_BYTES, (
        f"{notebook.name}: {run.peak_memory_bytes / 1e9:.2f} GB"
    )
