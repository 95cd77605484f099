"""Release artifacts: the trained demo models as one archive that an installed course can verify.

A release is two files, published as the assets of a GitHub release (or on any web server):

- `course-models.tar`: `MANIFEST.json`, then `models/<name>/weights.pt`, `meta.json` and
  `<name>.onnx` for each demo model;
- `course-models.manifest.json`: the release's tag, each file's SHA-256 and size, and the
  archive's own SHA-256 and size.

`python -m course_lib release` (course_machinery/publish.py) writes both from the verified
cache, and writes the same manifest into the package as `course_lib/release.json`, which is
committed with the release: an installed course then knows exactly which bytes to accept. This
module is the other side: what a release is, its download (retried a few times when the
connection drops), and reading the model files out of a release archive or a workshop bundle,
each one checked against its SHA-256. A download is verified against release.json before anything
is kept, and refused, with nothing kept, when one byte differs. Installing what it reads into the
cache (with a parity check that needs PyTorch) is `course_machinery.models.pipeline`'s part; this module
imports only the torch-free `models.store`, never the rest of `models`.

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
import socket
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO

import course_lib
from course_lib.files import sha256_file

from .models import store
from .models.store import Origin

FORMAT = 1
ASSET = "course-models.tar"
MANIFEST_ASSET = "course-models.manifest.json"
INNER_MANIFEST = "MANIFEST.json"
# In the library's package, where pyproject.toml's package data ships it and the release workflow commits it.
RELEASE_FILE = Path(course_lib.__file__).with_name("release.json")
URL_ENV = "COURSE_RELEASE_URL"
ARCHIVE_ENV = "COURSE_RELEASE_ARCHIVE"
RELEASE_MODELS = ("moons_mlp", "fashion_resnet18")
TIMEOUT_SECONDS = 30  # per connection and per read, not for the whole file
# A dropped connection, a timeout or an overloaded server (HTTP 5xx, 429) is tried again, after
# 1 s, then 2 s: three attempts, at most 3 s of waiting in all. `sleep` is looked up when called,
# so that tests can replace it.
ATTEMPTS = 3
BACKOFF_SECONDS = 1.0
BACKOFF_CAP_SECONDS = 4.0
sleep = time.sleep
# A workshop bundle (.zip) holds one top folder, with its manifest in it and the models under data/models/.
BUNDLE_TOP = "onnx-quant-course"
BUNDLE_MANIFEST = "MANIFEST.json"


class ReleaseError(RuntimeError):
    """A release archive or download cannot be used; the message names what, why and the fix."""


# --------------------------------------------------------------------------------------------
# What a release is
# --------------------------------------------------------------------------------------------
def release_tag(names: Iterable[str] = RELEASE_MODELS) -> str:
    """The tag of a release of these models: it changes whenever a recipe, the data or the cache format does.

    So a course whose recipe changed never downloads weights trained with the old one.
    """
    payload = {
        "format": store.CACHE_FORMAT,
        "models": {name: store.RECIPES[name].digest() for name in sorted(names)},
        "data": [store.FINGERPRINTS[name]() for name in sorted(names)],
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


def alternatives(colab: bool | None = None) -> str:
    """What a learner can do instead of training here: one sentence for messages. On Colab (`colab`
    None: detected), first of all: keep the trained models on Google Drive for the next session."""
    import sys

    colab = "google.colab" in sys.modules if colab is None else colab
    drive = (
        "on Colab, tick KEEP_ON_DRIVE in a lesson's setup cell before you run it, and the course's data "
        "and trained models stay on your Google Drive, where every later lesson finds them (in a new "
        "runtime, tick it again; to train into your Drive now, stop this cell, tick it and run the cell "
        "again); "
        if colab
        else ""
    )
    return drive + (
        f"give a release archive or the workshop bundle (${ARCHIVE_ENV}=/path/to/{ASSET} or the bundle's "
        f".zip, or `python -m course_lib prepare --archive PATH`); go online for the release download "
        f"(or set ${URL_ENV} to a mirror on your network); or use a CUDA GPU (Colab: Runtime > Change "
        "runtime type), which training uses when PyTorch sees one."
    )


# --------------------------------------------------------------------------------------------
# Download: streamed, atomic, verified, retried when the connection fails
# --------------------------------------------------------------------------------------------
class _Transient(ReleaseError):
    """A failure that another attempt may not meet: a dropped connection, a timeout, HTTP 5xx/429."""


def _attempt(url: str, fd: int, size: int, label: str, progress: bool) -> str:
    """One download of `url` into the open file `fd`; its SHA-256. _Transient when worth retrying."""
    from tqdm.auto import tqdm

    request = urllib.request.Request(url, headers={"User-Agent": "onnx-quant-course"})
    got = 0
    try:
        with (
            os.fdopen(fd, "wb") as f,
            urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response,
            tqdm(total=size, unit="B", unit_scale=True, desc=label, disable=not progress) as bar,
        ):

            def counted(n: int) -> None:
                nonlocal got
                got += n
                if got > size:
                    raise ReleaseError(
                        f"The download from {url} is larger than the {size:,} bytes the release names; "
                        "refused, nothing was kept. The file on the server is not this release's."
                    )
                bar.update(n)

            digest = sha256_file(response, copy_to=f, on_chunk=counted)
            f.flush()
            os.fsync(f.fileno())
    except urllib.error.HTTPError as exc:
        exc.close()  # the error carries the open response
        answered = f"answered HTTP {exc.code} ({exc.reason})"
        if exc.code >= 500 or exc.code == 429:
            raise _Transient(answered) from exc
        raise ReleaseError(f"The release download {url} {answered}.") from exc
    except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc
        what = f"failed after {got:,} of {size:,} bytes" if got else "could not be reached"
        message = f"{what} ({type(exc).__name__}: {reason})"
        if isinstance(reason, socket.gaierror):  # no name resolution: offline, and another try will not help
            raise ReleaseError(f"The release download {url} {message}; nothing was kept.") from exc
        raise _Transient(message) from exc
    if got != size:
        raise _Transient(f"stopped after {got:,} of {size:,} bytes")
    return digest


def download(
    url: str,
    dest: Path,
    sha256: str,
    size: int,
    progress: bool = True,
    attempts: int = ATTEMPTS,
    log: Callable[[str], None] | None = None,
) -> Path:
    """Stream `url` to `dest`, checking its size and SHA-256; on any failure nothing is left at `dest`.

    The bytes go to a temporary file beside `dest`, which is renamed only after both checks pass.
    A dropped connection, a timeout or HTTP 5xx/429 is tried again, `attempts` times in all, after
    waits of 1 s, 2 s, … (capped); a 404, a file larger than the release's or another SHA-256 is not.
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    failures: list[str] = []
    for attempt in range(1, attempts + 1):
        fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
        tmp = Path(tmp_name)
        try:
            found = _attempt(url, fd, size, dest.name, progress)
            if found != sha256:
                raise ReleaseError(
                    f"Refused the download from {url}: its SHA-256 is {found}, but this course accepts only "
                    f"{sha256} (course_lib/release.json). Nothing was kept. A mirror serving another file, "
                    "or a corrupted copy: fix the server's file, or unset the mirror."
                )
            os.replace(tmp, dest)
            return dest
        except _Transient as exc:
            failures.append(f"attempt {attempt}: {exc}")
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
        if attempt < attempts:
            wait = min(BACKOFF_SECONDS * 2 ** (attempt - 1), BACKOFF_CAP_SECONDS)
            if log is not None:
                log(f"The release download {url}, {failures[-1]}; trying again in {wait:g} s.")
            sleep(wait)
    raise ReleaseError(
        f"The release download {url} failed {attempts} time{'s' if attempts != 1 else ''} "
        f"({'; '.join(failures)}); nothing was kept. Run it again later (a flaky connection), or download "
        f"the file by hand and give it with ${ARCHIVE_ENV}."
    )


# --------------------------------------------------------------------------------------------
# Reading an archive: a release .tar or a workshop bundle .zip
# --------------------------------------------------------------------------------------------
@dataclass
class _Archive:
    """The model files inside a release archive or a bundle, with the hashes they must have."""

    path: Path
    kind: str  # store.Origin value
    expected: dict[str, dict]  # "models/<name>/<file>" -> {"sha256", "bytes"}
    open: Callable[[str], IO[bytes]]


@contextlib.contextmanager
def _open_tar(path: Path, release: Release | None):
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


def open_tar(path: str | Path, release: Release | None = None):
    """A release archive (.tar), as a context manager over its model files."""
    return _open_tar(Path(path), release)


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
# Reading one model file out of an archive, verified
# --------------------------------------------------------------------------------------------
def extract_verified(archive: _Archive, arcname: str, dest: Path) -> None:
    """Copy one archive member to `dest`, refusing it unless its SHA-256 and size are the expected ones.

    On refusal `dest` may hold the refused bytes: it belongs in a staging folder the caller removes.
    """
    want = archive.expected.get(arcname)
    if want is None:
        raise ReleaseError(f"{archive.path} has no {arcname} in its manifest; it is not a complete release.")
    try:
        with archive.open(arcname) as src, open(dest, "wb") as out:
            found = sha256_file(src, copy_to=out)
    except KeyError as exc:
        raise ReleaseError(
            f"{archive.path} lacks {arcname}, which its manifest lists. Copy it again."
        ) from exc
    size = dest.stat().st_size
    if found != want["sha256"] or size != want["bytes"]:
        raise ReleaseError(
            f"Refused {arcname} in {archive.path}: SHA-256 {found} ({size:,} bytes), expected "
            f"{want['sha256']} ({want['bytes']:,} bytes). Nothing was kept; copy the archive again."
        )
