"""One archive for a workshop room without internet: `python -m course_lib bundle`.

The bundle is a single .zip (Windows unpacks it with Explorer; Linux and macOS with `unzip` or
Python) holding one top-level folder, `onnx-quant-course/`, with:

- the course itself: the files of the checkout (`git ls-files`, tracked and untracked-but-not-
  ignored) or, outside a git checkout, the package tree (course_lib/, notebooks/, tests/, …);
- the four Fashion-MNIST IDX files in `data/fashion-mnist/`, where `course_lib.data` looks first;
- the trained models and ONNX files that `python -m course_lib prepare` made, in `data/models/`;
- optionally (`--wheels`) a wheelhouse `wheels/` made by `pip download` for this platform and
  Python version: the course's dependencies with the extras a workshop room uses (WHEEL_EXTRAS:
  JupyterLab, the course's commands, lesson 05's OpenVINO; not the test suite) and the build
  backend, so `pip install --no-index` works.
  It needs the package index while the bundle is made and is large: from PyPI, torch for Linux
  x86_64 is the CUDA build and brings several GB of nvidia-* wheels. For CPU-only torch (about
  200 MB) point pip at PyTorch's CPU index first, e.g.
  `PIP_INDEX_URL=https://download.pytorch.org/whl/cpu PIP_EXTRA_INDEX_URL=https://pypi.org/simple`.
  Wheels for another platform (a Windows room) must be made on, or downloaded for, that platform;
- `START-OFFLINE.md` (how to install and open lesson 00 offline) and `MANIFEST.json` (SHA-256
  and size of every other file, and the Python and package versions that made the bundle).

Why zip and not tar.gz: a learner on Windows can open it without extra tools, the manifest can be
read without unpacking everything, and deflate gains as much as gzip here: the ONNX files and
weights are float32 and shrink by only about 8 %.

Nothing is trained or exported here: the models must be in the verified cache already. The
archive is written to a temporary file next to the target and renamed into place, so a failed
or interrupted run never leaves a half-written bundle under the final name.
"""

from __future__ import annotations

import io
import json
import os
import platform
import re
import subprocess
import sys
import sysconfig
import tempfile
import time
import tomllib
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from course_lib.files import sha256_file
from course_machinery import release

from .paths import BUILD, ROOT

TOP = release.BUNDLE_TOP  # the one folder at the top of the archive
MANIFEST = release.BUNDLE_MANIFEST
DEFAULT_OUT = BUILD / "onnx-quant-course-bundle.zip"
START = "START-OFFLINE.md"
MANIFEST_FORMAT = 1
PREPARE = "python -m course_lib prepare"

# Outside a git checkout (an unpacked bundle, an sdist): what counts as the course.
FALLBACK_GLOBS = (
    "course_lib/**/*.py",
    "course_lib/release.json",
    "notebooks/*.ipynb",
    "notebooks/student/*.ipynb",
    "notebooks/src/*.py",
    "course_machinery/reference_runs/*.json",
    "tests/*.py",
    "binder/*",
    ".ci/*",
    "pyproject.toml",
    "README.md",
    "Makefile",
    "environment.yml",
    "data/README.md",
    "LICENSE*",
    ".gitignore",
)
# Already compressed: stored as they are, deflating them again costs time and gains nothing.
STORED_SUFFIXES = (".gz", ".whl", ".zip", ".tar", ".bz2", ".xz", ".png", ".jpg")
EXECUTABLE = 0o100755
REGULAR = 0o100644


class BundleError(RuntimeError):
    """The bundle cannot be made (or an archive does not match its manifest); the message says why."""


@dataclass(frozen=True)
class Entry:
    """One file to put in the archive: its path inside the top folder and where its bytes are."""

    arcname: str
    source: Path | None = None
    content: bytes | None = None
    kind: str = "course"  # course, data, model, wheel or doc
    expected_sha256: str | None = None  # recorded elsewhere (model metadata); checked while writing

    @property
    def size(self) -> int:
        return len(self.content) if self.content is not None else self.source.stat().st_size


# --------------------------------------------------------------------------------------------
# What goes in
# --------------------------------------------------------------------------------------------
def course_files(root: Path = ROOT) -> list[Path]:
    """The course's own files, relative to `root`: git's view of the checkout, else FALLBACK_GLOBS.

    In a git checkout this is what `git ls-files --cached --others --exclude-standard` lists (the
    working tree minus what .gitignore ignores), so data/, build/ and .venv/ never come along.
    """
    root = Path(root).resolve()
    listed = _git_files(root)
    if listed is None:
        found = {p.relative_to(root) for pattern in FALLBACK_GLOBS for p in root.glob(pattern) if p.is_file()}
        listed = sorted(p for p in found if "__pycache__" not in p.parts)
    return [p for p in listed if (root / p).is_file() and not (root / p).is_symlink()]


def _git_files(root: Path) -> list[Path] | None:
    try:
        top = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--show-toplevel"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        if Path(top).resolve() != root:
            return None  # root sits inside some other repository: not the course's checkout
        out = subprocess.run(
            ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return sorted({Path(name) for name in out.decode().split("\0") if name})


def _data_entries() -> tuple[list[Entry], dict]:
    """The four verified Fashion-MNIST files, placed in data/fashion-mnist/ whatever their source."""
    from course_lib import data

    try:
        source = data.find_fashion_mnist(download=False)
    except data.DataNotFoundError as exc:
        raise BundleError(
            f"Fashion-MNIST is not on this machine, so it cannot go into the bundle. Run `{PREPARE}` "
            f"first (online, or with the Debian package installed).\n{exc}"
        ) from exc
    entries = []
    for key, (stem, _, _) in data.FASHION_FILES.items():
        path = data.idx_file(source.directory, stem)
        data.verify_file(path, key)  # raises ChecksumError, naming the fix
        entries.append(Entry(f"data/fashion-mnist/{path.name}", path, kind="data"))
    return entries, {"kind": source.kind, "directory": str(source.directory)}


def _not_prepared(what: str, problem: str) -> BundleError:
    from course_lib import data

    return BundleError(
        f"The bundle needs the prepared models, but {what} in {data.data_dir() / 'models'} cannot be used: "
        f"{problem}. Run `{PREPARE}` (it trains and exports what is missing), then bundle again."
    )


def _model_entries() -> tuple[list[Entry], dict]:
    """Every file `prepare` made under <data dir>/models, each checked against the hash recorded for it.

    Only verified cache entries go in, so the unpacked copy never trains or exports anything.
    The results store and lock files live elsewhere and are left out.
    """
    from course_machinery import models, text_encoder

    entries: list[Entry] = []
    summary: dict = {}
    for name in models.MODELS:
        status = models.cache_status(name)
        if status != "ok":
            raise _not_prepared(name, status)
        meta = models.load_cached(name).meta
        onnx_file, onnx_meta = models.onnx_path(name), meta.get("onnx", {})
        try:
            models.check_onnx(onnx_file, onnx_meta, exporter=models.ONNX_EXPORTER, opset=models.ONNX_OPSET)
        except models.CacheProblem as exc:
            raise _not_prepared(name, str(exc)) from None
        folder = f"data/models/{name}"
        entries += [
            Entry(
                f"{folder}/weights.pt",
                models.weights_path(name),
                kind="model",
                expected_sha256=meta["weights_sha256"],
            ),
            Entry(f"{folder}/{onnx_file.name}", onnx_file, kind="model", expected_sha256=onnx_meta["sha256"]),
            Entry(f"{folder}/meta.json", models.meta_path(name), kind="model"),
        ]
        summary[name] = {"test_accuracy": meta["test_accuracy"], "trained_at": meta.get("trained_at")}
    try:
        te_meta = text_encoder.check_cache()
    except models.CacheProblem as exc:
        raise _not_prepared(text_encoder.NAME, str(exc)) from None
    folder = f"data/models/{text_encoder.NAME}"
    for kind, path in text_encoder.onnx_paths().items():
        entries.append(
            Entry(
                f"{folder}/{path.name}", path, kind="model", expected_sha256=te_meta["files"][kind]["sha256"]
            )
        )
    entries.append(Entry(f"{folder}/meta.json", models.meta_path(text_encoder.NAME), kind="model"))
    summary[text_encoder.NAME] = {"files": sorted(p.name for p in text_encoder.onnx_paths().values())}
    return entries, summary


# What the bundle's wheelhouse installs: `doctor` wants `tooling` (JupyterLab and the course's
# commands); `openvino` runs lesson 05's second runtime. The test suite's extra stays out.
WHEEL_EXTRAS = ("tooling", "openvino")


def project_requirements(root: Path = ROOT, extras: Sequence[str] = WHEEL_EXTRAS) -> list[str]:
    """What an offline `pip install -e ".[extras]"` needs: dependencies, the extras and the build
    backend. An extra that names the course's own extras (`onnx-quant-course[lab]`) is expanded
    into theirs: the course itself is in the bundle, not on the package index."""
    project = tomllib.loads((Path(root) / "pyproject.toml").read_text())
    name = project["project"]["name"]
    optional = project["project"].get("optional-dependencies", {})
    reqs = list(project["project"]["dependencies"])
    todo, seen = list(extras), set()
    while todo:
        extra = todo.pop(0)
        if extra in seen:
            continue
        if extra not in optional:
            raise BundleError(f"pyproject.toml has no extra {extra!r}; its extras: {', '.join(optional)}")
        seen.add(extra)
        for req in optional[extra]:
            own = re.fullmatch(rf"{re.escape(name)}\[([\w,\s-]+)\]", req.strip())
            if own:
                todo += [e.strip() for e in own.group(1).split(",")]
            else:
                reqs.append(req)
    reqs += project.get("build-system", {}).get("requires", [])
    return list(dict.fromkeys(reqs))


def download_wheels(dest: Path, requirements: Sequence[str], pip_args: Sequence[str] = ()) -> list[Path]:
    """`pip download` the requirements (with all their dependencies) for this platform into `dest`.

    Needs the package index (PyPI, or whatever PIP_INDEX_URL names) while the bundle is made.
    """
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--prefer-binary",
        "--dest",
        str(dest),
        *pip_args,
        *requirements,
    ]
    print("Downloading wheels:", " ".join(cmd), flush=True)
    result = subprocess.run(cmd)
    if result.returncode != 0:
        raise BundleError(
            f"`pip download` failed (exit {result.returncode}); see its output above. --wheels needs the "
            "package index while the bundle is made: go online (or set PIP_INDEX_URL to a reachable mirror) "
            "and run again, or bundle without --wheels."
        )
    files = sorted(p for p in dest.iterdir() if p.is_file())
    if not files:
        raise BundleError(f"`pip download` saved nothing in {dest}; requirements: {', '.join(requirements)}")
    return files


def _versions(root: Path) -> dict[str, str]:
    names = [re.split(r"[\s<>=!~\[;(]", req, maxsplit=1)[0] for req in project_requirements(root, extras=())]
    from course_lib.versions import package_version

    return {name: package_version(name) for name in ["pip", *names]}


def git_commit(root: Path = ROOT) -> dict:
    """The checkout's HEAD and whether tracked files differ from it; {} outside a git checkout."""
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return {}
    return {"git_commit": commit, "git_uncommitted_changes": bool(dirty)}


# --------------------------------------------------------------------------------------------
# START-OFFLINE.md
# --------------------------------------------------------------------------------------------
def start_offline_text(wheels: bool, wheel_platform: str) -> str:
    """The instructions at the top of the bundle; they differ with and without a wheelhouse."""
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    extras = ",".join(WHEEL_EXTRAS)
    if wheels:
        install = f"""The folder `wheels/` holds every package the course needs, downloaded for **{wheel_platform},
Python {py}** (the machine that made this bundle). On a machine of that kind:

```bash
python{py} -m venv .venv
. .venv/bin/activate                     # Windows: .venv\\Scripts\\activate
pip install --no-index --find-links wheels/ -e ".[{extras}]"
```

With `make` (Linux, macOS), install, check and open in one step:
`EXTRAS={extras} PIP_NO_INDEX=1 PIP_FIND_LINKS="$PWD/wheels" make lab`. The test suite's
packages are not in `wheels/`: `make test` needs the package index.
For another operating system or Python version the wheels do not fit; install from a local
package mirror instead, or ask the instructor for a bundle made on such a machine."""
    else:
        install = f"""This bundle has no wheels (it was made without `--wheels`), so the Python packages must already
be installed, or come from a local mirror. On a machine whose environment has them (Python {py}+,
the packages in `pyproject.toml`):

```bash
pip install --no-deps --no-build-isolation -e .   # or skip installing and set PYTHONPATH to this folder
```"""
    return f"""# The course, offline

This folder is the whole course: the lessons, `course_lib`, Fashion-MNIST (`data/fashion-mnist/`)
and the trained models with their ONNX files (`data/models/`). Nothing is downloaded or trained
when you run it; the course checks every data file and model against its recorded SHA-256 as it
loads them. `MANIFEST.json` lists the SHA-256 of every file in the bundle and the versions of
Python and of the packages that made it.

## 1. Install

{install}

## 2. Check and open lesson 00

```bash
python -m course_lib doctor          # should end with "Environment complete."
jupyter lab notebooks/student/
```

Open `notebooks/student/00_start_here.ipynb` (the lessons with their exercises open; the instructor
edition, with solutions, is `notebooks/*.ipynb`) and run it top to bottom.

Keep `COURSE_DATA_DIR` unset: the course then uses `data/` in this folder, where the bundle put the
data and the models. (If you set it, copy `data/fashion-mnist/` and `data/models/` there.)
"""


# --------------------------------------------------------------------------------------------
# Writing and verifying the archive
# --------------------------------------------------------------------------------------------
def _zip_info(arcname: str, source: Path | None) -> zipfile.ZipInfo:
    mtime = time.localtime(source.stat().st_mtime if source is not None else time.time())
    info = zipfile.ZipInfo(f"{TOP}/{arcname}", date_time=max(mtime[:6], (1980, 1, 1, 0, 0, 0)))
    executable = source is not None and os.access(source, os.X_OK)
    info.external_attr = (EXECUTABLE if executable else REGULAR) << 16
    info.compress_type = (
        zipfile.ZIP_STORED if arcname.lower().endswith(STORED_SUFFIXES) else zipfile.ZIP_DEFLATED
    )
    return info


def _write_entry(zf: zipfile.ZipFile, entry: Entry, bar) -> dict:
    """Stream one file into the archive, hashing what is written; check a recorded hash if there is one."""
    info = _zip_info(entry.arcname, entry.source)
    info.file_size = entry.size  # lets zipfile decide on ZIP64 for large files up front
    size = 0

    def written(n: int) -> None:
        nonlocal size
        size += n
        bar.update(n)

    source = io.BytesIO(entry.content) if entry.content is not None else open(entry.source, "rb")  # noqa: SIM115
    with source, zf.open(info, "w") as dst:
        digest = sha256_file(source, copy_to=dst, on_chunk=written)
    if entry.expected_sha256 and digest != entry.expected_sha256:
        raise BundleError(
            f"{entry.source} changed while it was being bundled (SHA-256 {digest[:16]}…, its metadata "
            f"records {entry.expected_sha256[:16]}…). Run `{PREPARE}` and bundle again."
        )
    return {"sha256": digest, "bytes": size, "kind": entry.kind}


def write_bundle(
    out: Path = DEFAULT_OUT,
    wheels: bool = False,
    progress: bool = True,
    root: Path = ROOT,
    wheel_requirements: Sequence[str] | None = None,
    pip_args: Sequence[str] = (),
) -> Path:
    """Write the offline bundle (a .zip) to `out`, atomically; return its path.

    Fails with BundleError, naming `python -m course_lib prepare`, when the data or a model is
    missing or does not verify. With `wheels`, `pip download`s `wheel_requirements` (default: the
    project's dependencies, its test extra and its build backend; torch makes this large) into
    `wheels/`; `pip_args` go to pip as they are (e.g. `--no-index --find-links DIR`).
    """
    from tqdm.auto import tqdm

    from course_lib import files, versions

    out, root = Path(out).resolve(), Path(root).resolve()
    if out.suffix.lower() != ".zip":
        raise BundleError(f"The bundle is a zip archive: name it *.zip (got {out.name}).")
    model_entries, model_summary = _model_entries()  # first: the most likely thing to be missing
    data_entries, data_source = _data_entries()

    def is_output(p: Path) -> bool:
        full = (root / p).resolve()
        return full == out or (full.parent == out.parent and full.name.startswith(f".{out.name}."))

    entries = [Entry(p.as_posix(), root / p) for p in course_files(root) if not is_output(p)]
    taken = {e.arcname for e in entries}
    clash = taken & ({e.arcname for e in data_entries + model_entries} | {START, MANIFEST})
    if clash:
        raise BundleError(
            f"The checkout itself holds files the bundle generates: {', '.join(sorted(clash))}."
        )
    entries += data_entries + model_entries

    manifest: dict = {
        "format": MANIFEST_FORMAT,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "top_folder": TOP,
        "course": {"version": versions.package_version("onnx-quant-course"), **git_commit(root)},
        "python": platform.python_version(),
        "platform": {
            "system": platform.system(),
            "machine": platform.machine(),
            "tag": sysconfig.get_platform(),
        },
        "packages": _versions(root),  # as pip installed them
        "runtime": versions.library_versions(),  # as imported (torch's build tag, e.g. +cpu, shows here)
        "data_source": data_source,
        "models": model_summary,
        "wheels": None,
        "files": {},
    }
    with tempfile.TemporaryDirectory(prefix="course-wheels-") as wheel_tmp:
        if wheels:
            reqs = list(wheel_requirements) if wheel_requirements is not None else project_requirements(root)
            wheel_files = download_wheels(Path(wheel_tmp), reqs, pip_args)
            entries += [Entry(f"wheels/{p.name}", p, kind="wheel") for p in wheel_files]
            manifest["wheels"] = {
                "platform": sysconfig.get_platform(),
                "python": f"{sys.version_info.major}.{sys.version_info.minor}",
                "requirements": reqs,
                "count": len(wheel_files),
            }
        start = Entry(
            START, content=start_offline_text(wheels, sysconfig.get_platform()).encode(), kind="doc"
        )
        entries.insert(0, start)

        total = sum(e.size for e in entries)

        def write(tmp: Path) -> None:
            with (
                zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED, allowZip64=True) as zf,
                tqdm(
                    total=total,
                    unit="B",
                    unit_scale=True,
                    desc=f"bundle {out.name}",
                    disable=not progress,
                    dynamic_ncols=True,
                ) as bar,
            ):
                for entry in entries:
                    manifest["files"][entry.arcname] = _write_entry(zf, entry, bar)
                body = json.dumps(manifest, indent=2, sort_keys=False).encode()
                zf.writestr(_zip_info(MANIFEST, None), body)
            os.chmod(tmp, 0o644)  # mkstemp makes it private; the bundle is meant to be handed around

        files.atomic_write(out, write)
    return out


def verify_bundle(archive: Path) -> dict:
    """Check every file in the archive against the manifest (SHA-256, size, nothing extra or missing).

    Returns the manifest; raises BundleError listing every problem found.
    """
    try:  # the one reader of a bundle's manifest: the library's, which installs models from a bundle
        manifest = release.bundle_manifest(archive)
    except release.ReleaseError as exc:
        raise BundleError(str(exc)) from exc
    expected = manifest["files"]
    problems = []
    seen = set()
    with zipfile.ZipFile(archive) as zf:
        for info in zf.infolist():
            if info.is_dir():
                continue
            name = info.filename.removeprefix(f"{TOP}/")
            if name == MANIFEST:
                continue
            seen.add(name)
            if name not in expected:
                problems.append(f"{name}: not in the manifest")
                continue
            with zf.open(info) as f:
                digest = sha256_file(f)
            if digest != expected[name]["sha256"] or info.file_size != expected[name]["bytes"]:
                problems.append(f"{name}: content does not match its SHA-256 in the manifest")
    problems += [
        f"{name}: in the manifest but missing from the archive" for name in expected if name not in seen
    ]
    if problems:
        raise BundleError(
            f"{archive} does not match its manifest ({len(problems)} problems):\n  - "
            + "\n  - ".join(problems)
            + "\nCopy the archive again, or make a new one with `python -m course_lib bundle`."
        )
    return manifest
