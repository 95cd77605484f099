"""Every lesson notebook: in step with its source, committed clean, and runs top to bottom."""

from __future__ import annotations

import json

import jupytext
import nbformat
import pytest

from conftest import ROOT
from course_lib.runner import execute_notebook, lesson_notebooks

NOTEBOOKS = lesson_notebooks(ROOT / "notebooks")
BINDER_MEMORY_BYTES = 2 * 1024**3
SOURCES = sorted((ROOT / "notebooks" / "src").glob("*.py"))


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
def test_notebook_runs_top_to_bottom_in_a_fresh_kernel(notebook):
    run = execute_notebook(notebook, ROOT / "build" / "test-notebooks", timeout=600)
    assert run.ok, f"{notebook.name} failed: {run.error} (executed copy: {run.output})"
    executed = nbformat.read(run.output, as_version=4)
    outputs = json.dumps([c.get("outputs", []) for c in executed.cells], ensure_ascii=False)
    assert "❌" not in outputs  # every exercise's solution passes its own check
    assert outputs.count("✅") >= 1
    # Binder gives a notebook about 2 GB: the kernel and what it starts must stay below that.
    print(f"{notebook.name}: {run.seconds:.0f} s, peak memory {run.peak_memory_bytes / 1e6:.0f} MB")
    assert run.peak_memory_bytes > 50e6  # the kernel was seen at all
    assert run.peak_memory_bytes < BINDER_MEMORY_BYTES, (
        f"{notebook.name}: {run.peak_memory_bytes / 1e9:.2f} GB"
    )
