"""measure.other_load: the share of the CPU other processes used while something was timed."""

import subprocess
import sys
import time
from collections import namedtuple

import psutil

from course_lib import measure
from course_lib.measure.load import _other_load_between

# The fields psutil reports on Linux and on Windows (macOS has Linux's first four).
LinuxTimes = namedtuple("LinuxTimes", "user nice system idle iowait irq softirq steal guest guest_nice")
WindowsTimes = namedtuple("WindowsTimes", "user system idle interrupt dpc")
Own = namedtuple("Own", "user system children_user children_system")


def test_the_share_leaves_out_this_process_and_idle_time():
    # 10 s on 2 CPUs: the machine was busy 8 s (user 5, system 2, irq 1); 3 of them were ours.
    before = LinuxTimes(100, 0, 50, 1000, 5, 1, 1, 0, 0, 0)
    after = LinuxTimes(105, 0, 52, 1011, 6, 2, 1, 0, 0, 0)
    load = _other_load_between(before, after, Own(1, 1, 0, 0), Own(3, 2, 0, 0), seconds=10, cpus=2)
    assert abs(load.share - 0.25) < 1e-9 and load.busy
    assert "25%" in load.describe() and "10.0 s" in load.describe()


def test_guest_time_is_not_counted_twice_and_windows_fields_work():
    # Linux counts guest time inside user time as well; psutil reports both.
    before = LinuxTimes(0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    after = LinuxTimes(4, 0, 0, 16, 0, 0, 0, 0, 4, 0)
    assert _other_load_between(before, after, Own(0, 0, 0, 0), Own(0, 0, 0, 0), 10, 2).share == 0.2
    w_before, w_after = WindowsTimes(0, 0, 0, 0, 0), WindowsTimes(1, 0.5, 18, 0.5, 0)
    quiet = _other_load_between(w_before, w_after, Own(0, 0, 0, 0), Own(1, 0, 0, 0), 10, 2)
    assert quiet.share == 0.05 and not quiet.busy


def test_readings_that_cannot_be_divided_give_no_load():
    t = LinuxTimes(*[0] * 10)
    assert _other_load_between(t, t, Own(0, 0, 0, 0), Own(0, 0, 0, 0), 0, 2).share == 0.0


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_a_busy_neighbour_is_seen_and_our_own_work_is_not():
    cpus = psutil.cpu_count() or 1
    with measure.other_load() as ours:
        _spin(1.0)
    busy = [sys.executable, "-c", "import time\nt=time.perf_counter()+1.5\nwhile time.perf_counter()<t: pass"]
    with measure.other_load() as theirs:
        neighbour = subprocess.Popen(busy)
        neighbour.wait()
    # The neighbour kept one CPU busy the whole time: about 1/cpus of the machine.
    assert theirs.share > 0.6 / cpus, theirs.describe()
    assert ours.share < theirs.share, (ours.describe(), theirs.describe())
