"""Execute the lesson notebooks headless, each in a fresh kernel, into build/.

Used by `python -m course_lib run` (and so by `make run`) and by the notebook tests.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

# Per-notebook wall-clock budget (seconds) once the models are cached. Generous on purpose:
# the budget is a safety net against a hung kernel, not a benchmark.
DEFAULT_TIMEOUT = 900


@dataclass
class NotebookRun:
    """The outcome of executing one notebook."""

    notebook: Path
    output: Path | None
    seconds: float
    error: str | None = None
    peak_memory_bytes: int | None = None  # the kernel and its child processes, together (see MemoryWatch)
    claims: dict[str, list[str]] | None = None  # claim lines printed by the run, by verdict (see claim_lines)

    @property
    def ok(self) -> bool:
        return self.error is None


@lru_cache(maxsize=1)
def _polling_kernel_manager():
    """A kernel manager whose client re-polls its sockets every POLL_S seconds.

    Seen here with ipykernel 6 and 7: nbclient waits for a cell's reply on the shell socket while
    it also waits on the iopub socket, and now and then the asyncio zmq poller misses the wake-up
    of the reply that has already arrived. The cell has finished, yet the run sits until the cell
    timeout expires (10 minutes for a 13-second notebook). Polling in short slices bounds that
    stall to one slice; the messages and their order are unchanged.
    """
    from jupyter_client.asynchronous.client import AsyncKernelClient
    from jupyter_client.channels import AsyncZMQSocketChannel
    from jupyter_client.manager import AsyncKernelManager
    from traitlets import Type

    POLL_S = 0.5

    class SlicedPollChannel(AsyncZMQSocketChannel):
        async def get_msg(self, timeout: float | None = None):
            deadline = None if timeout is None else time.monotonic() + timeout
            while True:
                left = POLL_S if deadline is None else min(POLL_S, max(0.0, deadline - time.monotonic()))
                if await self.socket.poll(int(left * 1000)):
                    return await self._recv()
                if deadline is not None and time.monotonic() >= deadline:
                    from queue import Empty

                    raise Empty

    class SlicedPollClient(AsyncKernelClient):
        shell_channel_class = Type(SlicedPollChannel)
        iopub_channel_class = Type(SlicedPollChannel)
        control_channel_class = Type(SlicedPollChannel)

    class SlicedPollKernelManager(AsyncKernelManager):
        client_factory = Type(default_value=SlicedPollClient, klass=AsyncKernelClient)

    return SlicedPollKernelManager


class MemoryWatch:
    """Samples the resident memory of the processes started after it (the kernel and its children).

    Binder gives a notebook about 2 GB in all, so what counts is the sum over the kernel and any
    process it starts (a spawned calibration, a measuring subprocess). The sum is sampled every
    `interval` seconds; the kernel's own high-water mark (VmHWM, Linux) catches spikes between
    samples. The peak is the larger of the two.
    """

    def __init__(self, interval: float = 0.2):
        import psutil

        self.interval, self.peak = interval, 0
        self._me = psutil.Process()
        self._before = {c.pid for c in self._me.children(recursive=True)}
        self._stop = None
        self._thread = None

    def _new_processes(self):
        return [c for c in self._me.children(recursive=True) if c.pid not in self._before]

    def _sample(self) -> None:
        import psutil

        total, hwm = 0, 0
        for proc in self._new_processes():
            try:
                total += proc.memory_info().rss
                with open(f"/proc/{proc.pid}/status") as status:
                    for line in status:
                        if line.startswith("VmHWM:"):
                            hwm = max(hwm, int(line.split()[1]) * 1024)
            except (psutil.Error, OSError):
                continue
        self.peak = max(self.peak, total, hwm)

    def __enter__(self) -> MemoryWatch:
        import threading

        self._stop = threading.Event()

        def run():
            while not self._stop.wait(self.interval):
                self._sample()

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def claim_lines(nb) -> dict[str, list[str]]:
    """The verdict lines of an executed notebook's check cells, by verdict (course_machinery.claims): the
    plain-text form of each check table, and any verdict line printed."""
    from course_machinery.claims import DIFFERS, ELSEWHERE, HOLDS, UNMEASURED, UNSETTLED, UNTIMED

    prefixes = {
        HOLDS: "holds",
        DIFFERS: "differs",
        UNSETTLED: "unsettled",
        UNMEASURED: "unmeasured",
        ELSEWHERE: "elsewhere",
        UNTIMED: "untimed",
    }
    found: dict[str, list[str]] = {kind: [] for kind in prefixes.values()}
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream":
                text = output.get("text", "")
            else:
                text = (
                    output.get("data", {}).get("text/plain", "")
                    if "text/markdown" in output.get("data", {})
                    else ""
                )
            if isinstance(text, list):
                text = "".join(text)
            for line in text.splitlines():
                for prefix, kind in prefixes.items():
                    if line.startswith(prefix):
                        found[kind].append(line)
    return found


def lesson_notebooks(directory: Path) -> list[Path]:
    """The lesson notebooks in course order (file names start with their number: 03, 03b, 04 …)."""
    return sorted(p for p in Path(directory).glob("[0-9][0-9]*_*.ipynb"))


def execute_notebook(
    notebook: Path,
    output_dir: Path | None = None,
    timeout: int = DEFAULT_TIMEOUT,
    cwd: Path | None = None,
    kernel_name: str = "python3",
    env: dict[str, str] | None = None,
) -> NotebookRun:
    """Run every cell of `notebook` in a fresh kernel; save the executed copy under `output_dir`.

    An error in a cell stops the run and is reported with the cell's number; the partly
    executed notebook is still saved so the traceback can be read in it. `env` adds variables to
    the kernel's environment (a masked CPU's, say: `cpumask.environment`).
    """
    import os

    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    notebook = Path(notebook)
    nb = nbformat.read(notebook, as_version=4)
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name=kernel_name,
        kernel_manager_class=_polling_kernel_manager(),
        resources={"metadata": {"path": str(cwd or notebook.parent)}},
        # The kernel is killed rather than asked to shut down politely once the last cell has
        # replied, so a kernel that lingers at exit cannot hold the run until the timeout.
        shutdown_kernel="immediate",
        # After each cell's reply, wait at most this long for trailing output messages.
        iopub_timeout=10,
        raise_on_iopub_timeout=False,
    )
    start = time.perf_counter()
    error = None
    with MemoryWatch() as memory:
        try:
            client.execute(**({"env": os.environ | env} if env else {}))
        except CellExecutionError as exc:
            error = str(exc).strip().splitlines()[-1] if str(exc).strip() else repr(exc)
        except (CellTimeoutError, DeadKernelError, TimeoutError) as exc:
            error = f"{type(exc).__name__}: {exc}"
    seconds = time.perf_counter() - start
    out = None
    if output_dir is not None:
        output_dir.mkdir(parents=True, exist_ok=True)
        out = output_dir / notebook.name
        nbformat.write(nb, out)
    return NotebookRun(notebook, out, seconds, error, memory.peak or None, claim_lines(nb))
