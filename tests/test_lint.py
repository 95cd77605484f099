import subprocess
import sys

from conftest import ROOT


def test_ruff_is_clean():
    for args in (["check", "."], ["format", "--check", "."]):
        result = subprocess.run(
            [sys.executable, "-m", "ruff", *args], cwd=ROOT, capture_output=True, text=True
        )
        assert result.returncode == 0, result.stdout + result.stderr


def test_the_formatter_is_never_switched_off():
    """Code a learner reads (lessons, course_lib) and the tests stay as `ruff format` writes them: a
    comment that switches the formatter off hides a line too dense to read; split it into steps."""
    marker = "fmt: " + "skip"  # spelled apart so that this file does not match itself
    folders = ("notebooks/src", "course_lib", "course_machinery", "tests", "benchmarks")
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for folder in folders
        for path in sorted((ROOT / folder).rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if marker in line
    ]
    assert found == [], f"`# {marker}` in: {', '.join(found)}"
