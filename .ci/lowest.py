"""An environment with the lowest versions pyproject.toml allows, for the CI job that tests them.

    python3.11 .ci/lowest.py build/lowest-venv

creates the virtual environment, installs uv into it, and resolves the course with
`uv pip install --resolution lowest-direct` for the packages a learner and the course's commands
use (the `tooling` extra: every dependency at the lowest version its range admits, with PyTorch
from its CPU index). The test tools (the `test` extra: pytest, ruff, zizmor, jupyter-book…) are
then added at their current versions, so the unit tests judge the course, not an old linter;
uv keeps what is already installed where it satisfies them. Last, it prints each declared
dependency's range and the version installed, marked where a test tool pulled it above its floor.

Run it with the lowest supported Python (requires-python's floor); it uses the standard library only.
"""

from __future__ import annotations

import argparse
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
UV = "uv==0.13.9"
# Where there is no CUDA, PyTorch's CPU build (uv's --torch-backend); on macOS PyPI's wheel is it.
TORCH_BACKEND = "cpu"

REPORT = r"""
import importlib.metadata as md
from packaging.requirements import Requirement
from packaging.version import Version

dist = md.distribution("onnx-quant-course")
rows = []
for line in dist.requires or []:
    req = Requirement(line)
    if req.marker and not any(req.marker.evaluate({"extra": e}) for e in ("", "lab", "tooling")):
        continue  # the test tools: current versions on purpose
    if req.name == "onnx-quant-course":
        continue
    version = md.version(req.name)
    floors = [s.version for s in req.specifier if s.operator in (">=", "==", "~=")]
    at_floor = any(Version(Version(version).public) == Version(floor) for floor in floors)
    mark = "at its floor" if at_floor else "ABOVE its floor"
    rows.append((req.name, str(req.specifier), version, mark))
width = max(len(r[0]) for r in rows)
print(f"{'package':{width}}  range            installed")
for name, spec, version, mark in sorted(rows):
    print(f"{name:{width}}  {spec:16} {version:14} {mark}")
"""


def run(*command: str) -> None:
    print("+", " ".join(command), flush=True)
    subprocess.run(command, cwd=ROOT, check=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("venv", type=Path, help="where to create the environment (e.g. build/lowest-venv)")
    args = parser.parse_args(argv)
    venv = args.venv if args.venv.is_absolute() else ROOT / args.venv
    bindir = venv / ("Scripts" if platform.system() == "Windows" else "bin")
    python, uv = str(bindir / "python"), str(bindir / "uv")
    run(sys.executable, "-m", "venv", "--clear", str(venv))
    run(python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", UV)
    run(
        uv,
        "pip",
        "install",
        "--python",
        python,
        "--torch-backend",
        TORCH_BACKEND,
        "--resolution",
        "lowest-direct",
        "-e",
        ".[tooling]",
    )
    run(uv, "pip", "install", "--python", python, "--torch-backend", TORCH_BACKEND, "-e", ".[test]")
    run(python, "-c", REPORT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
