"""Shared fixtures. Tests that need the prepared models use the real course data directory
(`make test` runs `python -m course_lib prepare` first); tests that break things get a private
data directory under tmp_path."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

import course_lib.data as data

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def private_data_dir(tmp_path, monkeypatch):
    """An empty course data directory for this test alone, and no published release to download
    (tests that download start their own server and release)."""
    import course_lib.release as release

    d = tmp_path / "course-data"
    d.mkdir()
    monkeypatch.setenv(data.DATA_DIR_ENV, str(d))
    monkeypatch.setattr(release, "RELEASE_FILE", tmp_path / "no-release.json")
    for name in (release.URL_ENV, release.ARCHIVE_ENV):
        monkeypatch.delenv(name, raising=False)
    data._load_cached.cache_clear()
    yield d
    data._load_cached.cache_clear()


@pytest.fixture
def fashion_copy(private_data_dir):
    """The real, verified Fashion-MNIST files copied (decompressed) into the private data dir."""
    source = data.find_fashion_mnist(download=False)
    target = private_data_dir / "fashion-mnist"
    target.mkdir()
    for stem, _, _ in data.FASHION_FILES.values():
        src = data.idx_file(source.directory, stem)
        if src.suffix == ".gz":
            with gzip.open(src, "rb") as f, open(target / stem, "wb") as g:
                shutil.copyfileobj(f, g)
        else:
            shutil.copy(src, target / stem)
    return target
