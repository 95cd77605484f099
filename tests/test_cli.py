from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT


def course_lib(*args: str, env: dict | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "course_lib", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def test_prepare_is_idempotent_and_says_what_it_did():
    course_lib("prepare", "--no-progress")  # whatever was missing is made now
    second = course_lib("prepare", "--no-progress")
    assert second.returncode == 0, second.stderr
    out = second.stdout
    assert "checksums verified" in out
    assert "moons_mlp: verified cache;" in out and "fashion_resnet18: verified cache;" in out
    assert "Training" not in out and "Downloading" not in out
    assert re.search(r"prepare finished in (\d\.\d s|\d+ s|\d+ min \d+ s); data directory", out), out


def test_one_duration_style_everywhere():
    from course_lib.units import format_duration
    from course_machinery import cli

    assert cli._fmt_seconds is format_duration
    got = [format_duration(s) for s in (0.04, 7.0, 9.94, 10.4, 59.4, 59.6, 125.0, 3725.0)]
    assert got == ["0.0 s", "7.0 s", "9.9 s", "10 s", "59 s", "1 min 0 s", "2 min 5 s", "62 min 5 s"]


def test_doctor_reports_a_complete_environment():
    result = course_lib("doctor")
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    for expected in (
        "onnxruntime",
        "torch",
        "AVX2",
        "AVX-512 VNNI",
        "CPUExecutionProvider",
        "Fashion-MNIST: found",
    ):
        assert expected in out
    assert "fashion_resnet18: cached" in out and "ONNX exported" in out
    assert out.count("    source: ") == 2  # where each demo model came from
    assert "  release: " in out
    assert "text_encoder: all-MiniLM-L6-v2 exported" in out
    assert out.rstrip().endswith("Environment complete.")


def test_doctor_names_what_is_missing(tmp_path):
    result = course_lib("doctor", env={"COURSE_DATA_DIR": str(tmp_path)})
    assert result.returncode == 1
    assert "moons_mlp: not trained yet" in result.stdout
    assert "get fashion_resnet18: python -m course_lib prepare (the release, else training)" in result.stdout
    assert "export the text_encoder: python -m course_lib prepare" in result.stdout
    assert result.stdout.rstrip().endswith("Environment incomplete.")


def test_unknown_command_is_a_usage_error():
    result = course_lib("train-everything")
    assert result.returncode == 2 and "invalid choice" in result.stderr


@pytest.mark.notebook
def test_run_executes_notebooks_and_prints_a_summary(tmp_path):
    nb_dir = tmp_path / "notebooks"
    nb_dir.mkdir()
    (nb_dir / "00_tiny.ipynb").write_text(
        '{"cells": [{"cell_type": "code", "execution_count": null, "id": "a", "metadata": {}, "outputs": [],'
        ' "source": ["import course_lib\\n", "print(course_lib.CLASS_NAMES[0])"]}], "metadata": {'
        '"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},'
        ' "nbformat": 4, "nbformat_minor": 5}'
    )
    (nb_dir / "01_broken.ipynb").write_text(
        '{"cells": [{"cell_type": "code", "execution_count": null, "id": "b", "metadata": {}, "outputs": [],'
        ' "source": ["1 / 0"]}], "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",'
        ' "language": "python"}}, "nbformat": 4, "nbformat_minor": 5}'
    )
    result = course_lib(
        "run", "--notebooks", str(nb_dir), "--build", str(tmp_path / "build"), "--timeout", "120"
    )
    assert result.returncode == 1  # one notebook failed
    assert "FAILED 01_broken.ipynb" in result.stdout and "ZeroDivisionError" in result.stdout
    assert "1 of 2 notebooks ran top to bottom" in result.stdout
    executed = (tmp_path / "build" / "notebooks" / "00_tiny.ipynb").read_text()
    assert "T-shirt/top" in executed
    record = json.loads((tmp_path / "build" / "run.json").read_text())  # for the instructor guide
    assert [(e["notebook"], e["ok"]) for e in record["lessons"]] == [
        ("00_tiny.ipynb", True),
        ("01_broken.ipynb", False),
    ]
    assert all(e["seconds"] > 0 and e["peak_memory_bytes"] > 10e6 for e in record["lessons"])


def test_memory_watch_counts_processes_started_inside_it():
    from course_machinery.runner import MemoryWatch

    child = "import numpy, time; a = numpy.ones(300 * 1024 * 1024 // 8); time.sleep(1.0)"
    with MemoryWatch(interval=0.1) as watch:
        subprocess.run([sys.executable, "-c", child], check=True)
    assert 300e6 < watch.peak < 600e6
    with MemoryWatch(interval=0.1) as quiet:
        subprocess.run([sys.executable, "-c", "import time; time.sleep(0.5)"], check=True)
    assert quiet.peak < 100e6


def test_release_writes_the_archive_and_manifest_and_says_what_to_upload(tmp_path):
    result = course_lib("release", "--out", str(tmp_path), "--no-package-file")
    assert result.returncode == 0, result.stderr
    manifest = json.loads((tmp_path / "course-models.manifest.json").read_text())
    assert (tmp_path / "course-models.tar").stat().st_size == manifest["bytes"]
    assert sorted(manifest["models"]) == ["fashion_resnet18", "moons_mlp"] and len(manifest["files"]) == 6
    out = result.stdout
    assert f"Release {manifest['tag']} in {tmp_path}" in out and manifest["sha256"] in out
    assert f"the GitHub release tagged {manifest['tag']}" in out and "course_lib/release.json" not in out
