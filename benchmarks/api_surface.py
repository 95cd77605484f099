"""How large is course_lib, the library a learner reads, and who uses its public names?

    python benchmarks/api_surface.py [--root DIR] [--list unused|tests-only|lessons|machinery-only]

Counts, in course_lib/ (the library the lessons use; in an older checkout, course_lib/ without its
`tooling/` folder): lines, public functions (module-level `def` whose name has no leading
underscore) and public classes; how many of those names a lesson names (its source in
notebooks/src mentions the name), how many only the machinery (course_machinery/, or an older
checkout's course_lib/tooling/) or tests name, and how many nothing names outside their own module.
Also the lines of course_machinery, and the helper functions the lessons define themselves.
Issue 35 reported, at commit 26c9662: 307 public functions and 69 classes outside tooling, 158 of
those functions used by no lesson and 39 only by tests. Issue 41: 28,287 lines in course_lib at
192776b, before the machinery moved out. `--root` reads another checkout (a `git worktree` of an
older commit, say) to compare.
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
    for path in library_files(root):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not node.name.startswith("_"):
                functions[f"{path.relative_to(root)}:{node.name}"] = path
            elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                classes[f"{path.relative_to(root)}:{node.name}"] = path
    return functions, classes


def library_files(root: Path) -> list[Path]:
    """course_lib's modules, without an older checkout's tooling/ folder."""
    return [p for p in sorted((root / "course_lib").rglob("*.py")) if "tooling" not in p.parts]


def machinery_files(root: Path) -> list[Path]:
    """course_machinery's modules (or, in an older checkout, course_lib/tooling's)."""
    return sorted((root / "course_machinery").rglob("*.py")) + sorted(
        (root / "course_lib" / "tooling").rglob("*.py")
    )


def lines(paths) -> int:
    return sum(len(p.read_text(encoding="utf-8").splitlines()) for p in paths)


def texts(paths) -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in paths)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=ROOT)
    parser.add_argument(
        "--list",
        choices=("unused", "tests-only", "lessons", "returned", "inside", "machinery-only"),
        default=None,
    )
    args = parser.parse_args()
    root = args.root
    functions, classes = public_names(root)
    lessons = texts(sorted((root / "notebooks" / "src").glob("*.py")))
    tests = texts(sorted((root / "tests").glob("*.py")))
    machinery = texts(machinery_files(root))
    library = {p: p.read_text(encoding="utf-8") for p in library_files(root)}

    def named(name: str, text: str) -> bool:
        return re.search(rf"\b{re.escape(name)}\b", text) is not None

    # Each public name, by its first use in this order: a lesson names it; a lesson gets it back (a
    # class the library returns, yields or raises, which a lesson holds without naming); the library
    # uses it (in another module, or in its own: a public helper); the machinery calls it; tests only.
    library_text = "\n".join(library.values())
    returned = {m.group(1) for m in re.finditer(r"(?:->|raise|yield)[^\n:=]*?\b([A-Z]\w+)\b", library_text)}
    by_lessons, returned_types, inside, machinery_only, tests_only, unused = [], [], [], [], [], []
    for key, path in {**functions, **classes}.items():
        name = key.split(":")[1]
        elsewhere = any(named(name, text) for p, text in library.items() if p != path)
        own = len(re.findall(rf"\b{re.escape(name)}\b", library[path])) > 1
        if named(name, lessons):
            by_lessons.append(key)
        elif key in classes and name in returned:
            returned_types.append(key)
        elif elsewhere or own:
            inside.append(key)
        elif named(name, machinery):
            machinery_only.append(key)
        elif named(name, tests):
            tests_only.append(key)
        else:
            unused.append(key)
    helpers = re.findall(r"^def (\w+)\(", lessons, re.MULTILINE)
    print(f"course_lib: {lines(library_files(root)):,} lines in {len(library)} modules")
    print(f"course_machinery: {lines(machinery_files(root)):,} lines")
    print(f"course_lib's public names: {len(functions)} functions, {len(classes)} classes")
    print(f"  named by a lesson: {len(by_lessons)}")
    print(
        f"  a class a lesson gets back (returned, yielded or raised) without naming it: {len(returned_types)}"
    )
    print(f"  used inside the library (by a lesson's calls) and named by no lesson: {len(inside)}")
    print(f"  named only by the machinery: {len(machinery_only)}; only by tests: {len(tests_only)}")
    print(f"  named nowhere outside their module: {len(unused)}")
    print(f"lesson helper definitions: {len(helpers)} ({', '.join(sorted(set(helpers)))})")
    print("lines per module (largest first):")
    sizes = sorted(
        ((len(text.splitlines()), p.relative_to(root)) for p, text in library.items()), reverse=True
    )
    for n, p in sizes[:15]:
        print(f"  {n:>5} {p}")
    if args.list:
        chosen = {
            "unused": unused,
            "tests-only": tests_only,
            "lessons": by_lessons,
            "returned": returned_types,
            "inside": inside,
            "machinery-only": machinery_only,
        }[args.list]
        print(f"\n{args.list}:")
        print("\n".join(f"  {k}" for k in chosen))


if __name__ == "__main__":
    main()
