"""Memory: the peak resident memory a model (or any call) costs, measured in a fresh process.

    peak_memory      of creating a session for an ONNX file and running it (`Memory`)
    peak_memory_of   of one picklable call, e.g. `quantize_static` while it calibrates (`CallMemory`)

A fresh process, because a notebook's own peak, and memory Python keeps after freeing it, would
hide what the model costs.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .sessions import Feed, MakeInputs, _feed_for, physical_cores

# Runs in a fresh interpreter: only numpy and onnxruntime are imported, so the baseline is small
# and nothing the notebook allocated earlier counts. Prints one JSON line. Nothing here imports
# resource (absent on Windows) unless the platform has it.
_MEMORY_HELPERS = r"""
import sys

def peak_bytes(platform, vmhwm_kib=None, memory_info=None, ru_maxrss=None):
    # The peak resident memory in bytes, from what this platform counts:
    # Linux: VmHWM of /proc/self/status, in KiB. It belongs to this process image; ru_maxrss does
    #   not: after fork + exec it starts from the parent's peak, the notebook's.
    # Windows: psutil's peak working set, in bytes (PeakWorkingSetSize: peak_wset, peak_rss from psutil 8).
    # macOS and the BSDs: ru_maxrss of getrusage, in bytes on macOS, in KiB elsewhere.
    if vmhwm_kib is not None:
        return int(vmhwm_kib) * 1024
    if memory_info is not None:
        fields = getattr(memory_info, "_fields", ())
        name = next((n for n in ("peak_rss", "peak_wset") if n in fields), "rss")
        return int(getattr(memory_info, name))
    if ru_maxrss is not None:
        return int(ru_maxrss) if platform == "darwin" else int(ru_maxrss) * 1024
    raise ValueError("peak_bytes needs one of vmhwm_kib, memory_info or ru_maxrss")

def high_water_bytes():  # peak resident memory of this process so far, in bytes
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return peak_bytes(sys.platform, vmhwm_kib=line.split()[1])
    except OSError:
        pass
    if sys.platform == "win32":  # no getrusage on Windows
        import psutil
        return peak_bytes(sys.platform, memory_info=psutil.Process().memory_info())
    import resource
    return peak_bytes(sys.platform, ru_maxrss=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)

def reset_high_water():  # Linux: restart the peak from the current size (imports' transients don't count)
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass

"""

_MEMORY_CHILD = (
    "import json, sys\nimport numpy as np\nimport onnxruntime as ort\n"
    + _MEMORY_HELPERS
    + r"""
model, inputs, threads, runs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
with np.load(inputs) as archive:
    feed = {name: archive[name] for name in archive.files}
reset_high_water()
baseline = high_water_bytes()
options = ort.SessionOptions()
options.intra_op_num_threads = threads
options.inter_op_num_threads = 1
session = ort.InferenceSession(model, sess_options=options, providers=["CPUExecutionProvider"])
after_load = high_water_bytes()
for _ in range(runs):
    session.run(None, feed)
print(json.dumps({"baseline": baseline, "after_load": after_load, "peak": high_water_bytes()}))
"""
)


@dataclass
class Memory:
    """Peak resident memory (bytes) of loading and running one model in a fresh process.

    `baseline_bytes`: resident size after importing numpy and onnxruntime and loading the inputs;
    `after_load_bytes`: after creating the session; `peak_bytes`: after the runs.
    `increase_bytes` = peak - baseline: what the model cost, to set beside `file_bytes`.
    """

    model: str
    batch_size: int
    threads: int
    file_bytes: int
    baseline_bytes: int
    after_load_bytes: int
    peak_bytes: int

    @property
    def load_increase_bytes(self) -> int:
        return self.after_load_bytes - self.baseline_bytes

    @property
    def increase_bytes(self) -> int:
        return self.peak_bytes - self.baseline_bytes

    def to_dict(self) -> dict:
        return {
            **asdict(self),
            "load_increase_bytes": self.load_increase_bytes,
            "increase_bytes": self.increase_bytes,
        }


def peak_memory(
    path: str | Path,
    make_inputs: Feed | MakeInputs,
    batch_size: int = 1,
    *,
    threads: int | None = None,
    runs: int = 1,
    timeout_s: float = 600,
) -> Memory:
    """Peak resident memory of creating a session for `path` and running it, in a fresh process.

    The child process (`sys.executable -c …`) imports only numpy and onnxruntime, loads the
    inputs (passed as an .npz file in a temporary directory), then reads the high-water mark of
    its resident set after the imports, after creating the session, and after `runs` runs.
    On Linux that mark is VmHWM from /proc/self/status, first reset to the current size (via
    /proc/self/clear_refs) so that transient allocations of the imports do not count; not
    `ru_maxrss`, which a child inherits from the parent's peak across fork + exec. Elsewhere:
    `ru_maxrss` (macOS, in bytes) or the peak working set (Windows, through psutil).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"peak_memory expects an ONNX file; found nothing at {path}. Check the path.")
    threads = physical_cores() if threads is None else threads
    feed = _feed_for(make_inputs, batch_size)
    with tempfile.TemporaryDirectory(prefix="peak-memory-") as tmp:
        npz = Path(tmp) / "inputs.npz"
        np.savez(npz, **feed)
        proc = subprocess.run(
            [sys.executable, "-c", _MEMORY_CHILD, str(path), str(npz), str(threads), str(runs)],
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    if proc.returncode != 0:
        raise RuntimeError(
            f"The memory-measuring subprocess for {path.name} failed (exit code {proc.returncode}); "
            f"its error output ends with:\n{proc.stderr[-2000:]}\n"
            "Check that the model runs with measure_latency(...) on the same inputs first."
        )
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    first = next(iter(feed.values()))
    return Memory(
        model=path.name,
        batch_size=int(np.asarray(first).shape[0]) if np.ndim(first) else 1,
        threads=threads,
        file_bytes=path.stat().st_size,
        baseline_bytes=found["baseline"],
        after_load_bytes=found["after_load"],
        peak_bytes=found["peak"],
    )


def _call_measured(fn: Callable[..., Any], args: tuple, kwargs: dict) -> tuple[Any, int, int, float]:
    """Runs in the child process of `peak_memory_of`."""
    probe: dict[str, Any] = {}
    exec(_MEMORY_HELPERS, probe)
    probe["reset_high_water"]()
    baseline = probe["high_water_bytes"]()
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, baseline, probe["high_water_bytes"](), time.perf_counter() - start


@dataclass
class CallMemory:
    """Peak resident memory (bytes) and wall time of one call, run in a fresh process."""

    what: str
    baseline_bytes: int  # resident size when the call started (imports and arguments loaded)
    peak_bytes: int
    seconds: float

    @property
    def increase_bytes(self) -> int:
        return self.peak_bytes - self.baseline_bytes

    def to_dict(self) -> dict:
        return {**asdict(self), "increase_bytes": self.increase_bytes}


def peak_memory_of(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, CallMemory]:
    """Call `fn(*args, **kwargs)` in a fresh (spawned) Python process; return its result and the
    peak memory the call added there, e.g. what `quantize_static` needs while it calibrates.

    A fresh process, because a notebook's own peak (and memory Python keeps after freeing it) would
    hide the call's. `fn`, the arguments and the result must be picklable: a module-level function
    such as `quantize_static`, paths, arrays, a `course_lib.calibration` reader.
    """
    import multiprocessing

    with multiprocessing.get_context("spawn").Pool(1) as pool:
        result, baseline, peak, seconds = pool.apply(_call_measured, (fn, args, kwargs))
    what = getattr(fn, "__qualname__", repr(fn))
    return result, CallMemory(what=what, baseline_bytes=baseline, peak_bytes=peak, seconds=seconds)
