"""The model pipeline's modules import each other in one direction only: no cycle, counting the
imports inside functions too (they run later, but a circle through them is still a circle).

Each module's source is parsed with `ast`; every Import and ImportFrom anywhere in the file is an
edge, relative imports resolved against the package. The implicit import of a parent package
(importing `course_lib.models` runs `course_lib/__init__.py` first) is not an edge: every module
would otherwise sit in a circle with the package that re-exports it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import course_lib

PACKAGE = Path(course_lib.__file__).parent
PIPELINE = ("course_lib.models", "course_lib.cache", "course_lib.release", "course_lib.pipeline")


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """module -> the package's modules it imports anywhere in its source."""
    modules = {_module_name(p): p for p in package.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
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
    # cache.py imports `data` at the top and `pipeline` nowhere; release.py reads the cache.
    assert "course_lib.data" in graph["course_lib.cache"]
    assert "course_lib.cache" in graph["course_lib.release"]
    assert {"course_lib.models", "course_lib.release", "course_lib.cache"} <= graph["course_lib.pipeline"]


def test_the_model_pipeline_has_no_import_cycle():
    graph = import_graph()
    circles = [" -> ".join(c) for m in PIPELINE for c in cycles_through(graph, m)]
    assert circles == [], "import cycles through the model pipeline:\n" + "\n".join(circles)
