"""A fresh Colab runtime, simulated here: how long from nothing to the end of a lesson?

    python benchmarks/fresh_colab.py [--lessons 00 02 03] [--release yes|no|both] [--keep]

What Colab gives a learner who opens a lesson: an empty machine with Python, PyTorch and the
usual scientific packages, and nothing of the course. The simulation builds the same here:

- Colab's preinstalled packages at Colab's versions, `tests/fixtures/colab_preinstalled.txt`
  (torch, torchvision, numpy, scikit-learn, matplotlib, ipywidgets 7.7.1, transformers,
  ipykernel, …), installed once into a base environment cached under build/fresh-colab/ (a pin
  whose version this checkout's .venv has is lent from it, with what it requires, rather than
  downloaded again; the others come from pip). Each run then gets a new virtual environment that
  sees the base one through a .pth file, and a stand-in `google.colab` module imported at
  start-up, as Colab's kernel does, so the lesson's setup cell takes its Colab branch;
- the course repository as the setup cell's `pip install git+…` sees it: a git copy of this
  checkout, which `git config url.<copy>.insteadOf <repository>` puts at the repository's address;
  with a release (`--release yes`): the copy holds a release made from this machine's verified
  cache (`python -m course_lib release`, so the copy's course_lib/release.json names it), served
  over HTTP from 127.0.0.1 ($COURSE_RELEASE_URL); without one (`no`): the copy has no
  release.json, as now, and the setup cell trains what the lesson uses;
- an empty course data directory.

Then each lesson runs top to bottom in a fresh kernel of a fresh runtime, setup cell first, and
the time from the kernel's start to the lesson's last cell is printed, with the setup cell's part
and what its install left of Colab's torch, torchvision and ipywidgets (kept: never reinstalled).
Not simulated: Colab's own start-up (the VM) and the network: pip takes the wheels from this
machine's package mirrors or PyPI, Fashion-MNIST comes from the Debian package here (in Colab,
torchvision downloads 30 MB), and the release comes over loopback (on Colab, from GitHub).
"""

from __future__ import annotations

import argparse
import hashlib
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

from course_lib import data  # noqa: E402
from course_machinery import (  # noqa: E402
    bundle,
    colab,
    hardware,  # noqa: E402
    launch,
    release,  # noqa: E402
    runner,
)

PREINSTALLED = ROOT / "tests" / "fixtures" / "colab_preinstalled.txt"
BASES = ROOT / "build" / "fresh-colab"
TARGET_SECONDS = 180  # with a release, to the end of lesson 01


def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def colab_pins(path: Path = PREINSTALLED) -> dict[str, str]:
    """name -> version of Colab's preinstalled packages (the fixture's `name==version` lines)."""
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            pins[name.strip()] = version.strip()
    return pins


def preinstalled_closure(names) -> list[importlib.metadata.Distribution]:
    """The distributions `names` and everything they require (extras included, markers evaluated
    for this machine), as installed in this .venv."""
    from packaging.requirements import Requirement

    seen: dict[str, importlib.metadata.Distribution] = {}
    done: set[tuple[str, frozenset]] = set()
    todo = [(name, frozenset()) for name in names]
    while todo:
        name, extras = todo.pop()
        key = _key(name)
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
    target.mkdir(parents=True, exist_ok=True)
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


def site_packages(python: Path) -> Path:
    return Path(sh(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())


def base_environment() -> tuple[Path, Path]:
    """Colab's preinstalled packages at the fixture's versions, built once and cached under
    build/fresh-colab/: (its site-packages, the folder of what is lent from this .venv)."""
    pins = colab_pins()
    digest = hashlib.sha256(PREINSTALLED.read_bytes() + sys.version.encode()).hexdigest()[:12]
    base = BASES / f"base-{digest}"
    venv, lent = base / "venv", base / "lent"
    if (base / "READY").exists():
        print(f"  Colab's preinstalled packages: {base} (built earlier)")
        return site_packages(venv / "bin" / "python"), lent
    shutil.rmtree(base, ignore_errors=True)
    t0 = time.perf_counter()
    sh(sys.executable, "-m", "venv", venv)
    site = site_packages(venv / "bin" / "python")
    same = [name for name, version in pins.items() if colab.installed_version(name) == version]
    other = {_key(name) for name in pins if name not in same}
    count = lend([d for d in preinstalled_closure(same) if _key(d.metadata["Name"]) not in other], lent)
    (site / "zz-lent.pth").write_text(f"{lent}\n")
    wanted = [f"{name}=={version}" for name, version in pins.items() if name not in same]
    sh(venv / "bin" / "python", "-m", "pip", "install", "--quiet", "-c", PREINSTALLED, *wanted)
    (base / "READY").write_text(json.dumps({"lent from this .venv": same, "installed": wanted}, indent=1))
    print(
        f"  Colab's preinstalled packages: {', '.join(same)} lent from this .venv at the same versions "
        f"({count} files and folders, with what they require); {len(wanted)} installed at Colab's "
        f"versions [{time.perf_counter() - t0:.0f} s]"
    )
    return site, lent


def repository(tmp: Path, with_release: bool) -> dict:
    """The course repository as pip will clone it: a git copy of this checkout, with a release made
    from this machine's cache (`with_release`) or with none. Returns its paths."""
    repo = tmp / ("repo-release" if with_release else "repo-none")
    for rel in bundle.course_files(ROOT):
        if rel.as_posix() == "course_lib/release.json":
            continue  # the copy has a release only when this one makes it
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, repo / rel)
    out = None
    if with_release:
        out = tmp / "release"
        env = {**os.environ, data.DATA_DIR_ENV: str(data.data_dir())}
        made = sh(sys.executable, "-m", "course_lib", "release", "--out", out, cwd=repo, env=env)
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
    gitconfig = tmp / f"gitconfig-{repo.name}"
    gitconfig.write_text(f'[url "file://{repo}"]\n\tinsteadOf = {launch.read_launch().repository}\n')
    return {"repo": repo, "release": out, "gitconfig": gitconfig}


def runtime(tmp: Path, base_site: Path, lent: Path) -> dict:
    """A fresh runtime: a new venv that sees Colab's preinstalled packages, google.colab importable,
    a kernel of it and an empty course data directory."""
    venv = tmp / "venv"
    sh(sys.executable, "-m", "venv", venv)
    python = venv / "bin" / "python"
    site = site_packages(python)
    fake = tmp / "fake-colab" / "google" / "colab"
    fake.mkdir(parents=True)  # `google` stays a namespace package: protobuf installs google.protobuf
    (fake / "__init__.py").write_text('"""Stand-in for Colab\'s google.colab."""\nfrom . import drive\n')
    (fake / "drive.py").write_text(
        "def mount(where):\n    raise RuntimeError('KEEP_ON_DRIVE needs the real Colab')\n"
    )
    (site / "zz-colab-runtime.pth").write_text(
        f"{base_site}\n{lent}\n{tmp / 'fake-colab'}\nimport google.colab\n"
    )
    (tmp / "jupyter" / "kernels" / "fresh-colab").mkdir(parents=True)
    (tmp / "data").mkdir()
    return {"python": python, "site": site, "kernels": tmp / "jupyter" / "kernels" / "fresh-colab"}


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


def run_lesson(lesson: str, tmp: Path, base: tuple[Path, Path], repo: dict, url: str | None) -> dict:
    """One lesson in one fresh runtime; its timings, what its setup said and what it left of
    Colab's own packages."""
    import nbformat

    notebook = next((ROOT / "notebooks").glob(f"{lesson}_*.ipynb"))
    parts = runtime(tmp, *base)
    env = {
        data.DATA_DIR_ENV: str(tmp / "data"),
        "GIT_CONFIG_GLOBAL": str(repo["gitconfig"]),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    if url:
        env[release.URL_ENV] = url
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
    # a cell may train the ResNet18 (minutes to most of an hour on a busy 2-core CPU)
    result = runner.execute_notebook(notebook, tmp / "out", timeout=5400, cwd=tmp, kernel_name="fresh-colab")
    found = {"lesson": notebook.stem, "release": bool(url), "ok": result.ok, "total": result.seconds}
    executed = nbformat.read(result.output, as_version=4)
    code = [c for c in executed.cells if c.cell_type == "code"]
    setup = next(c for c in code if c.source.startswith(launch.SETUP_MARK))
    found["setup"] = cell_seconds(setup) or 0.0
    found["cells"] = sum(cell_seconds(c) or 0 for c in code if c is not setup)
    found["said"] = "".join(
        o.get("text", "") for o in setup.get("outputs", []) if o.get("output_type") == "stream"
    )
    found["models"] = re.findall(r"^(moons_mlp|fashion_resnet18): (.+)$", found["said"], flags=re.M)
    mine = {_key(d.metadata["Name"]) for d in importlib.metadata.distributions(path=[str(parts["site"])])}
    found["replaced"] = sorted(set(colab.KEPT) & mine)  # installed over Colab's own: should be none
    found["installed"] = len(mine - {"pip", "setuptools"})
    if not result.ok:
        found["error"] = f"{result.error} (executed copy: {result.output})"
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lessons", nargs="+", default=["01"], help="lesson numbers, e.g. 00 02 03")
    parser.add_argument("--release", choices=("yes", "no", "both"), default="yes")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder and print where it is")
    args = parser.parse_args(argv)
    kinds = {"yes": [True], "no": [False], "both": [True, False]}[args.release]
    print(f"{hardware.cpu_summary()}; {os.cpu_count()} cores; lessons {', '.join(args.lessons)}")
    tmp = Path(tempfile.mkdtemp(prefix="fresh-colab-"))
    rows = []
    try:
        t0 = time.perf_counter()
        print("Building what a fresh runtime starts from (not timed):")
        base = base_environment()
        repos = {kind: repository(tmp, kind) for kind in kinds}
        print(
            f"  a git copy of the course for each of: {', '.join('with a release' if k else 'no release' for k in kinds)} [{time.perf_counter() - t0:.0f} s]"
        )
        for kind in kinds:
            httpd, url = serve(repos[kind]["release"]) if kind else (None, None)
            for lesson in args.lessons:
                label = f"{lesson}, {'with a release' if kind else 'no release'}"
                print(
                    f"Running lesson {label} in a fresh runtime (timed from the kernel's start) …", flush=True
                )
                found = run_lesson(
                    lesson, tmp / f"run-{lesson}-{'release' if kind else 'none'}", base, repos[kind], url
                )
                rows.append(found)
                print("  setup cell said: " + found["said"].strip().replace("\n", "\n  setup cell said: "))
                print(
                    f"  {'FAILED: ' + found['error'] if not found['ok'] else 'done'} [{found['total']:.0f} s]",
                    flush=True,
                )
            if httpd:
                httpd.shutdown()
        print()
        print(
            "| lesson | release | setup cell | the lesson's other cells | from nothing to the end | models from | Colab's torch, torchvision, ipywidgets |"
        )
        print("|---|---|---:|---:|---:|---|---|")
        for r in rows:
            models = "; ".join(f"{n}: {o.removeprefix('from the ')}" for n, o in r["models"]) or "none"
            kept = "kept" if not r["replaced"] else "REPLACED: " + ", ".join(r["replaced"])
            end = f"**{r['total']:.0f} s ({r['total'] / 60:.1f} min)**" + ("" if r["ok"] else " FAILED")
            print(
                f"| {r['lesson']} | {'yes' if r['release'] else 'no'} | {r['setup']:.0f} s | {r['cells']:.0f} s | {end} | {models} | {kept} |"
            )
        bad = [r for r in rows if not r["ok"] or r["replaced"]]
        for r in rows:
            if r["release"] and r["lesson"].startswith("01_"):
                met = "met" if r["total"] <= TARGET_SECONDS else "NOT met"
                print(
                    f"\nTarget for lesson 01 with a release: at most {TARGET_SECONDS / 60:.0f} minutes: {met}."
                )
                bad += [r] if r["total"] > TARGET_SECONDS else []
        return 1 if bad else 0
    finally:
        if args.keep:
            print(f"Kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
