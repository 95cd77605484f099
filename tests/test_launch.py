"""Colab and Binder launch: badges and setup cells generated from the one address in pyproject.toml."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import tomllib
import zipfile
from importlib.metadata import version
from pathlib import Path

import nbformat
import pytest

from conftest import ROOT
from course_machinery import launch
from course_machinery.runner import lesson_notebooks

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
    assert where.pip_requirement() in cells[setup].source
    # the markdown right above it says what it does and how to keep the models between runtimes
    above = cells[setup - 1]
    assert above.cell_type == "markdown" and above.source.startswith(launch.SETUP_TEXT_MARK)
    assert "KEEP_ON_DRIVE" in above.source and "Google Drive" in above.source


def test_lesson_05cs_colab_cell_installs_the_openvino_extra_and_the_others_do_not():
    where = launch.read_launch()
    assert where.pip_requirement(("openvino",)).startswith("onnx-quant-course[openvino] @ git+")
    for notebook in NOTEBOOKS:
        cells = nbformat.read(notebook, as_version=4).cells
        setup = next(c.source for c in cells if c.source.startswith(launch.SETUP_MARK))
        wants_openvino = notebook.name.startswith("05c_")
        assert ('extras=["openvino"]' in setup) == wants_openvino, notebook.name


def test_readme_has_the_badges_and_a_link_to_every_lesson():
    readme = (ROOT / "README.md").read_text()
    where = launch.read_launch()
    assert launch.badges_markdown(where) in readme
    # both of the course's badges open the student edition, Binder's too (not the repository root)
    binder = re.search(r"\[!\[Launch Binder\]\([^)]*\)\]\(([^)]*)\)", readme).group(1)
    assert (
        binder
        == f"https://mybinder.org/v2/gh/{where.slug}/{where.branch}?labpath=notebooks%2Fstudent%2F00_start_here.ipynb"
    )
    for notebook in NOTEBOOKS:
        assert where.colab_url(notebook.name) in readme and where.binder_url(notebook.name) in readme
        assert "/notebooks/student/" in where.colab_url(notebook.name)
        assert (ROOT / "notebooks" / "student" / notebook.name).exists()  # what the link opens is committed


def _setup_cell_of(lesson: str) -> str:
    """The setup cell of a lesson's notebook, as a learner meets it."""
    notebook = next((ROOT / "notebooks").glob(f"{lesson}_*.ipynb"))
    cells = nbformat.read(notebook, as_version=4).cells
    return next(c.source for c in cells if c.source.startswith(launch.SETUP_MARK))


def _run_setup_cell(
    tmp_path,
    in_colab: bool,
    cell: str | None = None,
    keep_on_drive: bool = False,
    drive: Path | None = None,
    data: Path | None = None,
    no_release: bool = False,
) -> subprocess.CompletedProcess:
    """A setup cell (default: lesson 00's) in a fresh interpreter, with both pip installs recorded
    instead of run (with the constraints file each was given) and every training recorded.

    Drive's folder is `drive` (default: tmp_path/MyDrive/onnx-quant-course, absent); mounting
    Drive is recorded and creates MyDrive, as the real mount does. `data`: the course data
    directory (default: this checkout's, where `make test` prepared both models). `no_release`:
    the release lookup finds none, whatever course_lib/release.json says.
    """
    cell = cell or _setup_cell_of("00")
    if keep_on_drive:
        cell = cell.replace("KEEP_ON_DRIVE = False", "KEEP_ON_DRIVE = True")
    drive = drive or tmp_path / "MyDrive" / "onnx-quant-course"
    harness = textwrap.dedent(f"""
        import json, os, pathlib, subprocess, sys, types
        calls = []
        subprocess.run = lambda args, **kw: calls.append(["pip-no-deps", args])
        if {in_colab!r}:
            import google.protobuf  # `google` stays protobuf's namespace package, as on Colab
            colab = sys.modules["google.colab"] = sys.modules["google"].colab = types.ModuleType("google.colab")
            def mount(where):
                calls.append(["mount", where])
                pathlib.Path({str(drive.parent)!r}).mkdir(parents=True, exist_ok=True)
            colab.drive = types.SimpleNamespace(mount=mount)
            import course_machinery.colab as setup
            from course_machinery.models import registry
            setup.DRIVE_FOLDER = {str(drive)!r}
            def pip(command, say=print):
                constraints = pathlib.Path(command[command.index("--constraint") + 1]).read_text()
                calls.append(["pip", command, constraints.split()])
                return 0
            setup.run_pip = pip
            train = registry.train_and_cache
            def recorded(name, *args, **kw):
                calls.append(["train", name])
                if name != "moons_mlp":
                    raise SystemExit("the setup cell trained " + name)
                return train(name, *args, **kw)
            registry.train_and_cache = recorded
            if {no_release!r}:
                import course_machinery.release
                course_machinery.release.published = lambda *a, **k: None
        exec(compile({cell!r}, "setup-cell", "exec"))
        print("CALLS", json.dumps(calls))
        print("IMPORTED", "course_lib" in sys.modules)
        print("DATA", os.environ.get("COURSE_DATA_DIR"))
    """)
    env = dict(os.environ)
    if data is not None:
        env["COURSE_DATA_DIR"] = str(data)
    done = subprocess.run(
        [sys.executable, "-c", harness], capture_output=True, text=True, cwd=tmp_path, env=env
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def _calls(out: str) -> list:
    return json.loads(next(line for line in out.splitlines() if line.startswith("CALLS "))[6:])


def test_setup_cell_does_nothing_outside_colab(tmp_path):
    out = _run_setup_cell(tmp_path, in_colab=False).stdout
    assert _calls(out) == [] and "IMPORTED False" in out and "Fashion-MNIST" not in out


def test_setup_cell_installs_the_course_then_its_needs_keeping_colabs_torch_and_ipywidgets(tmp_path):
    out = _run_setup_cell(tmp_path, in_colab=True).stdout
    [first, pip] = [c for c in _calls(out) if c[0].startswith("pip")]
    # 1. course_lib itself, without dependencies (seconds), from the course's repository
    assert first[1][1:] == [
        "-m",
        "pip",
        "install",
        "--quiet",
        "--no-deps",
        launch.read_launch().pip_requirement(),
    ]
    # 2. what it needs, pip's output shown, under a constraint that keeps this runtime's own torch,
    # torchvision and ipywidgets: pip cannot swap them for other builds or upgrade them
    _, command, constraints = pip
    assert command[1:4] == ["-m", "pip", "install"] and "--quiet" not in command
    for name in ("torch", "torchvision", "ipywidgets"):
        assert f"{name}=={version(name)}" in constraints
    assert any(r.startswith("onnxruntime") for r in command) and not any(
        "onnx-quant-course" in r for r in command
    )
    assert "pip: Colab's own packages stay: torch " in out
    # 3. lesson 00's data and both of its models; make test prepared them, so from the cache here
    assert "Fashion-MNIST from:" in out and "IMPORTED True" in out
    assert "moons_mlp: from the verified cache" in out and "fashion_resnet18: from the verified cache" in out
    assert not [c for c in _calls(out) if c[0] == "train"]


def test_lesson_02s_setup_gets_the_mlp_alone_and_never_trains_the_resnet18(tmp_path):
    """Lesson 02 uses the two-moons MLP and no Fashion-MNIST: on a fresh runtime without a release
    its setup trains the MLP (seconds) and nothing else."""
    data = tmp_path / "data"
    out = _run_setup_cell(
        tmp_path, in_colab=True, cell=_setup_cell_of("02"), data=data, no_release=True
    ).stdout
    assert [c[1] for c in _calls(out) if c[0] == "train"] == ["moons_mlp"]
    assert "moons_mlp: trained here" in out
    assert "fashion_resnet18" not in out and "Fashion-MNIST" not in out and "GPU" not in out
    assert sorted(p.name for p in (data / "models").iterdir()) == ["moons_mlp"]


def test_lesson_needs_are_read_from_its_code():
    def needs(lesson):
        return launch.lesson_needs(next((ROOT / "notebooks" / "src").glob(f"{lesson}_*.py")).read_text())

    assert needs("02") == launch.Needs(("moons_mlp",), False)
    assert needs("03") == launch.Needs(("fashion_resnet18",), True)
    assert needs("05") == launch.Needs(("fashion_resnet18",), True)  # through variants.build_resnet_variants
    assert needs("00") == launch.Needs(("moons_mlp", "fashion_resnet18"), True)
    assert 'models=["moons_mlp"])' in _setup_cell_of("02")
    assert 'models=["fashion_resnet18"], fashion=True)' in _setup_cell_of("03")
    # a name in a comment or in the lesson's prose is not a use
    source = '# %% [markdown]\n# the "fashion_resnet18"\n\n# %%\nx = 1  # "moons_mlp"\nload_split("test")\n'
    assert launch.lesson_needs(source) == launch.Needs((), True)


# A setup cell whose lesson uses no demo model: the Drive tests need no models in the Drive folder.
NO_MODELS = launch.setup_cell(launch.read_launch(), (), launch.Needs((), False))


def test_setup_cell_mounts_drive_and_keeps_the_data_there_when_asked(tmp_path):
    drive = tmp_path / "MyDrive" / "onnx-quant-course"
    out = _run_setup_cell(tmp_path, in_colab=True, cell=NO_MODELS, keep_on_drive=True, drive=drive).stdout
    calls = _calls(out)
    kinds = [c[0] for c in calls]
    assert kinds == ["pip-no-deps", "mount", "pip"]  # Colab asks before the minutes of work, not after
    assert calls[1] == ["mount", "/content/drive"]
    assert f"DATA {drive}" in out and drive.is_dir()  # the course data directory now lives on Drive


def test_the_drive_folder_of_an_earlier_lesson_is_used_without_asking(tmp_path):
    drive = tmp_path / "MyDrive" / "onnx-quant-course"
    drive.mkdir(parents=True)  # an earlier lesson of this runtime mounted Drive and made it
    out = _run_setup_cell(tmp_path, in_colab=True, cell=NO_MODELS, drive=drive).stdout
    assert not [c for c in _calls(out) if c[0] == "mount"] and f"DATA {drive}" in out
    assert "found there from an earlier lesson" in out
    # without it (and unticked), the runtime's own disk, and the line says how to keep it
    elsewhere = _run_setup_cell(
        tmp_path, in_colab=True, cell=NO_MODELS, drive=tmp_path / "none" / "onnx-quant-course"
    ).stdout
    assert "tick KEEP_ON_DRIVE" in elsewhere and f"DATA {os.environ.get('COURSE_DATA_DIR')}" in elsewhere


def test_colabs_preinstalled_versions_meet_the_course_and_are_kept():
    """The fixture's torch, torchvision and ipywidgets (Colab's, as the simulation uses them) meet
    pyproject.toml's ranges, so the setup keeps them; one below a floor is replaced, and said so."""
    from course_machinery import colab

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = dict(
        line.split("==")
        for line in (ROOT / "tests" / "fixtures" / "colab_preinstalled.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    )
    kept = colab.keep_preinstalled(project["dependencies"], version=pins.get)
    assert kept.constraints == [f"{n}=={pins[n]}" for n in ("torch", "torchvision", "ipywidgets")]
    assert not kept.restart
    old = {"torch": "2.8.0+cu126", "torchvision": "0.23.0+cu126", "ipywidgets": "7.6.5"}
    replaced = colab.keep_preinstalled(project["dependencies"], version=old.get)
    assert replaced.constraints == [] and replaced.restart
    assert "torch 2.8.0+cu126 is outside the course's range" in " ".join(replaced.notes)
    assert "restart the session" in " ".join(replaced.notes)
    command = colab.pip_command(["onnx>=1.19"], Path("c.txt"), python="py")
    assert command == [
        "py",
        "-m",
        "pip",
        "install",
        "--progress-bar",
        "off",
        "--constraint",
        "c.txt",
        "onnx>=1.19",
    ]


def test_the_install_shows_each_download_and_what_it_installed(tmp_path):
    from course_machinery import colab

    fake = tmp_path / "fake_pip.py"
    fake.write_text(
        "import sys\n"
        "print('Requirement already satisfied: numpy in /usr/lib')\n"
        "print('Collecting onnx>=1.19')\n"
        "print('  Downloading onnx-1.23.2-cp311-manylinux.whl (17.5 MB)')\n"
        "print('  Downloading tiny-1.0-py3-none-any.whl (512 kB)')\n"
        "print('Installing collected packages: tiny, onnx')\n"
        "print('Successfully installed onnx-1.23.2 tiny-1.0')\n"
        "sys.exit(int(sys.argv[1]))\n"
    )
    said = []
    assert colab.run_pip([sys.executable, str(fake), "0"], say=said.append) == 0
    assert said[:4] == [
        "  Downloading onnx-1.23.2-cp311-manylinux.whl (17.5 MB)",
        "  Downloading tiny-1.0-py3-none-any.whl (512 kB)",
        "  Installing collected packages: tiny, onnx",
        "  Successfully installed onnx-1.23.2 tiny-1.0",
    ]
    assert said[4].startswith("pip: done in") and "(18 MB downloaded)" in said[4]
    failed = []
    assert colab.run_pip([sys.executable, str(fake), "3"], say=failed.append) == 3
    assert "Requirement already satisfied" in failed[-1]  # on failure, all of pip's last lines


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
