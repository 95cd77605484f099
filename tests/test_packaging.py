"""pyproject.toml, environment.yml and binder/ must name the same packages."""

from __future__ import annotations

import re
import tomllib

import yaml

from conftest import ROOT


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~;\[ ]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def pyproject_packages() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {_name(r) for r in project["dependencies"]}


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
