"""course_lib.measure.memory: the peak resident memory each platform counts, in bytes.

The helpers run in the measuring child process (as source text, so that the child imports only
numpy and onnxruntime); here they run in this one, with the platform's answers put in their place.
"""

from __future__ import annotations

import builtins
import sys
import types
from collections import namedtuple

import pytest

from course_lib.measure import memory

# psutil's Process().memory_info() on Windows, field names as psutil 7 documents them
# (https://github.com/giampaolo/psutil/issues/2736), and psutil 8's renamed peak field
# (peak_wset -> peak_rss, https://github.com/giampaolo/psutil/pull/2737).
WINDOWS_PMEM_7 = namedtuple(
    "pmem",
    "rss vms num_page_faults peak_wset wset peak_paged_pool paged_pool peak_nonpaged_pool nonpaged_pool "
    "pagefile peak_pagefile private",
)
WINDOWS_PMEM_8 = namedtuple("pmem", "rss vms num_page_faults peak_rss peak_vms")


@pytest.fixture
def helpers() -> dict:
    namespace: dict = {}
    exec(memory._MEMORY_HELPERS, namespace)
    return namespace


@pytest.fixture
def no_proc(monkeypatch):
    """No /proc file system, as on Windows and macOS."""
    real_open = builtins.open

    def opener(path, *args, **kwargs):
        if str(path).startswith("/proc/"):
            raise FileNotFoundError(path)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", opener)


def test_each_platform_counter_is_turned_into_bytes(helpers):
    peak = helpers["peak_bytes"]
    assert peak("linux", vmhwm_kib="1500") == 1500 * 1024  # /proc/self/status: VmHWM in kB
    assert peak("darwin", ru_maxrss=1_536_000) == 1_536_000  # macOS: ru_maxrss in bytes
    assert peak("freebsd14", ru_maxrss=1500) == 1500 * 1024  # the BSDs and Linux: in KiB
    win7 = WINDOWS_PMEM_7(50, 60, 7, 900, 50, 1, 1, 1, 1, 60, 80, 60)
    assert peak("win32", memory_info=win7) == 900  # the peak working set, not the current one (rss)
    assert peak("win32", memory_info=WINDOWS_PMEM_8(50, 60, 7, 800, 90)) == 800
    with pytest.raises(ValueError, match="needs one of"):
        peak("linux")


def test_windows_reads_the_peak_working_set_and_never_imports_resource(helpers, no_proc, monkeypatch):
    process = types.SimpleNamespace(
        memory_info=lambda: WINDOWS_PMEM_7(50, 60, 7, 4096, 50, 1, 1, 1, 1, 60, 80, 60)
    )
    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.setitem(sys.modules, "psutil", types.SimpleNamespace(Process=lambda: process))
    monkeypatch.setitem(sys.modules, "resource", None)  # importing it would fail, as on Windows
    helpers["reset_high_water"]()  # no /proc: nothing to reset, no error
    assert helpers["high_water_bytes"]() == 4096


def test_macos_reads_ru_maxrss_in_bytes(helpers, no_proc, monkeypatch):
    monkeypatch.setattr(sys, "platform", "darwin")
    usage = types.SimpleNamespace(ru_maxrss=123_456_789)
    fake = types.SimpleNamespace(RUSAGE_SELF=0, getrusage=lambda who: usage)
    monkeypatch.setitem(sys.modules, "resource", fake)
    assert helpers["high_water_bytes"]() == 123_456_789


def test_linux_reads_vmhwm_of_this_process(helpers):
    if not sys.platform.startswith("linux"):
        pytest.skip("reads this machine's /proc/self/status")
    with open("/proc/self/status") as status:
        hwm = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    assert helpers["high_water_bytes"]() >= hwm * 1024
