"""What `make` installs first: the PyTorch build this machine needs, and what the install weighs.

On Linux, PyPI's torch wheel is the CUDA build: with its nvidia-* and triton wheels it adds about
4.5 GB to an environment, on every laptop, Binder image and CI machine that has no GPU to use it.
The course runs on the CPU, so where there is no NVIDIA driver `make` installs torch and
torchvision from PyTorch's CPU index first; `pip install -e .` then finds them satisfied.

    python course_machinery/install.py torch [--index auto|pypi|URL]
    python course_machinery/install.py summary

Run by path (before the course is installed), so it uses the standard library only. When the CPU
index cannot be reached (an offline mirror, a firewall), it says so and leaves the choice to pip's
own configured index, which always works but may be the large build; `TORCH_INDEX=URL make`
names a reachable mirror instead.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import platform
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

CPU_INDEX = "https://download.pytorch.org/whl/cpu"
PROBE_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class TorchChoice:
    """Which index torch and torchvision come from, and why (the line `make` prints)."""

    index: str | None  # None: pip's own configured index decides
    reason: str


def has_nvidia_driver(system: str | None = None, which: Callable[[str], str | None] = shutil.which) -> bool:
    """Whether an NVIDIA driver is installed here (`nvidia-smi` or the Linux driver's proc file)."""
    system = system or platform.system()
    if which("nvidia-smi"):
        return True
    return system == "Linux" and Path("/proc/driver/nvidia/version").exists()


def index_reachable(url: str, timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """None when `url`'s torch page answers; otherwise why not, in words."""
    page = url.rstrip("/") + "/torch/"
    try:
        with urllib.request.urlopen(page, timeout=timeout) as response:  # noqa: S310 (http/https only)
            if response.status == 200:
                return None
            return f"HTTP {response.status} from {page}"
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code} from {page}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return f"{page} did not answer ({reason})"


def choose_torch_index(
    requested: str,
    system: str | None = None,
    nvidia: bool | None = None,
    probe: Callable[[str], str | None] = index_reachable,
) -> TorchChoice:
    """Decide where torch comes from.

    `requested` is `auto` (the CPU index on Linux without an NVIDIA driver; elsewhere PyPI, whose
    macOS and Windows wheels are CPU builds already), `pypi` (pip's configured index decides) or
    an index URL (used as given, after checking it answers).
    """
    system = system or platform.system()
    requested = requested.strip()
    if requested in ("pypi", "", "none"):
        return TorchChoice(None, "TORCH_INDEX=pypi: torch comes from pip's configured index")
    if requested == "auto":
        if system != "Linux":
            return TorchChoice(None, f"{system}: PyPI's torch wheels are CPU builds here already")
        if has_nvidia_driver(system) if nvidia is None else nvidia:
            return TorchChoice(None, "an NVIDIA driver is installed: PyPI's CUDA build of torch")
        url, why = CPU_INDEX, "no NVIDIA driver here: the CPU build of torch (about 4.5 GB smaller)"
    elif requested.startswith(("http://", "https://", "file://")):
        url, why = requested, f"TORCH_INDEX={requested}"
    else:
        raise SystemExit(
            f"TORCH_INDEX must be auto, pypi or an index URL such as {CPU_INDEX}; found {requested!r}. "
            "Run for example: make TORCH_INDEX=pypi"
        )
    problem = probe(url)
    if problem is None:
        return TorchChoice(url, why)
    return TorchChoice(
        None,
        f"{why}, but {problem}. Falling back to pip's configured index, which works but on Linux x86_64 "
        f"gives the CUDA build (several GB). To get the CPU build, rerun with TORCH_INDEX set to a "
        f"reachable mirror of {CPU_INDEX}, or install torch and torchvision yourself before `make`.",
    )


def pip_command(choice: TorchChoice, python: str = sys.executable) -> list[str] | None:
    """The pip command that installs torch and torchvision from the chosen index (None: leave it to pip)."""
    if choice.index is None:
        return None
    return [python, "-m", "pip", "install", "--quiet", "torch", "torchvision", "--index-url", choice.index]


def _dist_bytes(dist: importlib.metadata.Distribution) -> int:
    """Bytes a distribution's installed files take (RECORD's sizes, else the files on disk)."""
    total = 0
    for file in dist.files or ():
        if file.size is None:
            path = Path(dist.locate_file(file))
            total += path.stat().st_size if path.is_file() else 0
        else:
            total += file.size
    return total


def installed_sizes() -> list[tuple[str, str, int]]:
    """(name, version, bytes on disk) of every distribution in this environment, largest first."""
    seen: dict[str, tuple[str, str, int]] = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"] or "?"
        seen.setdefault(name.lower(), (name, dist.version, _dist_bytes(dist)))
    return sorted(seen.values(), key=lambda row: -row[2])


def summary(top: int = 8) -> str:
    """What the environment holds: its size and its largest packages (printed at the end of `make`)."""
    rows = installed_sizes()
    total = sum(size for _, _, size in rows)
    nvidia = sum(size for name, _, size in rows if name.lower().startswith(("nvidia-", "triton")))
    lines = [f"Installed: {len(rows)} packages, {total / 1e6:,.0f} MB in {sys.prefix}"]
    torch = next((f"{n} {v}" for n, v, _ in rows if n.lower() == "torch"), "torch not installed")
    build = "CUDA build" if nvidia else "CPU build"
    lines.append(f"  {torch} ({build}; nvidia/triton wheels {nvidia / 1e6:,.0f} MB)")
    lines += [f"  {size / 1e6:8,.0f} MB  {name} {version}" for name, version, size in rows[:top]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    torch = sub.add_parser("torch", help="install torch and torchvision from the index this machine needs")
    torch.add_argument("--index", default=os.environ.get("TORCH_INDEX", "auto"))
    sub.add_parser("summary", help="print the environment's size and largest packages")
    args = parser.parse_args(argv)
    if args.command == "summary":
        print(summary())
        return 0
    choice = choose_torch_index(args.index)
    print(f"torch: {choice.reason}", flush=True)
    command = pip_command(choice)
    if command is None:
        return 0
    t0 = time.perf_counter()
    done = subprocess.run(command, check=False)
    if done.returncode != 0:
        print(
            f"torch: installing from {choice.index} failed (exit {done.returncode}); "
            "`pip install -e .` will take torch from pip's configured index instead.",
            flush=True,
        )
        return 0
    print(f"torch: installed from {choice.index} in {time.perf_counter() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
