"""Release artifacts: the trained demo models as one archive that an installed course can verify.

A release is two files, published as the assets of a GitHub release (or on any web server):

- `course-models.tar`: `MANIFEST.json`, then `models/<name>/weights.pt`, `meta.json` and
  `<name>.onnx` for each demo model;
- `course-models.manifest.json`: the release's tag, each file's SHA-256 and size, and the
  archive's own SHA-256 and size.

`python -m course_lib release` (course_lib/tooling/release.py) writes both from the verified
cache, and writes the same manifest into the package as `course_lib/release.json`, which is
committed with the release: an installed course then knows exactly which bytes to accept. This
module is the other side, what `models.load_model` uses when the cache lacks a model: what a
release is, its download, and installing verified models from a release archive or a workshop
bundle. A download is verified against release.json before anything enters the cache, and
refused, with nothing kept, when one byte differs.

Where the archive is downloaded from: `<repository>/releases/download/<tag>/course-models.tar`,
the repository being the address in pyproject.toml (recorded in release.json). Setting
$COURSE_RELEASE_URL to a folder of a mirror or a workshop's own server makes it
`$COURSE_RELEASE_URL/course-models.tar`. A release archive or a workshop bundle on disk is
named with $COURSE_RELEASE_ARCHIVE (or `prepare --archive PATH`).
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import os
import shutil
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO

from .files import sha256_file

FORMAT = 1
ASSET = "course-models.tar"
MANIFEST_ASSET = "course-models.manifest.json"
INNER_MANIFEST = "MANIFEST.json"
RELEASE_FILE = Path(__file__).with_name("release.json")
URL_ENV = "COURSE_RELEASE_URL"
ARCHIVE_ENV = "COURSE_RELEASE_ARCHIVE"
RELEASE_MODELS = ("moons_mlp", "fashion_resnet18")
TIMEOUT_SECONDS = 30
CHUNK = 1 << 20
# A workshop bundle (.zip) holds one top folder, with its manifest in it and the models under data/models/.
BUNDLE_TOP = "onnx-quant-course"
BUNDLE_MANIFEST = "MANIFEST.json"


class ReleaseError(RuntimeError):
    """A release archive or download cannot be used; the message names what, why and the fix."""


def _sha256_stream(f: IO[bytes], out: IO[bytes] | None = None) -> tuple[str, int]:
    h, size = hashlib.sha256(), 0
    for chunk in iter(lambda: f.read(CHUNK), b""):
        h.update(chunk)
        size += len(chunk)
        if out is not None:
            out.write(chunk)
    return h.hexdigest(), size


# --------------------------------------------------------------------------------------------
# What a release is
# --------------------------------------------------------------------------------------------
def release_tag(names: Iterable[str] = RELEASE_MODELS) -> str:
    """The tag of a release of these models: it changes whenever a recipe, the data or the cache format does.

    So a course whose recipe changed never downloads weights trained with the old one.
    """
    from . import models

    payload = {
        "format": models.CACHE_FORMAT,
        "models": {name: models.MODELS[name].recipe.digest() for name in sorted(names)},
        "data": [models.MODELS[name].data_fingerprint() for name in sorted(names)],
    }
    return "models-" + hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Release:
    """One published release: where its archive lives and the SHA-256 of every byte in it."""

    tag: str
    repository: str
    sha256: str
    bytes: int
    files: dict[str, dict]  # archive path -> {"sha256": …, "bytes": …}
    models: dict[str, dict]  # model name -> recipe digest, test accuracy, where it was trained
    asset: str = ASSET
    format: int = FORMAT

    def url(self) -> str:
        """$COURSE_RELEASE_URL/<asset> when set, else the GitHub release download address."""
        mirror = os.environ.get(URL_ENV, "").strip()
        if mirror:
            return f"{mirror.rstrip('/')}/{self.asset}"
        return f"{self.repository.rstrip('/')}/releases/download/{self.tag}/{self.asset}"

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict, where: str) -> Release:
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            found = d.get("format") if isinstance(d, dict) else type(d).__name__
            raise ReleaseError(
                f"{where}: expected a release manifest of format {FORMAT}, found {found!r}. "
                "Write it again with `python -m course_lib release`."
            )
        try:
            return cls(
                **{k: d[k] for k in ("tag", "repository", "sha256", "bytes", "files", "models", "asset")}
            )
        except KeyError as exc:
            raise ReleaseError(
                f"{where}: the release manifest lacks {exc}. Write it again with `python -m course_lib release`."
            ) from exc


def published(path: Path | None = None) -> Release | None:
    """The release this installed course accepts (course_lib/release.json), or None if none is published."""
    path = Path(path or RELEASE_FILE)
    if not path.exists():
        return None
    try:
        d = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ReleaseError(f"{path} is not readable JSON ({exc}); restore it from the repository.") from exc
    return Release.from_dict(d, str(path))


def alternatives() -> str:
    """What a learner can do instead of training here: one sentence for messages."""
    return (
        f"give a release archive or the workshop bundle (${ARCHIVE_ENV}=/path/to/{ASSET} or the bundle's "
        f".zip, or `python -m course_lib prepare --archive PATH`); go online for the release download "
        f"(or set ${URL_ENV} to a mirror on your network); or use a CUDA GPU (Colab: Runtime > Change "
        "runtime type), which training uses when PyTorch sees one."
    )


# --------------------------------------------------------------------------------------------
# Download: streamed, atomic, verified
# --------------------------------------------------------------------------------------------
def download(url: str, dest: Path, sha256: str, size: int, progress: bool = True) -> Path:
    """Stream `url` to `dest`, checking its size and SHA-256; on any failure nothing is left at `dest`.

    The bytes go to a temporary file beside `dest`, which is renamed only after both checks pass.
    """
    from tqdm.auto import tqdm

    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
    tmp = Path(tmp_name)
    request = urllib.request.Request(url, headers={"User-Agent": "onnx-quant-course"})
    h, got = hashlib.sha256(), 0
    try:
        with (
            os.fdopen(fd, "wb") as f,
            urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response,
            tqdm(total=size, unit="B", unit_scale=True, desc=dest.name, disable=not progress) as bar,
        ):
            for chunk in iter(lambda: response.read(CHUNK), b""):
                got += len(chunk)
                if got > size:
                    raise ReleaseError(
                        f"The download from {url} is larger than the {size:,} bytes the release names; "
                        "refused, nothing was kept. The file on the server is not this release's."
                    )
                f.write(chunk)
                h.update(chunk)
                bar.update(len(chunk))
            f.flush()
            os.fsync(f.fileno())
        if got != size:
            raise ReleaseError(
                f"The download from {url} stopped after {got:,} of {size:,} bytes; nothing was kept. "
                "Run it again (a flaky connection), or download the file by hand and give it with "
                f"${ARCHIVE_ENV}."
            )
        found = h.hexdigest()
        if found != sha256:
            raise ReleaseError(
                f"Refused the download from {url}: its SHA-256 is {found}, but this course accepts only "
                f"{sha256} (course_lib/release.json). Nothing was kept. A mirror serving another file, "
                "or a corrupted copy: fix the server's file, or unset the mirror."
            )
        os.replace(tmp, dest)
    except urllib.error.HTTPError as exc:
        raise ReleaseError(f"The release download {url} answered HTTP {exc.code} ({exc.reason}).") from exc
    except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc
        what = f"failed after {got:,} of {size:,} bytes" if got else "could not be reached"
        raise ReleaseError(
            f"The release download {url} {what} ({type(exc).__name__}: {reason}); nothing was kept."
        ) from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    return dest


# --------------------------------------------------------------------------------------------
# Reading an archive: a release .tar or a workshop bundle .zip
# --------------------------------------------------------------------------------------------
@dataclass
class _Archive:
    """The model files inside a release archive or a bundle, with the hashes they must have."""

    path: Path
    kind: str  # models.Origin value
    expected: dict[str, dict]  # "models/<name>/<file>" -> {"sha256", "bytes"}
    open: Callable[[str], IO[bytes]]


@contextlib.contextmanager
def _open_tar(path: Path, release: Release | None):
    from .models import Origin

    with contextlib.ExitStack() as stack:
        try:
            tf = stack.enter_context(tarfile.open(path, "r:"))
        except (OSError, tarfile.TarError) as exc:
            raise ReleaseError(
                f"{path} is not a course release archive ({type(exc).__name__}: {exc}): expected a .tar "
                f"with {INNER_MANIFEST} first, as `python -m course_lib release` writes. Copy it again."
            ) from exc
        try:
            inner = json.load(tf.extractfile(INNER_MANIFEST))
        except (OSError, tarfile.TarError, KeyError, TypeError, json.JSONDecodeError) as exc:
            raise ReleaseError(
                f"{path} has no readable {INNER_MANIFEST} ({type(exc).__name__}: {exc}), so it is not a "
                "release archive written by `python -m course_lib release`. Copy it again."
            ) from exc
        expected = inner.get("files", {})
        if release is not None and inner.get("tag") == release.tag and expected != release.files:
            raise ReleaseError(
                f"{path} says it is release {release.tag}, but its file hashes differ from the ones this "
                "course accepts (course_lib/release.json). Copy the archive again from the release."
            )

        def open_member(name: str) -> IO[bytes]:
            member = tf.extractfile(name)
            if member is None:
                raise KeyError(name)
            return member

        yield _Archive(path, str(Origin.ARCHIVE), expected, open_member)


def bundle_manifest(archive: Path) -> dict:
    """The manifest of a workshop bundle (`python -m course_lib bundle`), without unpacking anything else."""
    try:
        with zipfile.ZipFile(archive) as zf:
            return json.loads(zf.read(f"{BUNDLE_TOP}/{BUNDLE_MANIFEST}"))
    except (OSError, KeyError, zipfile.BadZipFile, json.JSONDecodeError) as exc:
        raise ReleaseError(
            f"{archive} is not a readable course bundle ({type(exc).__name__}: {exc}). "
            f"Copy it again, or make a new one with `python -m course_lib bundle`."
        ) from exc


@contextlib.contextmanager
def _open_bundle(path: Path):
    from .models import Origin

    try:
        manifest = bundle_manifest(path)
    except ReleaseError as exc:
        raise ReleaseError(f"{path} is a .zip but not a readable workshop bundle: {exc}") from exc
    prefix = "data/models/"
    expected = {
        "models/" + name.removeprefix(prefix): info
        for name, info in manifest.get("files", {}).items()
        if name.startswith(prefix)
    }
    with zipfile.ZipFile(path) as zf:
        yield _Archive(path, str(Origin.BUNDLE), expected, lambda name: zf.open(f"{BUNDLE_TOP}/data/{name}"))


def open_archive(path: str | Path, release: Release | None = None):
    """A release archive (.tar) or a workshop bundle (.zip), as a context manager over its model files."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise ReleaseError(
            f"No release archive at {path}. Expected the {ASSET} of a release or a workshop bundle's .zip; "
            f"check the path given with ${ARCHIVE_ENV} or --archive."
        )
    with open(path, "rb") as f:
        is_zip = (
            f.read(4) == b"PK\x03\x04"
        )  # not zipfile.is_zipfile: a tar whose last member is a zip passes it
    return _open_bundle(path) if is_zip else _open_tar(path, release)


# --------------------------------------------------------------------------------------------
# Installing verified models into the cache
# --------------------------------------------------------------------------------------------
def _stage(archive: _Archive, arcname: str, dest: Path) -> None:
    """Copy one archive member to `dest`, refusing it unless its SHA-256 is the expected one."""
    want = archive.expected.get(arcname)
    if want is None:
        raise ReleaseError(f"{archive.path} has no {arcname} in its manifest; it is not a complete release.")
    try:
        with archive.open(arcname) as src, open(dest, "wb") as out:
            found, size = _sha256_stream(src, out)
    except KeyError as exc:
        raise ReleaseError(
            f"{archive.path} lacks {arcname}, which its manifest lists. Copy it again."
        ) from exc
    if found != want["sha256"] or size != want["bytes"]:
        raise ReleaseError(
            f"Refused {arcname} in {archive.path}: SHA-256 {found} ({size:,} bytes), expected "
            f"{want['sha256']} ({want['bytes']:,} bytes). Nothing was kept; copy the archive again."
        )


def _install_one(archive: _Archive, name: str, staging: Path, source: dict) -> None:
    """Stage, verify (hashes, recipe, ONNX parity) and move one model into the cache."""
    from . import models

    stage = staging / name
    stage.mkdir()
    files = models.model_files(name)
    for path in files.values():
        _stage(archive, f"models/{name}/{path.name}", stage / path.name)
    try:
        trained = models._load_verified(name, stage)
    except models.CacheProblem as exc:
        raise ReleaseError(f"The {name} in {archive.path} cannot be used here: {exc}.") from exc
    meta = trained.meta
    onnx_file = stage / files["onnx"].name
    if meta.get("onnx", {}).get("sha256") != sha256_file(onnx_file):
        raise ReleaseError(f"The {name} in {archive.path}: its ONNX file is not the one its metadata names.")
    diff = models.onnx_parity(trained, onnx_file, models.parity_inputs(name))
    if diff > models.PARITY_ATOL:
        raise ReleaseError(
            f"The {name} in {archive.path}: ONNX Runtime and PyTorch disagree here by {diff:.2e} "
            f"(> {models.PARITY_ATOL:.0e}); not installed."
        )
    meta["source"] = {
        **source,
        "parity_max_abs_diff": diff,
        "installed_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "trained_on": meta.get("device"),
    }
    (stage / "meta.json").write_text(json.dumps(meta, indent=2))
    # The metadata names the other files' hashes, so it goes last: an interruption in between leaves
    # an entry whose hashes do not match, which the next read rebuilds.
    target = models.cache_dir(name)
    target.mkdir(parents=True, exist_ok=True)
    for role in ("weights", "onnx", "meta"):
        os.replace(stage / files[role].name, files[role])


def install_archive(
    archive: _Archive, names: Iterable[str], source: dict, log: Callable[[str], None] = print
) -> list[str]:
    """Install the named models from an open archive; returns those installed, logs those refused."""
    from . import data

    installed = []
    models_dir = data.data_dir() / "models"
    models_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".incoming-", dir=models_dir))
    try:
        for name in names:
            try:
                _install_one(archive, name, staging, source)
            except ReleaseError as exc:
                log(str(exc))
            else:
                installed.append(name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return installed


@dataclass
class Fetched:
    """What `fetch` installed (name -> where it came from) and why the rest could not be had."""

    installed: dict = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)


def _not_valid(names: Iterable[str]) -> list[str]:
    from . import models

    return [name for name in names if models.cache_status(name) != "ok"]


def fetch(
    names: Iterable[str],
    log: Callable[[str], None] = print,
    progress: bool = True,
    archive: str | Path | None = None,
    release: Release | None = None,
) -> Fetched:
    """Get verified models from a local archive, else from the release download; never trains.

    Everything the archive or release holds that the cache lacks is installed, not only `names`,
    so one download serves every model.
    """
    from .models import Origin

    result = Fetched()
    wanted = list(names)
    try:
        release = release or published()
    except ReleaseError as exc:
        log(str(exc))
        result.reasons.append(str(exc))
        release = None
    archive = archive or os.environ.get(ARCHIVE_ENV) or None
    if archive:
        log(f"Installing the trained models from the archive {archive} …")
        try:
            with open_archive(archive, release) as opened:
                source = {"kind": opened.kind, "path": str(Path(archive).expanduser().resolve())}
                present = sorted({p.split("/")[1] for p in opened.expected} & set(RELEASE_MODELS))
                for name in install_archive(opened, _not_valid(present), source, log):
                    result.installed[name] = Origin(opened.kind)
        except ReleaseError as exc:
            log(str(exc))
            result.reasons.append(str(exc))
        else:
            for name in wanted:
                if name not in result.installed:
                    result.reasons.append(f"the archive {archive} had no usable {name}")
    wanted = [name for name in wanted if name not in result.installed]
    if not wanted:
        return result
    if release is None:
        result.reasons.append(
            "no release is published for this version of the course (no course_lib/release.json)"
        )
        return result
    tag = release_tag(release.models)
    if release.tag != tag:
        result.reasons.append(
            f"the published release {release.tag} was made with other recipes or data than this course's "
            f"({tag}); its weights would not be this course's models"
        )
        return result
    if not any(name in release.models for name in wanted):
        result.reasons.append(f"the published release {release.tag} has no {', '.join(wanted)}")
        return result
    url = release.url()
    from . import data

    log(f"Downloading the trained models: {url} ({release.bytes / 1e6:.1f} MB, release {release.tag}) …")
    path = data.data_dir() / "downloads" / release.asset
    try:
        download(url, path, release.sha256, release.bytes, progress=progress)
    except ReleaseError as exc:
        log(str(exc))
        result.reasons.append(str(exc))
        with contextlib.suppress(OSError):
            path.parent.rmdir()
        return result
    try:
        with _open_tar(path, release) as opened:
            source = {"kind": str(Origin.DOWNLOAD), "url": url, "sha256": release.sha256, "tag": release.tag}
            for name in install_archive(opened, _not_valid(release.models), source, log):
                result.installed[name] = Origin.DOWNLOAD
    except ReleaseError as exc:
        log(str(exc))
        result.reasons.append(str(exc))
    finally:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # verified and installed (or refused): the archive itself is not kept
        with contextlib.suppress(OSError):
            path.parent.rmdir()  # downloads/, when nothing else is in it
    for name in wanted:
        if name not in result.installed:
            result.reasons.append(f"the release download had no usable {name}")
    return result
