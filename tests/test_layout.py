"""The course's two packages: the library the lessons use (course_lib/) and the course's own
machinery (course_machinery/), imported in one direction only; and where the machinery's files go."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import course_lib
import course_lib.data as data
from conftest import ROOT
from course_machinery import paths

PACKAGE = ROOT / "course_lib"
MACHINERY = "course_machinery"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(tree: ast.AST, module: str, is_package: bool) -> list[tuple[int, str]]:
    """Every module an `import` or `from … import` in `tree` names, made absolute, with its line.

    `from X import a` names X and X.a (a may be a submodule), so `from . import claims` counts."""
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


def _is_machinery(name: str) -> bool:
    return name == MACHINERY or name.startswith(MACHINERY + ".")


def test_the_imports_are_resolved_as_python_resolves_them():
    source = (
        "from . import claims\nfrom ..claims import Book\nimport course_machinery.paths\nfrom .data import x"
    )
    found = {name for _, name in _imported(ast.parse(source), "course_machinery.checks.claims05", False)}
    assert {"course_machinery.checks.claims", "course_machinery.claims", "course_machinery.paths"} <= found
    found = {name for _, name in _imported(ast.parse(source), "course_lib", True)}
    assert {"course_lib.claims", "course_machinery.paths", "course_lib.data"} <= found


def test_the_library_never_imports_the_machinery():
    """The library a learner reads never depends on the machinery that checks and makes the course.

    Two doors, neither an import statement: course_lib/__main__.py (`python -m course_lib`, which
    only calls the command line) and `cl.<name>` for the few machinery modules a lesson calls
    (`_MACHINERY` in course_lib/__init__.py, imported by name when first used)."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        if path == PACKAGE / "__main__.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        offenders += [
            f"{path.relative_to(ROOT)}:{line} imports {name}"
            for line, name in _imported(tree, module, path.name == "__init__.py")
            if _is_machinery(name)
        ]
    assert offenders == [], "\n".join(offenders)
    machinery = ROOT / MACHINERY
    for name in course_lib._MACHINERY:
        assert (machinery / f"{name}.py").exists() or (machinery / name / "__init__.py").exists(), name
    assert not set(course_lib._MACHINERY) & set(course_lib._MODULES)


# Top-level files of the package that are no module of the library: the package itself and the
# door `python -m course_lib` opens.
NOT_LIBRARY_MODULES = {"__init__", "__main__"}


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
        "course_machinery.cli",
        "course_machinery.cli.main",
    }


@pytest.mark.parametrize("source", sorted((ROOT / "notebooks" / "src").glob("*.py")), ids=lambda p: p.stem)
def test_a_lesson_names_one_library(source):
    """A lesson imports course_lib only; the machinery it calls it reaches as `cl.<name>`."""
    tree = ast.parse(source.read_text(encoding="utf-8"), str(source))
    imports = [
        f"line {line}: {name}" for line, name in _imported(tree, "__main__", False) if _is_machinery(name)
    ]
    assert imports == [], f"{source.name} imports the course's machinery: {imports}"


def test_the_machinery_a_lesson_calls_is_reached_through_the_library():
    import course_machinery.checks

    assert course_lib.checks is course_machinery.checks
    assert course_lib.verify is course_lib.verdicts.verify
    assert "colab" in course_lib.__all__ and "cli" not in course_lib.__all__


# ------------------------------------------------------------------ where the machinery's files go
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

    code = "import sys, course_machinery.report; print('torch' in sys.modules)"
    found = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "False"
