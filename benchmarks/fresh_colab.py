"""A fresh Colab runtime, simulated here: how long from nothing to the end of a lesson?

    python benchmarks/fresh_colab.py [--lesson 01_affine_encoding] [--keep]

What Colab gives a learner who opens a lesson: an empty machine with Python, PyTorch and the
usual scientific packages, and nothing of the course. The simulation builds the same here:

- a new virtual environment that sees only what Colab preinstalls (torch, torchvision, numpy,
  scikit-learn, matplotlib, transformers, ipywidgets, ipykernel, … and what they need), lent
  from this checkout's .venv through a .pth file; a stand-in `google.colab` module is imported
  at start-up, as Colab's kernel does, so the lesson's setup cell takes its Colab branch;
- the course repository as the setup cell's `pip install git+…` sees it: a git copy of this
  checkout, which `git config url.<copy>.insteadOf <repository>` puts at the repository's address;
- a release made from this machine's verified cache (`python -m course_lib release`, in the copy,
  so the copy's course_lib/release.json names it), served over HTTP from 127.0.0.1
  ($COURSE_RELEASE_URL); an empty course data directory.

Then the lesson runs top to bottom in a fresh kernel of that environment, setup cell first, and
the time from the kernel's start to the lesson's last cell is printed, cell by cell for the first
few. Not simulated: Colab's own start-up (the VM), and the network: pip takes the wheels from
this machine's pip cache or PyPI, Fashion-MNIST comes from the Debian package here (in Colab,
torchvision downloads 30 MB), and the release comes over loopback (on Colab, from GitHub).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from course_lib import data, hardware, release  # noqa: E402
from course_lib.tooling import bundle, launch, runner  # noqa: E402

# What a Colab CPU runtime has before the course is installed (its preinstalled packages that
# course_lib depends on); everything else the setup cell's pip install brings.
COLAB_PREINSTALLED = (
    "torch",
    "torchvision",
    "numpy",
    "scikit-learn",
    "matplotlib",
    "tqdm",
    "ipywidgets",
    "transformers",
    "ipykernel",
    "nbformat",
    "nbclient",
    "psutil",
    "setuptools",
    "wheel",
)
TARGET_SECONDS = 180


def preinstalled_closure(names=COLAB_PREINSTALLED) -> list[importlib.metadata.Distribution]:
    """The preinstalled distributions and everything they require (extras included, markers
    evaluated for this machine), as installed in this .venv."""
    from packaging.requirements import Requirement

    seen: dict[str, importlib.metadata.Distribution] = {}
    done: set[tuple[str, frozenset]] = set()
    todo = [(name, frozenset()) for name in names]
    while todo:
        name, extras = todo.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if (key, extras) in done:
            continue
        done.add((key, extras))
        try:
            dist = seen.get(key) or importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        seen[key] = dist
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in extras | {""}):
                todo.append((req.name, frozenset(req.extras)))
    return list(seen.values())


def lend(dists, target: Path) -> int:
    """Symlink each distribution's top-level files and its metadata folder into `target`."""
    target.mkdir(parents=True)
    count = 0
    for dist in dists:
        base = Path(dist.locate_file(""))
        tops = {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}
        for top in tops:
            src, dst = base / top, target / top
            if src.exists() and not dst.exists() and top != "__pycache__" and not top.endswith(".pth"):
                dst.symlink_to(src)
                count += 1
    return count


def sh(*args, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], check=True, capture_output=True, text=True, **kw)


def build(tmp: Path) -> dict:
    """Everything a fresh runtime starts from (not timed)."""
    # 1. The repository as pip will clone it, with a release made from this machine's cache.
    repo = tmp / "repo"
    for rel in bundle.course_files(ROOT):
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, repo / rel)
    env = {**os.environ, data.DATA_DIR_ENV: str(data.data_dir())}
    made = sh(sys.executable, "-m", "course_lib", "release", "--out", tmp / "release", cwd=repo, env=env)
    for line in made.stdout.splitlines()[:2]:
        print("  " + line)
    sh("git", "init", "-q", "-b", "main", cwd=repo)
    sh("git", "add", "-A", cwd=repo)
    sh(
        "git",
        "-c",
        "user.name=bench",
        "-c",
        "user.email=bench@localhost",
        "commit",
        "-q",
        "-m",
        "snapshot",
        cwd=repo,
    )
    gitconfig = tmp / "gitconfig"
    gitconfig.write_text(f'[url "file://{repo}"]\n\tinsteadOf = {launch.read_launch().repository}\n')

    # 2. The runtime: a new venv, Colab's preinstalled packages lent to it, google.colab importable.
    venv = tmp / "venv"
    sh(sys.executable, "-m", "venv", venv)
    python = venv / "bin" / "python"
    site = Path(sh(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())
    lent = lend(preinstalled_closure(), tmp / "colab-site")
    fake = tmp / "fake-colab" / "google" / "colab"
    fake.mkdir(parents=True)  # `google` stays a namespace package: protobuf installs google.protobuf
    (fake / "__init__.py").write_text('"""Stand-in for Colab\'s google.colab."""\nfrom . import drive\n')
    (fake / "drive.py").write_text(
        "def mount(where):\n    raise RuntimeError('KEEP_ON_DRIVE needs the real Colab')\n"
    )
    (site / "zz-colab-runtime.pth").write_text(
        f"{tmp / 'colab-site'}\n{tmp / 'fake-colab'}\nimport google.colab\n"
    )

    # 3. A kernel of that runtime, with the course's data directory empty and the release served locally.
    kernels = tmp / "jupyter" / "kernels" / "fresh-colab"
    kernels.mkdir(parents=True)
    (tmp / "data").mkdir()
    return {"repo": repo, "python": python, "kernels": kernels, "gitconfig": gitconfig, "lent": lent}


def serve(folder: Path) -> tuple[ThreadingHTTPServer, str]:
    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), partial(Quiet, directory=str(folder)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}"


def cell_seconds(cell) -> float | None:
    from datetime import datetime

    t = cell.get("metadata", {}).get("execution", {})
    if "iopub.execute_input" in t and "shell.execute_reply" in t:
        parse = datetime.fromisoformat
        return (
            parse(t["shell.execute_reply"].rstrip("Z")) - parse(t["iopub.execute_input"].rstrip("Z"))
        ).total_seconds()
    return None


def main(argv: list[str] | None = None) -> int:
    import nbformat

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lesson", default="01_affine_encoding", help="notebook name without .ipynb")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder and print where it is")
    args = parser.parse_args(argv)
    notebook = ROOT / "notebooks" / f"{args.lesson}.ipynb"
    print(f"{hardware.cpu_summary()}; {os.cpu_count()} cores; lesson {notebook.name}")
    tmp = Path(tempfile.mkdtemp(prefix="fresh-colab-"))
    try:
        t0 = time.perf_counter()
        print("Building the fresh runtime (not timed):")
        parts = build(tmp)
        print(
            f"  {parts['lent']} preinstalled packages lent, a git copy of the course, a release "
            f"[{time.perf_counter() - t0:.0f} s]"
        )
        httpd, url = serve(tmp / "release")
        env = {
            data.DATA_DIR_ENV: str(tmp / "data"),
            release.URL_ENV: url,
            "GIT_CONFIG_GLOBAL": str(parts["gitconfig"]),
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        }
        (parts["kernels"] / "kernel.json").write_text(
            json.dumps(
                {
                    "argv": [str(parts["python"]), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                    "display_name": "fresh Colab (simulated)",
                    "language": "python",
                    "env": env,
                }
            )
        )
        os.environ["JUPYTER_PATH"] = str(tmp / "jupyter")
        print(f"Running {notebook.name} in the fresh runtime (timed from the kernel's start):", flush=True)
        result = runner.execute_notebook(
            notebook, tmp / "out", timeout=1800, cwd=tmp, kernel_name="fresh-colab"
        )
        httpd.shutdown()
        if not result.ok:
            print(f"  FAILED: {result.error} (executed copy: {result.output})")
            return 1
        executed = nbformat.read(result.output, as_version=4)
        code = [c for c in executed.cells if c.cell_type == "code"]
        setup = next(c for c in code if c.source.startswith(launch.SETUP_MARK))
        lesson = sum(cell_seconds(c) or 0 for c in code if c is not setup)
        setup_s = cell_seconds(setup) or 0
        printed = "".join(o.get("text", "") for o in setup.outputs if o.get("output_type") == "stream")
        print("  setup cell said: " + printed.strip().replace("\n", "\n  setup cell said: "))
        print()
        print("| step | seconds |")
        print("|---|---:|")
        print(f"| setup cell (pip install from the repository, data, both models) | {setup_s:.1f} |")
        print(f"| the lesson's other {len(code) - 1} code cells | {lesson:.1f} |")
        print(f"| kernel start, shutdown and the rest | {result.seconds - setup_s - lesson:.1f} |")
        print(f"| **from nothing to the end of {args.lesson}** | **{result.seconds:.1f}** |")
        met = "met" if result.seconds <= TARGET_SECONDS else "NOT met"
        print(
            f"\nTarget: at most {TARGET_SECONDS / 60:.0f} minutes on 2 cores: {met} ({result.seconds / 60:.1f} min)."
        )
        return 0 if result.seconds <= TARGET_SECONDS else 1
    finally:
        if args.keep:
            print(f"Kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
