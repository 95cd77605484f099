"""Student and instructor editions of the lessons.

The notebooks in `notebooks/` are the instructor edition: each exercise holds its solution, every
statement of which carries a trailing `# solution` comment on at least one of its lines, and is
followed by a self-check (`cl.checks.…`). The student edition removes the solutions and keeps the
checks: an `answer_… = …` assignment becomes `answer_… = None`, so the check says "No answer yet";
any other solution statement (a helper class, a call) is removed, leaving one `# your code here`.

`python -m course_lib student` (or `make student`) writes the student edition to build/student/.
"""

from __future__ import annotations

import ast
import copy
from pathlib import Path

import nbformat

MARKER = "# solution"
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
