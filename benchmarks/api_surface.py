"""How large is course_lib's public surface, and who uses it?

    python benchmarks/api_surface.py [--root DIR] [--list unused|tests-only]

Counts, outside `course_lib/tooling/` (the course's own production tooling, which lessons never
import): public functions (module-level `def` whose name has no leading underscore) and public
classes; how many of the functions a lesson names (its source in notebooks/src mentions the name),
how many only tests or tooling name, and how many nothing names outside their own module. Also the
lines of each module, and the helper functions the lessons define themselves (`def` in a lesson).
Issue 35 reported, at commit 26c9662: 307 public functions and 69 classes outside tooling, 158 of
those functions used by no lesson and 39 only by tests. `--root` reads another checkout (a
`git worktree` of an older commit, say) to compare.
"""

from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def public_names(root: Path) -> tuple[dict[str, Path], dict[str, Path]]:
    """(functions, classes): public module-level names outside tooling, with their module."""
    functions, classes = {}, {}
    for path in sorted((root / "course_lib").rglob("*.py")):
        if "tooling" in path.parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not node.name.startswith("_"):
                functions[f"{path.relative_to(root)}:{node.name}"] = path
            elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                classes[f"{path.relative_to(root)}:{node.name}"] = path
    return functions, classes


def texts(paths) -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in paths)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=ROOT)
    parser.add_argument("--list", choices=("unused", "tests-only", "lessons"), default=None)
    args = parser.parse_args()
    root = args.root
    functions, classes = public_names(root)
    lessons = texts(sorted((root / "notebooks" / "src").glob("*.py")))
    tests = texts(sorted((root / "tests").glob("*.py")))
    tooling = texts(sorted((root / "course_lib" / "tooling").rglob("*.py")))
    library = {p: p.read_text(encoding="utf-8") for p in (root / "course_lib").rglob("*.py")}

    def named(name: str, text: str) -> bool:
        return re.search(rf"\b{re.escape(name)}\b", text) is not None

    by_lessons, tests_only, unused = [], [], []
    for key, path in functions.items():
        name = key.split(":")[1]
        elsewhere = any(
            named(name, text) for p, text in library.items() if p != path and "tooling" not in p.parts
        )
        if named(name, lessons):
            by_lessons.append(key)
        elif named(name, tooling) or elsewhere:
            continue
        elif named(name, tests):
            tests_only.append(key)
        else:
            unused.append(key)
    helpers = re.findall(r"^def (\w+)\(", lessons, re.MULTILINE)
    print(f"course_lib outside tooling: {len(functions)} public functions, {len(classes)} public classes")
    print(
        f"  functions a lesson names: {len(by_lessons)}; used by no lesson: {len(functions) - len(by_lessons)}"
    )
    print(f"  named only by tests: {len(tests_only)}; named nowhere outside their module: {len(unused)}")
    print(f"lesson helper definitions: {len(helpers)} ({', '.join(sorted(set(helpers)))})")
    print("lines per module (largest first):")
    sizes = sorted(
        ((len(text.splitlines()), p.relative_to(root)) for p, text in library.items()), reverse=True
    )
    for n, p in sizes[:15]:
        print(f"  {n:>5} {p}")
    if args.list:
        chosen = {"unused": unused, "tests-only": tests_only, "lessons": by_lessons}[args.list]
        print(f"\n{args.list}:")
        print("\n".join(f"  {k}" for k in chosen))


if __name__ == "__main__":
    main()
