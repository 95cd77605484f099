"""Colab's setup: what the first code cell of every lesson calls, once course_lib itself is installed.

A fresh Colab runtime has Python, PyTorch, ipywidgets and the usual scientific packages, and
nothing of the course. The setup cell installs course_lib alone (`pip install --no-deps`, a few
seconds) and calls `setup`, which, saying what it does at each step:

1. picks the course's data directory: the folder `onnx-quant-course` on Google Drive when the
   learner ticked KEEP_ON_DRIVE (Drive is mounted; Colab asks for permission), or when that folder
   is already there (an earlier lesson of this runtime mounted Drive), else the runtime's own disk;
2. installs what course_lib needs beside Colab's packages, listing each download, under a pip
   constraint that keeps Colab's torch, torchvision and ipywidgets wherever they meet the course's
   requirements: pip then never swaps Colab's PyTorch for another build (PyPI's Linux torch
   brings about 4 GB of CUDA wheels), and never upgrades ipywidgets inside the running kernel;
3. gets Fashion-MNIST when the lesson uses it, and the demo models the lesson uses and no others:
   from the verified cache (on Drive, what an earlier runtime left), the release download, or
   training here, after saying how long it will take; where training would run on the CPU, it
   first says how to switch to a GPU runtime.

The standard library alone at the top: this module runs before the course's dependencies are installed.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

DISTRIBUTION = "onnx-quant-course"
DATA_DIR_ENV = "COURSE_DATA_DIR"  # data.DATA_DIR_ENV (data imports NumPy; this module may not yet)
DRIVE_MOUNT = "/content/drive"
DRIVE_FOLDER = "/content/drive/MyDrive/onnx-quant-course"
# Colab's own packages that pip must leave as they are: replacing torch (and torchvision, built
# against it) downloads gigabytes; upgrading ipywidgets under a running kernel leaves the kernel
# with the old module and the disk with the new one until the runtime restarts.
KEPT = ("torch", "torchvision", "ipywidgets")
# pip's lines that say what it does; the rest ("Requirement already satisfied: …") is left out.
SHOWN = re.compile(r"^\s*(Downloading|Using cached|Installing collected|Successfully installed|ERROR)")
SIZE = re.compile(r"\((\d+(?:\.\d+)?) (kB|MB|GB)\)")

Say = Callable[..., None]


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def installed_version(name: str) -> str | None:
    """The installed version of distribution `name`, or None."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def requirements(extras: Sequence[str] = (), distribution: str = DISTRIBUTION) -> list[str]:
    """What the installed course requires (its metadata), with `extras`, markers evaluated here."""
    from packaging.requirements import Requirement

    wanted = []
    for line in importlib.metadata.requires(distribution) or []:
        req = Requirement(line)
        if _canonical(req.name) == _canonical(distribution):
            continue  # an extra naming other extras: not one the lessons install
        if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in ("", *extras)):
            req.marker = None
            wanted.append(str(req))
    return wanted


@dataclass
class Kept:
    """The pip constraints that keep Colab's own packages, and a line on each of them."""

    constraints: list[str] = field(default_factory=list)  # "torch==2.14.1", …
    notes: list[str] = field(default_factory=list)
    restart: bool = False  # ipywidgets is upgraded: the running kernel keeps the old one until a restart


def keep_preinstalled(
    wanted: Sequence[str],
    version: Callable[[str], str | None] = installed_version,
    names: Sequence[str] = KEPT,
) -> Kept:
    """Constraints `name==installed version` for each of `names` that is installed and meets the
    course's requirement in `wanted`; a note on each, saying why where it cannot be kept."""
    from packaging.requirements import Requirement

    by_name = {_canonical(Requirement(r).name): Requirement(r) for r in wanted}
    kept = Kept()
    for name in names:
        have = version(name)
        req = by_name.get(_canonical(name))
        if have is None:
            continue  # not preinstalled: pip installs it like the rest
        if req is None or req.specifier.contains(have, prereleases=True):
            kept.constraints.append(f"{name}=={have}")
            kept.notes.append(f"{name} {have}")
            continue
        note = f"Colab's {name} {have} is outside the course's range ({req.specifier}): pip replaces it"
        if name == "ipywidgets":
            kept.restart = True
            note += "; restart the session after this cell (Runtime > Restart session), then run it again"
        elif name == "torch":
            note += " (a CUDA build from PyPI, several GB, where no CPU build is configured)"
        kept.notes.append(note)
    return kept


def pip_command(wanted: Sequence[str], constraints: Path, python: str = sys.executable) -> list[str]:
    """pip install of `wanted`, held by the constraints file; its output is shown (no --quiet)."""
    return [
        python,
        "-m",
        "pip",
        "install",
        "--progress-bar",
        "off",
        "--constraint",
        str(constraints),
        *wanted,
    ]


def run_pip(command: Sequence[str], say: Say = print) -> int:
    """Run pip, showing each download as it starts and what was installed; the whole output only
    when pip fails. Returns pip's exit status."""
    start = time.perf_counter()
    lines: list[str] = []
    megabytes = 0.0
    with subprocess.Popen(
        list(command), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip())
            if SHOWN.match(line):
                say("  " + line.strip())
                if line.lstrip().startswith("Downloading") and (size := SIZE.search(line)):
                    megabytes += float(size.group(1)) * {"kB": 1e-3, "MB": 1.0, "GB": 1e3}[size.group(2)]
    if proc.returncode:
        say("\n".join(["pip failed; its last lines:", *lines[-30:]]))
        return proc.returncode
    say(f"pip: done in {time.perf_counter() - start:.0f} s ({megabytes:.0f} MB downloaded)")
    return 0


def install_dependencies(extras: Sequence[str] = (), say: Say = print) -> Kept:
    """Install what the course needs beside Colab's packages, keeping Colab's torch, torchvision and
    ipywidgets where they meet its requirements (see `keep_preinstalled`)."""
    wanted = requirements(extras)
    kept = keep_preinstalled(wanted)
    with tempfile.NamedTemporaryFile("w", suffix="-colab-constraints.txt", delete=False) as f:
        f.write("".join(f"{line}\n" for line in kept.constraints))
    names = ", ".join(re.split(r"[<>=!~\[ ;]", r, maxsplit=1)[0] for r in wanted)
    say(f"pip: installing what course_lib needs, where Colab lacks it ({names}); each download is listed.")
    say("pip: Colab's own packages stay: " + "; ".join(kept.notes))
    code = run_pip(pip_command(wanted, Path(f.name)), say=say)
    os.unlink(f.name)
    if code:
        raise RuntimeError(f"pip install failed (exit {code}); its output is above.")
    importlib.invalidate_caches()
    if kept.restart:
        say(
            "ipywidgets was upgraded: restart the session (Runtime > Restart session) and run this cell again."
        )
    return kept


def data_directory(
    keep_on_drive: bool, mount: Callable[[str], None] | None = None, say: Say = print
) -> Path | None:
    """The course's data directory on Drive, when asked for (mounting Drive) or already there;
    None (the runtime's own disk) otherwise. Sets $COURSE_DATA_DIR to the Drive folder."""
    folder = Path(DRIVE_FOLDER)
    if keep_on_drive and not folder.parent.is_dir():
        if mount is None:
            from google.colab import drive  # Colab only

            mount = drive.mount
        mount(DRIVE_MOUNT)
    if not keep_on_drive and not folder.is_dir():
        say(
            "Course data: on this runtime's disk, gone when the runtime ends (tick KEEP_ON_DRIVE to keep "
            "it on your Google Drive)."
        )
        return None
    folder.mkdir(parents=True, exist_ok=True)
    os.environ[DATA_DIR_ENV] = str(folder)
    how = "as KEEP_ON_DRIVE asks" if keep_on_drive else "found there from an earlier lesson, so used"
    say(f"Course data: {folder} on your Google Drive ({how}).")
    return folder


def gpu_offer(names: Sequence[str]) -> str:
    """What to say before training `names` on a runtime without a GPU ('' where there is one)."""
    from course_machinery.models.training import training_device

    if training_device().type == "cuda":
        return ""
    return (
        f"No trained {', '.join(names)} to download: this runtime trains it on its CPU (the estimate "
        "follows). A GPU runtime trains it on the GPU: Runtime > Change runtime type > a GPU, then run "
        "this cell again (tick KEEP_ON_DRIVE first to keep what it trains). The course has not measured "
        "how long training takes on Colab's GPUs."
    )


def get_models(names: Sequence[str], fashion: bool, say: Say = print) -> dict:
    """Fashion-MNIST (when `fashion`) and the demo models `names`, each saying where it came from;
    one look at the release for the missing ones, which installs those alone."""
    from course_lib import data
    from course_machinery.models import pipeline
    from course_machinery.models.registry import cache_status

    if fashion:
        say("Fashion-MNIST from:", data.find_fashion_mnist(download=True).kind)
    missing = [name for name in names if cache_status(name) != "ok"]
    fetched = pipeline.fetch(missing, log=say, only=True) if missing else None
    to_train = [n for n in missing if fetched is None or n not in fetched.installed]
    big = [n for n in to_train if n != "moons_mlp"]  # the MLP trains on one CPU thread in seconds
    if big and (offer := gpu_offer(big)):
        say(offer)
    got = {name: pipeline.ensure_model(name, log=say, fetched=fetched) for name in names}
    for name, model in got.items():
        say(f"{name}: " + ("trained here" if model.origin == "trained here" else f"from the {model.origin}"))
    return got


def setup(
    keep_on_drive: bool = False,
    models: Sequence[str] = (),
    fashion: bool = False,
    extras: Sequence[str] = (),
    say: Say = print,
) -> dict:
    """The setup cell's work on Colab, in order: the data directory (Drive's permission is asked
    first, not after minutes of work), the dependencies, then the lesson's data and models."""
    data_directory(keep_on_drive, say=say)
    install_dependencies(extras, say=say)
    return get_models(models, fashion, say=say)
