"""pyproject.toml, environment.yml and binder/ must name the same packages."""

from __future__ import annotations

import os
import re
import shutil
import site
import subprocess
import sys
import tomllib

import numpy as np
import yaml

from conftest import ROOT


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~;\[ ]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def pyproject_packages() -> set[str]:
    """What a conda environment (local or Binder) holds: the lessons' dependencies, JupyterLab and
    the course's tooling and lesson 05's second runtime (its `lab`, `tooling` and `openvino` extras,
    which the test extra builds on)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    wanted = project["dependencies"] + extras["lab"] + extras["tooling"] + extras["openvino"]
    return {_name(r) for r in wanted} - {"onnx-quant-course"}


def conda_packages(path) -> set[str]:
    env = yaml.safe_load(path.read_text())
    names = set()
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            names |= {_name(r) for r in dep["pip"] if not r.startswith("-")}
        elif _name(dep) not in ("python", "pip"):
            names.add(_name(dep))
    return names


def test_environment_yml_names_the_same_packages_as_pyproject():
    assert conda_packages(ROOT / "environment.yml") == pyproject_packages()


def test_binder_names_the_same_packages_as_pyproject():
    assert conda_packages(ROOT / "binder" / "environment.yml") == pyproject_packages()


def test_pyproject_admits_the_local_torch_and_torchvision():
    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = {Requirement(r).name: Requirement(r) for r in project["dependencies"]}
    assert "2.14.1" in reqs["torch"].specifier and "0.29.1" in reqs["torchvision"].specifier
    assert not any("==" in str(r.specifier) for r in reqs.values())  # ranges, no pins


def test_binder_installs_the_data_and_prepares_the_models():
    assert "dataset-fashion-mnist" in (ROOT / "binder" / "apt.txt").read_text().split()
    post_build = ROOT / "binder" / "postBuild"
    assert post_build.stat().st_mode & 0o111  # executable, as repo2docker requires
    assert "python -m course_lib prepare" in post_build.read_text()


ONNX_WORK = """
import sys

from course_lib import files, versions

heavy = {"torch", "onnx", "onnxruntime"} & set(sys.modules)
assert not heavy, f"importing course_lib.files and .versions imported {heavy}"

import numpy as np

import course_lib as cl
from course_lib import calibration, data, measure
from course_machinery import results

cl.ArrayReader, cl.load_split, cl.cpu_report
model = sys.argv[1]
assert measure.model_facts(model).op_counts == {"MatMul": 1}
assert measure.logits(model, np.ones((3, 2), np.float32), threads=1).tolist() == [[3.0, 3.0]] * 3
entry = results.record("99", "tiny", "fp32", {"ms": 1.0}, path=model)
assert entry["file"]["sha256"] == files.sha256_file(model)
assert results.load_results(lesson="99") == [entry]
assert "torch" not in sys.modules, "torch was imported"

from course_machinery.models import architectures  # defines the networks: imports torch
assert "torch" in sys.modules  # the check above can see torch
import torch

assert versions.library_versions()["torch"] == torch.__version__  # read without importing torch
"""


def test_importing_course_lib_for_onnx_work_does_not_import_torch(tmp_path):
    # torch costs about 0.5 GB of a Binder notebook's 2 GB; lessons 03-04 and the processes that
    # measure.peak_memory_of spawns need only ONNX Runtime: model facts, logits and the results
    # store (whose environment fingerprint names torch's version) included.
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    import course_lib.data as data

    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"])],
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2])],
        [numpy_helper.from_array(np.full((2, 2), 1.5, np.float32), "W")],
    )
    model = tmp_path / "tiny.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(model))
    env = {**os.environ, data.DATA_DIR_ENV: str(tmp_path / "data")}
    subprocess.run([sys.executable, "-c", ONNX_WORK, str(model)], check=True, cwd=ROOT, env=env)


def test_binder_post_build_runs_in_a_fresh_virtual_environment(tmp_path):
    """binder/postBuild as repo2docker runs it: from the repository's root, with `python` on PATH.

    The virtual environment is new and course_lib is not installed in it; the dependencies that
    repo2docker installs from binder/environment.yml are lent from this environment through a
    .pth file (installing torch again would take gigabytes). The course data directory starts
    empty (but for the text encoder's export, which comes from a pip package, not a release),
    and a release made from this machine's models is served on 127.0.0.1: postBuild must get the
    demo models from it, not train them.
    """
    import threading
    from functools import partial
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    import course_lib.data as data
    import course_machinery.release as release
    from course_machinery.publish import write_release

    repo = tmp_path / "repo"
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True)
    for name in tracked.stdout.splitlines():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, repo / name)  # keeps postBuild's executable bit
    made = write_release(tmp_path / "release", package_file=repo / "course_lib" / "release.json")
    fresh_data = tmp_path / "data"
    shutil.copytree(data.data_dir() / "models" / "text_encoder", fresh_data / "models" / "text_encoder")
    handler = partial(SimpleHTTPRequestHandler, directory=str(tmp_path / "release"))
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}"

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    [fresh_site] = (venv / "lib").glob("python3*/site-packages")
    (fresh_site / "lent-dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env |= {"PATH": f"{venv / 'bin'}:{env['PATH']}", data.DATA_DIR_ENV: str(fresh_data), release.URL_ENV: url}
    found = subprocess.run([venv / "bin" / "python", "-c", "import course_lib"], env=env, cwd=tmp_path)
    assert found.returncode != 0  # not installed in the fresh environment before postBuild

    try:
        build = subprocess.run(
            [repo / "binder" / "postBuild"], cwd=repo, env=env, capture_output=True, text=True, timeout=900
        )
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    assert f"Downloading the trained models: {url}/{release.ASSET}" in build.stdout
    assert (
        "moons_mlp: release download" in build.stdout and "fashion_resnet18: release download" in build.stdout
    )
    assert "Training" not in build.stdout
    where = subprocess.run(
        [venv / "bin" / "python", "-c", "import course_lib; print(course_lib.__file__)"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert where.stdout.strip() == str(repo / "course_lib" / "__init__.py")
    doctor = subprocess.run(
        [venv / "bin" / "python", "-m", "course_lib", "doctor"],
        env=env,
        cwd=repo,
        capture_output=True,
        text=True,
    )
    assert doctor.returncode == 0 and "Environment complete." in doctor.stdout, doctor.stdout[-3000:]
    assert f"source: downloaded from {url}/{release.ASSET} (SHA-256 {made.sha256[:12]}" in doctor.stdout
    assert f"release: {made.tag}" in doctor.stdout
