"""`doctor` checks installed versions against what the course's own metadata declares."""

from __future__ import annotations

import importlib.metadata

from course_machinery import cli, doctor

DECLARED = [
    "numpy>=1.26",
    "numpy-from-the-future>=99",
    "no-such-package-xyz>=1",
    'pytest>=8; extra == "test"',
    'jupyterlab>=99; extra == "lab"',
    'onnx-quant-course[lab]; extra == "tooling"',
    'pywin32>=300; sys_platform == "nonexistent-os"',
]


def _fake(monkeypatch):
    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "requires", lambda dist: DECLARED)

    def version(dist):
        if dist == "numpy-from-the-future":
            return "1.0"
        return real(dist)

    monkeypatch.setattr(importlib.metadata, "version", version)


def test_each_declared_requirement_is_checked_against_what_is_installed(monkeypatch):
    _fake(monkeypatch)
    rows = {row["name"]: row for row in doctor.requirement_status()}
    assert rows["numpy"]["ok"] and rows["numpy"]["extra"] is None
    assert not rows["numpy-from-the-future"]["ok"] and rows["numpy-from-the-future"]["installed"] == "1.0"
    assert rows["no-such-package-xyz"]["installed"] is None and not rows["no-such-package-xyz"]["ok"]
    assert rows["pytest"]["extra"] == "test" and rows["pytest"]["ok"]
    assert rows["jupyterlab"]["extra"] == "lab" and not rows["jupyterlab"]["ok"]
    assert "onnx-quant-course" not in rows and "pywin32" not in rows  # self-reference; other platform


def test_the_real_metadata_covers_every_core_dependency_in_pyproject():
    import tomllib

    from conftest import ROOT

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    from packaging.requirements import Requirement

    core = {Requirement(r).name.lower() for r in project["dependencies"]}
    checked = {row["name"].lower() for row in doctor.requirement_status() if row["extra"] is None}
    assert core <= checked


def test_doctor_reports_a_too_old_core_package_as_a_problem_and_names_the_fix(monkeypatch, capsys):
    _fake(monkeypatch)
    status = cli.doctor()
    out = capsys.readouterr().out
    assert status == 1
    assert "numpy-from-the-future>=99 is needed, 1.0 is installed: pip install -e ." in out
    assert "only the lab extra needs it" in out  # jupyterlab too old: said, not a problem
