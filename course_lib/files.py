"""Files the course writes and checks: a SHA-256 fingerprint, and writes that never leave half a file.

    sha256_file    the SHA-256 of a file's bytes, read in 1 MiB chunks (models are hundreds of MB)
    atomic_write   write through a temporary file, then rename it over the target

Imports nothing heavy (no torch, onnx or onnxruntime), so an ONNX-only process can hash a model
or write the results store without paying for PyTorch.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def sha256_file(path: str | Path) -> str:
    """The hex SHA-256 of the file at `path`: the same bytes give the same digest anywhere."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    """Write via a temporary file in the same directory, fsync, then rename over `path`.

    `write(tmp)` writes the whole content to the temporary path it is given. A reader sees either
    the old complete file or the new complete file, never half of one; if `write` fails, the old
    file stays as it was and the temporary file is removed.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        write(tmp_path)
        with open(tmp_path, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp_path, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()
