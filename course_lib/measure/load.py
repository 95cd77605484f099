"""How busy the rest of the machine was while we timed something.

A timing that needs free cores (a lone session's spinning threads, say) means little when another
process used those cores at the same moment. `other_load()` measures that share from the
operating system's own counters: the machine's busy CPU time (psutil.cpu_times) minus this
process's own (psutil.Process().cpu_times), over the time spent inside the `with` block.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import psutil

BUSY_SHARE = 0.1  # above this share of the machine's CPU time, other processes disturb a timing


@dataclass
class OtherLoad:
    """The share of the machine's CPU time (0 to 1, all logical CPUs) that other processes used."""

    share: float = 0.0
    seconds: float = 0.0

    @property
    def busy(self) -> bool:
        """Whether other processes used more than BUSY_SHARE of the machine meanwhile."""
        return self.share > BUSY_SHARE

    def describe(self) -> str:
        """E.g. 'other processes used 3% of the CPU time over 2.1 s'."""
        return f"other processes used {self.share:.0%} of the CPU time over {self.seconds:.1f} s"


def _busy_seconds(times) -> float:
    idle = getattr(times, "idle", 0.0) + getattr(times, "iowait", 0.0)
    return sum(times) - idle - getattr(times, "guest", 0.0) - getattr(times, "guest_nice", 0.0)


def _own_seconds(times) -> float:
    return times.user + times.system


def _other_load_between(
    machine_before, machine_after, own_before, own_after, seconds: float, cpus: int
) -> OtherLoad:
    """The share other processes used, from two readings of the machine's and this process's CPU
    times `seconds` apart (a pure function, so the arithmetic can be tested on recorded readings)."""
    if seconds <= 0 or cpus <= 0:
        return OtherLoad(0.0, max(seconds, 0.0))
    machine = _busy_seconds(machine_after) - _busy_seconds(machine_before)
    own = _own_seconds(own_after) - _own_seconds(own_before)
    share = (machine - own) / (seconds * cpus)
    return OtherLoad(min(max(share, 0.0), 1.0), seconds)


@contextmanager
def other_load() -> Iterator[OtherLoad]:
    """Measure what other processes used of the CPU while the block ran; read `.share` or `.busy`
    after it ends:

        with measure.other_load() as load:
            lat = measure.measure_latency(...)
        print(load.describe())
    """
    result = OtherLoad()
    me = psutil.Process()
    cpus = psutil.cpu_count() or 1
    machine_before, own_before, start = psutil.cpu_times(), me.cpu_times(), time.perf_counter()
    try:
        yield result
    finally:
        seconds = time.perf_counter() - start
        measured = _other_load_between(
            machine_before, psutil.cpu_times(), own_before, me.cpu_times(), seconds, cpus
        )
        result.share, result.seconds = measured.share, measured.seconds
