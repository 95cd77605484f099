"""Writing a release: `python -m course_lib release`, the maintainers' side of course_machinery/release.py.

From the verified cache it writes the two files of a release (see course_machinery/release.py for what
they hold and how an installed course verifies and installs them):

- `course-models.tar`: `MANIFEST.json`, then `models/<name>/weights.pt`, `meta.json` and
  `<name>.onnx` for each demo model, with fixed modes, owners and times, so the same cache gives
  the same bytes;
- `course-models.manifest.json`: the release's tag, each file's SHA-256 and size, and the
  archive's own SHA-256 and size;

and the same manifest as `course_lib/release.json`, which is committed with the release.
"""

from __future__ import annotations

import io
import json
import tarfile
from collections.abc import Callable, Iterable
from pathlib import Path

from course_lib.files import atomic_write, sha256_file
from course_machinery.release import (
    ASSET,
    FORMAT,
    INNER_MANIFEST,
    MANIFEST_ASSET,
    RELEASE_FILE,
    RELEASE_MODELS,
    Release,
    ReleaseError,
    release_tag,
)


def _tar_member(
    tf: tarfile.TarFile, arcname: str, data: bytes | None = None, path: Path | None = None
) -> None:
    info = tarfile.TarInfo(arcname)
    info.size = len(data) if data is not None else path.stat().st_size
    info.mode, info.mtime, info.uid, info.gid, info.uname, info.gname = 0o644, 0, 0, 0, "", ""
    if data is not None:
        tf.addfile(info, io.BytesIO(data))
    else:
        with open(path, "rb") as f:
            tf.addfile(info, f)


def write_release(
    out: Path,
    names: Iterable[str] = RELEASE_MODELS,
    repository: str | None = None,
    package_file: Path | None = RELEASE_FILE,
    log: Callable[[str], None] = print,
) -> Release:
    """Write the release's two files into `out` from the verified cache (preparing what is missing),
    and its manifest into `package_file` (course_lib/release.json; None: not written)."""
    from course_machinery import models

    names = list(names)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if repository is None:
        from .launch import read_launch

        repository = read_launch().repository
    files: dict[str, dict] = {}
    summary: dict[str, dict] = {}
    sources: dict[str, Path] = {}
    for name in names:
        trained = models.ensure_model(name, log=log)
        for path in models.model_files(name).values():
            arcname = f"models/{name}/{path.name}"
            files[arcname] = {"sha256": sha256_file(path), "bytes": path.stat().st_size}
            sources[arcname] = path
        summary[name] = {
            "recipe_digest": models.MODELS[name].recipe.digest(),
            "test_accuracy": trained.test_accuracy,
            "trained_on": trained.meta.get("device"),
            "train_seconds": trained.meta.get("train_seconds"),
            "trained_at": trained.meta.get("trained_at"),
        }
    tag = release_tag(names)
    inner = json.dumps({"format": FORMAT, "tag": tag, "files": files}, indent=2, sort_keys=True).encode()

    def write_tar(tmp: Path) -> None:
        with tarfile.open(tmp, "w:", format=tarfile.PAX_FORMAT) as tf:
            _tar_member(tf, INNER_MANIFEST, data=inner)
            for arcname in sorted(sources):
                _tar_member(tf, arcname, path=sources[arcname])

    archive = out / ASSET
    atomic_write(archive, write_tar)
    for arcname, path in sources.items():  # nothing changed under us while the archive was written
        if sha256_file(path) != files[arcname]["sha256"]:
            archive.unlink()
            raise ReleaseError(f"{path} changed while the release was written; run it again.")
    release = Release(
        tag=tag,
        repository=repository,
        sha256=sha256_file(archive),
        bytes=archive.stat().st_size,
        files=files,
        models=summary,
    )
    text = json.dumps(release.to_dict(), indent=2, sort_keys=True) + "\n"
    atomic_write(out / MANIFEST_ASSET, lambda p: p.write_text(text))
    if package_file is not None:
        atomic_write(Path(package_file), lambda p: p.write_text(text))
    return release
