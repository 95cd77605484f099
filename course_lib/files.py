"""Files the course writes and checks: a SHA-256 fingerprint, and writes that never leave half a file.

    sha256_file    the SHA-256 of a file's bytes (`hashlib.file_digest`), optionally copying them on
                   the way (a download, an archive member) so that what is hashed is what was written
    atomic_write   write through a temporary file, then rename it over the target

Imports nothing heavy (no torch, onnx or onnxruntime), so an ONNX-only process can hash a model
or write the results store without paying for PyTorch.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO


class _Tee(io.RawIOBase):
    """A readable stream that hands each block it reads to `copy_to` and `on_chunk` as well."""

    def __init__(
        self, source: IO[bytes], copy_to: IO[bytes] | None, on_chunk: Callable[[int], object] | None
    ):
        super().__init__()
        self._source, self._copy_to, self._on_chunk = source, copy_to, on_chunk

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = self._source.readinto(buffer) or 0
        if n:
            if self._copy_to is not None:
                self._copy_to.write(memoryview(buffer)[:n])
            if self._on_chunk is not None:
                self._on_chunk(n)
        return n


def sha256_file(
    source: str | os.PathLike | IO[bytes],
    copy_to: IO[bytes] | None = None,
    on_chunk: Callable[[int], object] | None = None,
) -> str:
    """The hex SHA-256 of a file (a path, or a binary stream read to its end): the same bytes give
    the same digest anywhere.

    `copy_to` receives every byte as it is hashed, and `on_chunk(n)` hears of each block (a progress
    bar, a size cap that raises), so one pass reads, copies and hashes a download or an archive member.
    """
    if isinstance(source, str | os.PathLike):
        with open(source, "rb") as f:
            return sha256_file(f, copy_to, on_chunk)
    if copy_to is not None or on_chunk is not None:
        source = _Tee(source, copy_to, on_chunk)
    return hashlib.file_digest(source, "sha256").hexdigest()


def _umask() -> int:
    """The process's umask (os.umask sets it, so it is set back at once)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


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
        # mkstemp makes the file private (0600); give it the mode a plain open() would, so that a
        # data directory shared in a workshop stays readable by the others
        os.chmod(tmp_path, path.stat().st_mode & 0o777 if path.exists() else 0o666 & ~_umask())
        with open(tmp_path, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp_path, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()
