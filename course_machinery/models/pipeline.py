"""Getting a verified demo model: one pipeline, in one place, each step saying what it does.

    1. cache     <data dir>/models/<name>/, verified by SHA-256, recipe and data  (models.store)
    2. archive   a release archive or workshop bundle on disk, if one is given
                 (`archive=`, `prepare --archive PATH`, or $COURSE_RELEASE_ARCHIVE)  (course_machinery.release)
    3. download  the release named in course_lib/release.json, or $COURSE_RELEASE_URL's mirror
                 (course_machinery.release)
    4. training  here, after a short timed run that says how long it will take  (models.estimate,
                 models.training)

Whatever comes from 2 or 3 is checked file by file against its SHA-256 (`release`), then loaded
and parity-checked against ONNX Runtime (here) before it enters the cache. `ensure_model` adds the
model's verified ONNX export. `models.get(name)` uses it when the cache does not verify.

It imports `store` and `release` (both torch-free) at the top, and the modules that need PyTorch
(`registry`, `export`, `estimate`) only inside the functions that use them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from course_lib import data as _data
from course_lib.files import sha256_file
from course_machinery import release

from ..release import Release, ReleaseError
from . import store
from .store import CacheProblem, Origin, write_meta

if TYPE_CHECKING:
    from .registry import TrainedModel


# --------------------------------------------------------------------------------------------
# Steps 2 and 3: a local archive, else the release download; installed only when verified
# --------------------------------------------------------------------------------------------
@dataclass
class Fetched:
    """What `fetch` installed (name -> where it came from) and why the rest could not be had."""

    installed: dict[str, Origin] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)


def _install_one(archive, name: str, staging: Path, source: dict) -> None:
    """Stage, verify (hashes, recipe, ONNX parity) and move one model into the cache."""
    from .export import PARITY_ATOL, onnx_parity, parity_inputs
    from .registry import load_cached

    stage = staging / name
    stage.mkdir()
    files = store.model_files(name)
    for path in files.values():
        release.extract_verified(archive, f"models/{name}/{path.name}", stage / path.name)
    try:
        trained = load_cached(name, stage)
    except CacheProblem as exc:
        raise ReleaseError(f"The {name} in {archive.path} cannot be used here: {exc}.") from exc
    meta = trained.meta
    onnx_file = stage / files["onnx"].name
    if meta.get("onnx", {}).get("sha256") != sha256_file(onnx_file):
        raise ReleaseError(f"The {name} in {archive.path}: its ONNX file is not the one its metadata names.")
    diff = onnx_parity(trained.module, onnx_file, parity_inputs(name))
    if diff > PARITY_ATOL:
        raise ReleaseError(
            f"The {name} in {archive.path}: ONNX Runtime and PyTorch disagree here by {diff:.2e} "
            f"(> {PARITY_ATOL:.0e}); not installed."
        )
    meta["source"] = {
        **source,
        "parity_max_abs_diff": diff,
        "installed_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "trained_on": meta.get("device"),
    }
    write_meta(stage / "meta.json", meta)
    # The metadata names the other files' hashes, so it goes last: an interruption in between leaves
    # an entry whose hashes do not match, which the next read rebuilds.
    store.cache_dir(name).mkdir(parents=True, exist_ok=True)
    for role in ("weights", "onnx", "meta"):
        os.replace(stage / files[role].name, files[role])


def _install_archive(
    archive, names: Iterable[str], source: dict, log: Callable[[str], None] = print
) -> list[str]:
    """Install the named models from an open archive (`release.open_archive`); returns those
    installed, logs those refused. Nothing half-installed is left: staging happens in a folder
    beside the cache that is removed afterwards."""
    installed = []
    models_dir = _data.data_dir() / "models"
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


def _not_valid(names: Iterable[str]) -> list[str]:
    from .registry import cache_status

    return [name for name in names if cache_status(name) != "ok"]


def fetch(
    names: Iterable[str],
    log: Callable[[str], None] = print,
    progress: bool = True,
    archive: str | Path | None = None,
    published: Release | None = None,
    only: bool = False,
) -> Fetched:
    """Steps 2 and 3: verified models from a local archive, else from the release download; never trains.

    Everything the archive or release holds that the cache lacks is installed, not only `names`,
    so one download serves every model; with `only`, `names` alone (a Colab lesson's setup, which
    gets the models its lesson uses and checks no other).
    """
    result = Fetched()
    wanted = list(names)
    try:
        published = published or release.published()
    except ReleaseError as exc:
        log(str(exc))
        result.reasons.append(str(exc))
        published = None
    archive = archive or os.environ.get(release.ARCHIVE_ENV) or None
    if archive:
        log(f"Installing the trained models from the archive {archive} …")
        try:
            with release.open_archive(archive, published) as opened:
                source = {"kind": opened.kind, "path": str(Path(archive).expanduser().resolve())}
                present = sorted({p.split("/")[1] for p in opened.expected} & set(release.RELEASE_MODELS))
                present = [name for name in present if name in wanted] if only else present
                for name in _install_archive(opened, _not_valid(present), source, log):
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
    if published is None:
        result.reasons.append(
            "no release is published for this version of the course (no course_lib/release.json)"
        )
        return result
    tag = release.release_tag(published.models)
    if published.tag != tag:
        result.reasons.append(
            f"the published release {published.tag} was made with other recipes or data than this course's "
            f"({tag}); its weights would not be this course's models"
        )
        return result
    if not any(name in published.models for name in wanted):
        result.reasons.append(f"the published release {published.tag} has no {', '.join(wanted)}")
        return result
    url = published.url()
    log(f"Downloading the trained models: {url} ({published.bytes / 1e6:.1f} MB, release {published.tag}) …")
    path = _data.data_dir() / "downloads" / published.asset
    try:
        release.download(url, path, published.sha256, published.bytes, progress=progress, log=log)
    except ReleaseError as exc:
        log(str(exc))
        result.reasons.append(str(exc))
        with contextlib.suppress(OSError):
            path.parent.rmdir()
        return result
    try:
        with release.open_tar(path, published) as opened:
            source = {
                "kind": str(Origin.DOWNLOAD),
                "url": url,
                "sha256": published.sha256,
                "tag": published.tag,
            }
            offered = [name for name in published.models if name in wanted] if only else published.models
            for name in _install_archive(opened, _not_valid(offered), source, log):
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


# --------------------------------------------------------------------------------------------
# The whole pipeline
# --------------------------------------------------------------------------------------------
def load_model(
    name: str,
    train: bool = True,
    progress: bool = True,
    log: Callable[[str], None] = print,
    archive: str | Path | None = None,
    fetched: Fetched | None = None,
) -> TrainedModel:
    """A demo model, from the first step that has a verified copy (cache, archive, download, training).

    With train=False, training is skipped and the error lists what was tried and the fixes.
    `fetched`: what a `fetch` for several models at once already did (steps 2 and 3 are then not
    tried again, and a model it installed is reported as coming from where it came from).
    """
    from .estimate import estimate_training
    from .registry import MODELS, load_cached, train_and_cache

    try:
        model = load_cached(name)
    except CacheProblem as exc:
        problem = str(exc)
    else:
        if fetched is not None and name in fetched.installed:
            model.origin = fetched.installed[name]
        return model
    if problem != "not trained yet":
        log(f"The cached {name} cannot be used ({problem}); looking for another copy.")
    tried = fetched or fetch([name], log=log, progress=progress, archive=archive)
    if name in tried.installed:
        model = load_cached(name)
        model.origin = tried.installed[name]
        return model
    if not train:
        raise FileNotFoundError(
            f"The model {name!r} is not available: {problem}. Tried:\n  - "
            + "\n  - ".join(tried.reasons)
            + "\nRun `python -m course_lib prepare` (or `make run`) to get or train it."
        )
    estimate = estimate_training(name)
    log(
        f"Training {name} ({MODELS[name].description}) here: {estimate}."
        + (f"\n  (Not from a release: {'; '.join(tried.reasons)}.)" if tried.reasons else "")
        # a training of seconds (the two-moons MLP) needs no way around it
        + (f"\n  To skip training next time: {release.alternatives()}" if estimate.seconds >= 60 else "")
    )
    return train_and_cache(name, progress=progress, log=log)


def ensure_model(
    name: str,
    train: bool = True,
    progress: bool = True,
    log: Callable[[str], None] = print,
    archive: str | Path | None = None,
    fetched: Fetched | None = None,
) -> TrainedModel:
    """The verified model (`load_model`) and its verified ONNX export (`export.ensure_export`:
    exported and parity-checked again only when missing, changed or made by another exporter)."""
    from .export import ensure_export

    trained = load_model(name, train=train, progress=progress, log=log, archive=archive, fetched=fetched)
    return ensure_export(trained, log=log)


def ensure_models(
    names: Iterable[str] | None = None,
    progress: bool = True,
    log: Callable[[str], None] = print,
    archive: str | Path | None = None,
) -> dict[str, TrainedModel]:
    """`ensure_model` for several models (default: every demo model), with one look at the archive
    and the release for all that are missing, so that one download serves them all and each says
    where it came from."""
    names = tuple(store.RECIPES) if names is None else tuple(names)
    missing = _not_valid(names)
    fetched = fetch(missing, log=log, progress=progress, archive=archive) if missing else None
    return {
        name: ensure_model(name, progress=progress, log=log, archive=archive, fetched=fetched)
        for name in names
    }


def export_trained(name: str, path: str | Path, **options) -> Path:
    """Export the cached model `name` to `path` with `export.export_onnx`'s options.

    By name, and importing PyTorch only when called, so that a fresh process can do it
    (`measure.peak_memory_of(cl.export_trained, ...)`): a notebook that needs PyTorch for one
    export then never holds torch's memory itself.
    """
    from .export import export_onnx

    return export_onnx(load_model(name, train=False), Path(path), **options)
