"""A skipped browser test is impossible to miss: the run ends with a banner naming the reason."""

from __future__ import annotations

import shutil
import subprocess
import sys

from conftest import ROOT


def _run(tmp_path, body: str) -> str:
    shutil.copy(ROOT / "tests" / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_demo.py").write_text("import pytest\n\n" + body)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "browser or not browser", "."],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout


def test_a_skipped_browser_test_gets_a_banner_with_its_reason(tmp_path):
    out = _run(
        tmp_path,
        "pytestmark = pytest.mark.browser\n\ndef test_page():\n    pytest.skip('no chromium here')\n",
    )
    assert "1 BROWSER TESTS SKIPPED" in out and "reason: no chromium here" in out


def test_no_banner_when_browser_tests_ran_or_other_tests_skipped(tmp_path):
    out = _run(tmp_path, "def test_other():\n    pytest.skip('unrelated')\n")
    assert "BROWSER TESTS SKIPPED" not in out
