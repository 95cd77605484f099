"""The offline bundle: one .zip that holds the course, Fashion-MNIST and the prepared models.

One bundle is written from the real prepared models (`make test` runs `prepare` first), its
manifest is checked against the archive, and lesson 01 runs from an unpacked copy in a kernel
that imports course_lib from that copy, cannot reach Debian's data, the downloader, training,
export or the network, and leaves the bundled data and models untouched.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import json
import platform
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import nbformat
import onnxruntime
import pytest
import torch

import course_lib.data as data
from conftest import ROOT
from course_lib import files
from course_machinery import bundle, models, text_encoder
from course_machinery.cli import main
from course_machinery.runner import execute_notebook, lesson_notebooks

TOP = bundle.TOP
PROBE = "course-bundle-probe"  # a tiny wheel that stands in for PyPI in the --wheels plumbing
PROBE_WHEEL = "course_bundle_probe-0.1-py3-none-any.whl"
MARK = "BUNDLE-CHECK "


def _tiny_wheel(directory: Path) -> Path:
    """A minimal, valid pure-Python wheel, so `--wheels` can be exercised without the network."""
    files = {
        "course_bundle_probe/__init__.py": b"WHERE = 'from the bundled wheelhouse'\n",
        "course_bundle_probe-0.1.dist-info/METADATA": b"Metadata-Version: 2.1\nName: course-bundle-probe\n"
        b"Version: 0.1\n",
        "course_bundle_probe-0.1.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: tests\n"
        b"Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = ""
    for name, body in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(body).digest()).rstrip(b"=").decode()
        record += f"{name},sha256={digest},{len(body)}\n"
    files["course_bundle_probe-0.1.dist-info/RECORD"] = (
        record + "course_bundle_probe-0.1.dist-info/RECORD,,\n"
    ).encode()
    path = directory / PROBE_WHEEL
    with zipfile.ZipFile(path, "w") as zf:
        for name, body in files.items():
            zf.writestr(name, body)
    return path


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """The bundle, written once from the real prepared models, with a one-wheel wheelhouse."""
    tmp = tmp_path_factory.mktemp("bundle")
    index = tmp / "index"
    index.mkdir()
    _tiny_wheel(index)
    t0 = time.perf_counter()
    path = bundle.write_bundle(
        tmp / "out" / "course.zip",
        wheels=True,
        progress=False,
        wheel_requirements=[PROBE],
        pip_args=["--no-index", "--find-links", str(index)],
    )
    print(f"\nbundle: {path.stat().st_size / 1e6:.1f} MB written in {time.perf_counter() - t0:.1f} s")
    yield path
    shutil.rmtree(path.parent, ignore_errors=True)  # ~300 MB: do not keep it in pytest's tmp dirs


@pytest.fixture(scope="module")
def unpacked(made, tmp_path_factory):
    """The bundle unpacked into a fresh directory; returns the course folder inside it."""
    dest = tmp_path_factory.mktemp("unpacked")
    with zipfile.ZipFile(made) as zf:
        zf.extractall(dest)
    yield dest / TOP
    shutil.rmtree(dest, ignore_errors=True)


def _sha(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def _prepared_model_files() -> dict[str, Path]:
    """What `prepare` made, by its path inside the bundle, read from the course's own caches."""
    out = {}
    for name in models.MODELS:
        for path in (
            models.cache_dir(name) / "weights.pt",
            models.cache_dir(name) / "meta.json",
            models.onnx_path(name),
        ):
            out[f"data/models/{name}/{path.name}"] = path
    for path in [*text_encoder.onnx_paths().values(), models.meta_path(text_encoder.NAME)]:
        out[f"data/models/{text_encoder.NAME}/{path.name}"] = path
    return out


def test_archive_matches_its_manifest_and_holds_course_data_and_models(made):
    assert made.suffix == ".zip" and list(made.parent.iterdir()) == [made]  # no temp file left behind
    with zipfile.ZipFile(made) as zf:
        infos = [i for i in zf.infolist() if not i.is_dir()]
        assert all(i.filename.startswith(f"{TOP}/") for i in infos)
        manifest = json.loads(zf.read(f"{TOP}/{bundle.MANIFEST}"))
        names = {i.filename.removeprefix(f"{TOP}/") for i in infos} - {bundle.MANIFEST}
        assert names == set(manifest["files"])
        for name in names:
            body = zf.read(f"{TOP}/{name}")
            assert manifest["files"][name]["sha256"] == _sha(body), name
            assert manifest["files"][name]["bytes"] == len(body), name
        start = zf.read(f"{TOP}/{bundle.START}").decode()

    # The course: every file git knows (tracked or new, not ignored), including the lessons.
    tracked = subprocess.run(["git", "-C", str(ROOT), "ls-files"], capture_output=True, text=True)
    if tracked.returncode == 0:
        expected = {n for n in tracked.stdout.splitlines() if (ROOT / n).is_file()}
        assert expected <= names, sorted(expected - names)
    lessons = {f"notebooks/{p.name}" for p in lesson_notebooks(ROOT / "notebooks")}
    assert lessons and lessons <= names
    assert {"course_lib/__init__.py", "course_machinery/bundle.py", "pyproject.toml", "Makefile"} <= names

    # Fashion-MNIST where data.py looks first, and the very models `prepare` made, byte for byte.
    source = data.find_fashion_mnist(download=False)
    for stem, _, _ in data.FASHION_FILES.values():
        original = data.idx_file(source.directory, stem)
        bundled = manifest["files"][f"data/fashion-mnist/{original.name}"]
        assert bundled["sha256"] == files.sha256_file(original)
    prepared = _prepared_model_files()
    assert {n for n in names if n.startswith("data/models/")} == set(prepared)
    for name, original in prepared.items():
        assert manifest["files"][name]["sha256"] == files.sha256_file(original), name
    assert not [n for n in names if n.endswith((".lock", ".tmp")) or n.endswith("results.json")]
    assert not [n for n in names if n.startswith(("build/", ".venv/")) or "__pycache__" in n]

    assert manifest["python"] == platform.python_version()
    assert manifest["packages"]["torch"] == importlib.metadata.version("torch")
    assert manifest["runtime"]["torch"] == torch.__version__
    assert manifest["runtime"]["onnxruntime"] == onnxruntime.__version__
    assert manifest["data_source"]["kind"] == source.kind
    assert manifest["wheels"]["count"] == 1 and f"wheels/{PROBE_WHEEL}" in names
    assert 'pip install --no-index --find-links wheels/ -e ".[tooling,openvino]"' in start
    assert "EXTRAS=tooling,openvino PIP_NO_INDEX=1" in start and "00_start_here.ipynb" in start
    assert bundle.verify_bundle(made) == manifest


def test_verify_bundle_names_changed_and_missing_files(made, tmp_path):
    broken = tmp_path / "broken.zip"
    with zipfile.ZipFile(made) as src, zipfile.ZipFile(broken, "w") as dst:
        for info in src.infolist():
            if info.file_size > 1_000_000:
                continue  # the models and big data files go missing
            body = src.read(info)
            if info.filename == f"{TOP}/README.md":
                body += b"\nedited on the USB stick\n"
            dst.writestr(info, body)
    with pytest.raises(bundle.BundleError) as err:
        bundle.verify_bundle(broken)
    message = str(err.value)
    assert "README.md: content does not match" in message
    assert "data/models/fashion_resnet18/weights.pt: in the manifest but missing" in message
    assert "course_lib/data.py" not in message  # an untouched file is not reported


def test_bundled_wheelhouse_installs_without_an_index(unpacked, tmp_path):
    target = tmp_path / "site"
    pip = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-index",
            "--find-links",
            str(unpacked / "wheels"),
            "--target",
            str(target),
            "--quiet",
            PROBE,
        ],
        capture_output=True,
        text=True,
    )
    assert pip.returncode == 0, pip.stderr
    probe = subprocess.run(
        [sys.executable, "-c", "import course_bundle_probe as p; print(p.WHERE)"],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(target)},
    )
    assert probe.stdout.strip() == "from the bundled wheelhouse", probe.stderr


# Prepended to lesson 01: the only way left to the data and the models is the bundle's own copy.
GUARD = """\
import socket
from pathlib import Path

import course_lib.data as _data
import course_machinery.models.export as _export
import course_machinery.models.registry as _registry


def _forbidden(what):
    def refuse(*args, **kwargs):
        raise RuntimeError(f"bundle test: {what} is not allowed in the offline copy")

    return refuse


_data.DEBIAN_DIR = Path("/nonexistent/debian-dir-disabled-by-the-bundle-test")
_data._torchvision_download = _forbidden("downloading Fashion-MNIST")
_registry.train_and_cache = _forbidden("training a model")
_export.export_onnx = _forbidden("exporting a model")
_connect = socket.socket.connect


def _no_network(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6):
        raise OSError("bundle test: no network in the workshop room")
    return _connect(self, address)


socket.socket.connect = _no_network
"""
# Appended: where everything the lesson used came from.
REPORT = f"""\
import json, os
import course_lib
import course_lib.data as _data
import course_machinery.models as _models

_source = _data.find_fashion_mnist(download=False)
print({MARK!r} + json.dumps({{
    "course_lib": course_lib.__file__,
    "data_dir": str(_data.data_dir()),
    "kind": _source.kind,
    "directory": str(_source.directory),
    "loaded_from": str(_data.load_fashion_mnist(download=False).source.directory),
    "model_dir": str(_models.cache_dir("fashion_resnet18")),
    "COURSE_DATA_DIR": os.environ.get("COURSE_DATA_DIR"),
}}))
"""


def _snapshot(directory: Path) -> dict[str, tuple[int, int]]:
    """Every file's size and time, except what a lesson writes by design: the results store and
    this run's figures (figures/NN.json, for `course_lib reference record`)."""
    return {
        str(p.relative_to(directory)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in directory.rglob("*")
        if p.is_file()
        and not p.name.startswith("results.json")
        and p.relative_to(directory).parts[0] != "figures"
    }


@pytest.mark.notebook
def test_lesson_01_runs_from_the_unpacked_bundle_offline(unpacked, tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(unpacked))  # ahead of the editable install of this checkout
    monkeypatch.delenv(data.DATA_DIR_ENV, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    [lesson] = (unpacked / "notebooks").glob("01_*.ipynb")
    nb = nbformat.read(lesson, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(GUARD))
    nb.cells.append(nbformat.v4.new_code_cell(REPORT))
    probe = tmp_path / lesson.name  # outside the unpacked tree: the tree only changes if the lesson does it
    nbformat.write(nb, probe)
    before = _snapshot(unpacked / "data")

    run = execute_notebook(probe, tmp_path / "executed", timeout=600, cwd=unpacked / "notebooks")

    assert run.ok, f"{lesson.name} failed from the bundle: {run.error} (executed copy: {run.output})"
    print(f"\nlesson 01 from the bundle: {run.seconds:.1f} s")
    executed = nbformat.read(run.output, as_version=4)
    outputs = json.dumps([c.get("outputs", []) for c in executed.cells], ensure_ascii=False)
    assert "❌" not in outputs and "✅" in outputs  # the lesson's own self-checks passed
    text = "".join(o.get("text", "") for o in executed.cells[-1].outputs)
    report = json.loads(text.split(MARK, 1)[1])
    root = unpacked.resolve()
    assert Path(report["course_lib"]).resolve().is_relative_to(root), report["course_lib"]
    assert not Path(report["course_lib"]).resolve().is_relative_to(ROOT.resolve())
    assert Path(report["data_dir"]).resolve() == root / "data"
    assert report["kind"] == "course data directory"
    assert Path(report["directory"]).resolve() == root / "data" / "fashion-mnist"
    assert Path(report["loaded_from"]).resolve() == root / "data" / "fashion-mnist"
    assert Path(report["model_dir"]).resolve() == root / "data" / "models" / "fashion_resnet18"
    assert report["COURSE_DATA_DIR"] is None
    assert _snapshot(unpacked / "data") == before  # nothing trained, exported, downloaded or rewritten


def test_bundle_without_prepared_models_names_the_fix(private_data_dir, tmp_path, capsys):
    out = tmp_path / "out" / "course.zip"
    with pytest.raises(bundle.BundleError, match=r"moons_mlp.*not trained yet.*python -m course_lib prepare"):
        bundle.write_bundle(out, progress=False)
    assert not out.exists() and not (out.parent.exists() and any(out.parent.iterdir()))

    assert main(["bundle", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "Cannot make the bundle" in err and "`python -m course_lib prepare`" in err
    assert str(private_data_dir / "models") in err
    assert not out.exists()


def test_bundle_must_be_a_zip(tmp_path):
    with pytest.raises(bundle.BundleError, match=r"name it \*\.zip"):
        bundle.write_bundle(tmp_path / "course.tar.gz", progress=False)


def test_the_wheelhouse_asks_the_index_for_the_courses_needs_not_the_course_or_its_test_tools():
    from packaging.requirements import Requirement

    names = {Requirement(r).name.lower() for r in bundle.project_requirements()}
    # pyproject's extras name the course's own extras ("onnx-quant-course[lab]"); pip download would
    # look for the course on the index and fail, so they are expanded.
    assert "onnx-quant-course" not in names
    assert {"torch", "onnxruntime", "jupyterlab", "ipykernel", "nbclient", "openvino", "setuptools"} <= names
    assert not names & {"pytest", "playwright", "ruff", "jupyter-book", "zizmor"}
    everything = {Requirement(r).name.lower() for r in bundle.project_requirements(extras=("test",))}
    assert "onnx-quant-course" not in everything and {"pytest", "jupyterlab", "openvino"} <= everything
    with pytest.raises(bundle.BundleError, match="no extra 'labs'; its extras: lab, tooling"):
        bundle.project_requirements(extras=("labs",))


def test_make_installs_the_extras_start_offline_names():
    """START-OFFLINE.md tells a workshop room `EXTRAS=tooling,openvino make lab`: make must install
    exactly those extras (the wheelhouse has nothing else), and `.[test]` by default."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    stamp = ".venv/.course-installed"

    def install_line(*args: str) -> str:
        done = subprocess.run(["make", "-n", "-B", *args, stamp], cwd=ROOT, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return next(line for line in done.stdout.splitlines() if "pip install --quiet -e" in line)

    assert install_line().endswith("-e '.[test]'")
    assert install_line(f"EXTRAS={','.join(bundle.WHEEL_EXTRAS)}").endswith("-e '.[tooling,openvino]'")
