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
    import course_machinery.release as release

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


# --------------------------------------------------------------------------------------------
# A skipped browser test must be impossible to miss: a banner at the very end of the run.
# --------------------------------------------------------------------------------------------
_skipped_browser: list[tuple[str, str]] = []


def pytest_runtest_logreport(report):
    if report.skipped and "browser" in report.keywords:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        _skipped_browser.append((report.nodeid, reason.removeprefix("Skipped: ")))


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter):
    if not _skipped_browser:
        return
    reasons = sorted({reason for _, reason in _skipped_browser})
    terminalreporter.section(f"{len(_skipped_browser)} BROWSER TESTS SKIPPED", sep="!", red=True, bold=True)
    terminalreporter.write_line(
        "The widgets and pages in a real browser were NOT tested in this run.", red=True, bold=True
    )
    for reason in reasons:
        terminalreporter.write_line(f"  reason: {reason}", red=True)
    terminalreporter.write_line(
        "  `make test` installs Chromium where it can (root on Debian/Ubuntu).", red=True
    )
