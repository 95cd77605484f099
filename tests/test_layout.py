"""The library's two parts: what the lessons use (course_lib/) and the course's own tooling
(course_lib/tooling/), imported in one direction only; and where the tooling's files go."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import course_lib
import course_lib.data as data
from conftest import ROOT
from course_lib.tooling import paths

PACKAGE = ROOT / "course_lib"
TOOLING = "course_lib.tooling"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(tree: ast.AST, module: str, is_package: bool) -> list[tuple[int, str]]:
    """Every module an `import` or `from … import` in `tree` names, made absolute, with its line.

    `from X import a` names X and X.a (a may be a submodule), so `from . import tooling` counts."""
    package = module if is_package else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                where = ".".join(base + ([node.module] if node.module else []))
            else:
                where = node.module or ""
            found.append((node.lineno, where))
            found += [(node.lineno, f"{where}.{alias.name}") for alias in node.names]
    return found


def _is_tooling(name: str) -> bool:
    return name == TOOLING or name.startswith(TOOLING + ".")


def test_the_imports_are_resolved_as_python_resolves_them():
    source = "from . import tooling\nfrom ..tooling.cli import main\nimport course_lib.tooling.paths\nfrom .data import x"
    found = {name for _, name in _imported(ast.parse(source), "course_lib.measure.results", False)}
    assert {"course_lib.measure.tooling", "course_lib.tooling.cli", "course_lib.tooling.paths"} <= found
    found = {name for _, name in _imported(ast.parse(source), "course_lib", True)}
    assert {"course_lib.tooling", "course_lib.data"} <= found


def test_nothing_outside_tooling_imports_tooling():
    """The library a learner reads never depends on the tooling that produces the course.

    One exception: course_lib/__main__.py, the door `python -m course_lib` opens, which only calls
    the tooling's command line (and is never imported by a lesson or a module)."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        if _is_tooling(module) or path == PACKAGE / "__main__.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        offenders += [
            f"{path.relative_to(ROOT)}:{line} imports {name}"
            for line, name in _imported(tree, module, path.name == "__init__.py")
            if _is_tooling(name)
        ]
    assert offenders == [], "\n".join(offenders)
    assert "tooling" not in course_lib._MODULES and "tooling" not in course_lib.__all__


# Top-level files of the package that are no module of the library: the package itself, the door
# `python -m course_lib` opens, and the course's own tooling (which no lesson imports).
NOT_LIBRARY_MODULES = {"__init__", "__main__", "tooling"}


def test_every_module_of_the_library_is_in_its_one_list():
    """course_lib/__init__.py's `_MODULES` names every module and package at the top of course_lib/,
    so that `cl.<name>`, `__all__` and the docstring's list cannot leave one out."""
    on_disk = {p.stem for p in PACKAGE.glob("*.py")} | {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    listed = set(course_lib._MODULES)
    unlisted = sorted(on_disk - listed - NOT_LIBRARY_MODULES)
    assert unlisted == [], f"add {unlisted} to _MODULES in course_lib/__init__.py, with what each holds"
    assert sorted(listed - on_disk) == [], "_MODULES names modules that course_lib/ does not have"
    assert set(course_lib.__all__) >= listed
    assert all(f"\n    {name} " in course_lib.__doc__ for name in listed)


def test_every_listed_module_and_name_is_reached_from_a_fresh_import():
    """`cl.scoring` and the like once raised AttributeError until something imported them: now every
    listed module, and every name in `__all__`, is reached right after `import course_lib`."""
    import subprocess
    import sys

    code = (
        "import types, course_lib as cl\n"
        "bad = [n for n in cl._MODULES if not isinstance(getattr(cl, n, None), types.ModuleType)]\n"
        "bad += [n for n in cl.__all__ if not hasattr(cl, n)]\n"
        "namespace = {}\n"
        "exec('from course_lib import *', namespace)\n"
        "bad += [n for n in cl.__all__ if n not in namespace]\n"
        "print(sorted(set(bad)))\n"
    )
    found = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "[]"


def test_the_entry_point_only_calls_the_command_line():
    tree = ast.parse((PACKAGE / "__main__.py").read_text(encoding="utf-8"))
    assert {name for _, name in _imported(tree, "course_lib.__main__", False)} == {
        "sys",
        "course_lib.tooling.cli",
        "course_lib.tooling.cli.main",
    }


@pytest.mark.parametrize("source", sorted((ROOT / "notebooks" / "src").glob("*.py")), ids=lambda p: p.stem)
def test_no_lesson_imports_tooling(source):
    tree = ast.parse(source.read_text(encoding="utf-8"), str(source))
    imports = [
        f"line {line}: {name}" for line, name in _imported(tree, "__main__", False) if _is_tooling(name)
    ]
    uses = [  # course_lib.tooling or cl.tooling, reached as an attribute
        f"line {node.lineno}: {ast.unparse(node)}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr == "tooling"
    ]
    assert imports + uses == [], f"{source.name} reaches the course's tooling: {imports + uses}"


# ------------------------------------------------------------------ where the tooling's files go
def _fake_package(monkeypatch, folder: Path) -> None:
    package = folder / "course_lib"
    package.mkdir(parents=True)
    monkeypatch.setattr(data, "PACKAGE_DIR", package)


def test_in_a_checkout_the_root_is_the_folder_above_the_package(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    _fake_package(monkeypatch, repo)
    (repo / "pyproject.toml").write_text("[project]\n")
    (repo / "notebooks").mkdir()
    monkeypatch.chdir(tmp_path)
    assert data.source_checkout() == repo
    assert paths.repository_root() == repo


def test_after_a_pip_install_the_root_is_the_working_directory_not_site_packages(tmp_path, monkeypatch):
    site_packages = tmp_path / "lib" / "python3.11" / "site-packages"
    _fake_package(monkeypatch, site_packages)
    (site_packages / "pyproject.toml").write_text("")  # some other project's file, but no notebooks/
    work = tmp_path / "content"
    work.mkdir()
    monkeypatch.chdir(work)
    assert data.source_checkout() is None
    assert paths.repository_root() == work  # so build/ is work/build, where the command runs
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv(data.DATA_DIR_ENV, raising=False)
    assert data.data_dir() == home / ".cache" / "onnx-quant-course"  # the data directory, likewise


def test_this_checkout_is_found_and_builds_into_its_build_folder():
    assert data.source_checkout() == ROOT
    assert paths.ROOT == ROOT and paths.BUILD == ROOT / "build"


def test_the_report_reads_results_without_importing_torch():
    """The report only reads the results store: naming the models must not cost PyTorch's import."""
    import subprocess
    import sys

    code = "import sys, course_lib.tooling.report; print('torch' in sys.modules)"
    found = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "False"
