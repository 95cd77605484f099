"""Colab and Binder launch: badges and setup cells generated from the one address in pyproject.toml."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import nbformat
import pytest

from conftest import ROOT
from course_lib.tooling import launch
from course_lib.tooling.runner import lesson_notebooks

NOTEBOOKS = lesson_notebooks(ROOT / "notebooks")


def test_generated_badges_links_and_setup_cells_are_current():
    assert launch.stale() == [], "run `python -m course_lib launch` (or `make launch`)"


def test_urls_follow_the_address_and_branch():
    where = launch.Launch("https://github.com/someone/quant-course", "dev")
    # learners open the student edition; the instructor edition is one argument away
    assert where.colab_url("01_affine_encoding.ipynb") == (
        "https://colab.research.google.com/github/someone/quant-course/blob/dev/notebooks/student/01_affine_encoding.ipynb"
    )
    assert where.colab_url("01_affine_encoding.ipynb", "instructor") == (
        "https://colab.research.google.com/github/someone/quant-course/blob/dev/notebooks/01_affine_encoding.ipynb"
    )
    assert where.binder_url() == "https://mybinder.org/v2/gh/someone/quant-course/dev"
    assert where.binder_url("04_parity.ipynb") == (
        "https://mybinder.org/v2/gh/someone/quant-course/dev?labpath=notebooks%2Fstudent%2F04_parity.ipynb"
    )
    with pytest.raises(ValueError, match="student"):
        where.colab_url("04_parity.ipynb", "teacher")
    assert where.pip_requirement() == "onnx-quant-course @ git+https://github.com/someone/quant-course@dev"


@pytest.mark.parametrize(
    "table", ["", '[tool.onnx-quant-course.launch]\nrepository = "https://gitlab.com/a/b"\n']
)
def test_a_missing_or_unusable_address_names_the_fix(tmp_path, table):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "x"\n' + table)
    with pytest.raises(launch.LaunchConfigError, match=r"\[tool.onnx-quant-course.launch\] repository"):
        launch.read_launch(pyproject)


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_lesson_opens_with_its_badges_and_sets_up_before_importing(notebook):
    where = launch.read_launch()
    cells = nbformat.read(notebook, as_version=4).cells
    assert cells[0].cell_type == "markdown"
    assert where.colab_url(notebook.name) in cells[0].source
    assert where.binder_url(notebook.name) in cells[0].source
    setup = next(i for i, c in enumerate(cells) if c.source.startswith(launch.SETUP_MARK))
    first_import = next(
        i for i, c in enumerate(cells) if i != setup and c.cell_type == "code" and "course_lib" in c.source
    )
    assert cells[setup].cell_type == "code" and setup < first_import
    assert where.pip_requirement(launch.lesson_extras(notebook.name)) in cells[setup].source


def test_lesson_05cs_colab_cell_installs_the_openvino_extra_and_the_others_do_not():
    where = launch.read_launch()
    assert where.pip_requirement(("openvino",)).startswith("onnx-quant-course[openvino] @ git+")
    for notebook in NOTEBOOKS:
        cells = nbformat.read(notebook, as_version=4).cells
        setup = next(c.source for c in cells if c.source.startswith(launch.SETUP_MARK))
        wants_openvino = notebook.name.startswith("05c_")
        assert ("onnx-quant-course[openvino] @" in setup) == wants_openvino, notebook.name
        assert ("also installs the course's extra: openvino" in setup) == wants_openvino, notebook.name


def test_readme_has_the_badges_and_a_link_to_every_lesson():
    readme = (ROOT / "README.md").read_text()
    where = launch.read_launch()
    assert launch.badges_markdown(where) in readme
    for notebook in NOTEBOOKS:
        assert where.colab_url(notebook.name) in readme and where.binder_url(notebook.name) in readme
        assert "/notebooks/student/" in where.colab_url(notebook.name)
        assert (ROOT / "notebooks" / "student" / notebook.name).exists()  # what the link opens is committed


def _run_setup_cell(
    tmp_path, in_colab: bool, drive: Path | None = None, extras: tuple[str, ...] = ()
) -> subprocess.CompletedProcess:
    """The generated cell in a fresh interpreter, with subprocess.run recorded instead of run.

    With `drive`, the learner has set KEEP_ON_DRIVE = True; mounting Drive is recorded, Drive's
    folder is `drive`, and ensure_models only records what it was asked for (an empty data
    directory would otherwise train the ResNet18).
    """
    cell = launch.setup_cell(launch.read_launch(), extras)
    if drive is not None:
        cell = cell.replace("KEEP_ON_DRIVE = False", "KEEP_ON_DRIVE = True").replace(
            launch.DRIVE_FOLDER, str(drive)
        )
    harness = textwrap.dedent(f"""
        import json, subprocess, sys, types
        calls = []
        subprocess.run = lambda args, **kw: calls.append(args)
        if {in_colab!r}:
            sys.modules["google"] = types.ModuleType("google")
            colab = sys.modules["google.colab"] = types.ModuleType("google.colab")
            colab.drive = types.SimpleNamespace(mount=lambda where: calls.append(["mount", where]))
        if {drive is not None!r}:
            import course_lib
            course_lib.ensure_models = lambda: (calls.append(["ensure_models"])
                                                or {{"stub": types.SimpleNamespace(origin="stub")}})
        exec(compile({cell!r}, "setup-cell", "exec"))
        import os
        print("CALLS", json.dumps(calls))
        print("IMPORTED", "course_lib" in sys.modules)
        print("DATA", os.environ.get("COURSE_DATA_DIR"))
    """)
    return subprocess.run(
        [sys.executable, "-c", harness], capture_output=True, text=True, check=True, cwd=tmp_path
    )


def _calls(out: str) -> list:
    return json.loads(next(line for line in out.splitlines() if line.startswith("CALLS "))[6:])


def test_setup_cell_does_nothing_outside_colab(tmp_path):
    out = _run_setup_cell(tmp_path, in_colab=False).stdout
    assert _calls(out) == [] and "IMPORTED False" in out and "Fashion-MNIST" not in out


def test_setup_cell_in_colab_installs_the_course_and_gets_data_and_models(tmp_path):
    out = _run_setup_cell(tmp_path, in_colab=True).stdout
    [pip] = _calls(out)
    assert pip[1:4] == ["-m", "pip", "install"] and pip[-1] == launch.read_launch().pip_requirement()
    assert "Fashion-MNIST from:" in out and "IMPORTED True" in out
    # make test prepared both models, so here they come from the cache (a fresh Colab downloads them)
    assert "moons_mlp: from the verified cache" in out and "fashion_resnet18: from the verified cache" in out


def test_a_setup_cell_with_an_extra_installs_the_course_with_it(tmp_path):
    [pip] = _calls(_run_setup_cell(tmp_path, in_colab=True, extras=("openvino",)).stdout)
    assert pip[-1] == launch.read_launch().pip_requirement(("openvino",))
    assert pip[-1].startswith("onnx-quant-course[openvino] @ git+")


def test_setup_cell_keeps_the_data_on_drive_when_asked(tmp_path):
    drive = tmp_path / "MyDrive" / "onnx-quant-course"
    out = _run_setup_cell(tmp_path, in_colab=True, drive=drive).stdout
    mount, pip, *ensured = _calls(out)
    assert mount == ["mount", "/content/drive"] and pip[3] == "install"
    assert ensured == [["ensure_models"]]
    assert f"DATA {drive}" in out  # the course data directory now lives on Drive


def test_changing_the_address_regenerates_everything(tmp_path):
    for part in ("notebooks", "README.md", "pyproject.toml"):
        src = ROOT / part
        (shutil.copytree if src.is_dir() else shutil.copy)(src, tmp_path / part)
    pyproject = tmp_path / "pyproject.toml"
    old = launch.read_launch(pyproject)
    pyproject.write_text(pyproject.read_text().replace(old.repository, "https://github.com/elsewhere/course"))
    moved = launch.read_launch(pyproject)
    assert len(launch.stale(tmp_path)) == 2 * len(NOTEBOOKS) + 1  # sources, notebooks, README
    changed = launch.write(tmp_path)
    assert len(changed) == 2 * len(NOTEBOOKS) + 1 and launch.stale(tmp_path) == []
    text = (tmp_path / "notebooks" / "03_static_qdq.ipynb").read_text()
    assert moved.colab_url("03_static_qdq.ipynb") in text and old.repository not in text
    # Only the generated cells changed: everything else is as it was.
    before = nbformat.read(ROOT / "notebooks" / "03_static_qdq.ipynb", as_version=4).cells
    after = nbformat.read(tmp_path / "notebooks" / "03_static_qdq.ipynb", as_version=4).cells
    same = [a.source == b.source for a, b in zip(before, after, strict=True)]
    assert same.count(False) == 2


def test_colab_can_install_the_course_as_a_package(tmp_path):
    # Colab installs the repository with pip (not editable): the wheel must carry every module.
    # Built from a copy, because setuptools leaves build/lib behind in the directory it builds.
    source = tmp_path / "source"
    shutil.copytree(ROOT / "course_lib", source / "course_lib", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(tmp_path), str(source)],
        check=True,
        capture_output=True,
    )
    [wheel] = tmp_path.glob("onnx_quant_course-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    package = ROOT / "course_lib"
    modules = {f"course_lib/{p.relative_to(package).as_posix()}" for p in package.rglob("*.py")}
    assert modules <= names
