"""The course's modules (course_lib and course_machinery) import each other in one direction only:
no cycle anywhere in either package,
counting the imports inside functions too (they run later, but a circle through them is still a
circle). Imports under `if TYPE_CHECKING:` are not edges: they never run.

Each module's source is parsed with `ast`; every Import and ImportFrom anywhere in the file is an
edge, relative imports resolved against the package. The implicit import of a parent package
(importing `course_machinery.models` runs `course_lib/__init__.py` first) is not an edge: every module
would otherwise sit in a circle with the package that re-exports it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import course_lib
import course_machinery

PACKAGE = Path(course_lib.__file__).parent
PACKAGES = (PACKAGE, Path(course_machinery.__file__).parent)
PIPELINE = (
    "course_machinery.models",
    "course_machinery.models.store",
    "course_machinery.models.catalog",
    "course_machinery.models.pipeline",
    "course_machinery.release",
    "course_machinery.text_encoder",
    "course_machinery.nanogpt",
)


def _module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(packages: tuple[Path, ...] = PACKAGES) -> dict[str, set[str]]:
    """module -> the packages' modules it imports anywhere in its source."""
    modules = {_module_name(p, package): p for package in packages for p in package.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(), str(path))
        typing_only = {
            id(inner)
            for node in ast.walk(tree)
            if isinstance(node, ast.If)
            and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
            for inner in ast.walk(node)
        }
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = name.split(".") if is_package else name.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    stem = ".".join(base + ([node.module] if node.module else []))
                else:
                    stem = node.module or ""
                # `from . import models` names a module; `from .models import X` names its module.
                targets = [
                    f"{stem}.{alias.name}" for alias in node.names if f"{stem}.{alias.name}" in modules
                ]
                targets = targets or [stem]
            for target in targets:
                while target and target not in modules:  # `import a.b.c` of a name inside a module
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def cycles_through(graph: dict[str, set[str]], start: str) -> list[list[str]]:
    """Every simple import path that leaves `start` and comes back to it."""
    found, stack = [], [(start, [start])]
    while stack:
        node, path = stack.pop()
        for nxt in sorted(graph.get(node, ())):
            if nxt == start:
                found.append([*path, start])
            elif nxt not in path:
                stack.append((nxt, [*path, nxt]))
    return found


def test_the_graph_sees_imports_inside_functions():
    graph = import_graph()
    # store.py imports `data` at the top and `pipeline` nowhere; release.py reads the cache; the
    # pipeline imports `registry`, `export` and `estimate` inside its functions only.
    assert "course_lib.data" in graph["course_machinery.models.store"]
    assert "course_machinery.models.store" in graph["course_machinery.release"]
    assert {
        "course_machinery.models.registry",
        "course_machinery.models.export",
        "course_machinery.models.estimate",
        "course_machinery.release",
        "course_machinery.models.store",
    } <= graph["course_machinery.models.pipeline"]
    # `get` reaches the text encoder and the NanoGPT inside its function, and they use the store.
    assert {"course_machinery.text_encoder", "course_machinery.nanogpt"} <= graph[
        "course_machinery.models.catalog"
    ]
    assert "course_machinery.models.store" in graph["course_machinery.text_encoder"]


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of the graph with more than one module: every import circle
    lies inside one (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_model_pipeline_has_no_import_cycle():
    graph = import_graph()
    paths = [" -> ".join(c) for m in PIPELINE for c in cycles_through(graph, m)]
    assert paths == [], "import cycles through the model pipeline:\n" + "\n".join(paths)


def test_no_module_of_the_package_sits_in_an_import_circle():
    found = circles(import_graph())
    assert found == [], "modules that import each other, directly or through others: " + "; ".join(
        ", ".join(part) for part in found
    )


def test_the_audits_findings_never_name_its_report():
    """findings (the data and what a notebook shows) and summary (the whole report) once imported each
    other, one of them for its types only: now the report reads the findings, and never the reverse."""
    findings = Path(course_machinery.__file__).parent / "audit" / "findings.py"
    tree = ast.parse(findings.read_text())
    named = {
        f"{node.module or ''}.{alias.name}" if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert not any("summary" in name for name in named), named
    assert "course_machinery.audit.findings" in import_graph()["course_machinery.audit.summary"]


def test_a_planted_circle_is_found_and_type_checking_imports_are_not_edges(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("def f():\n    from . import b\n")
    (package / "b.py").write_text("from .c import x\n")
    (package / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import f\nx = 1\n"
    )
    graph = import_graph((package,))
    assert circles(graph) == [] and "pkg.a" not in graph["pkg.c"]
    (package / "c.py").write_text("from .a import f\nx = 1\n")
    assert circles(import_graph((package,))) == [["pkg.a", "pkg.b", "pkg.c"]]
