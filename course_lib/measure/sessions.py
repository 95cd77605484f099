"""Sessions: how the course opens a model and runs it on many inputs.

    physical_cores   the default thread count: one per physical core
    make_session     a CPU InferenceSession with fixed threads, so that two measurements differ
                     only in the model, never in the threading
    logits           a classifier's scores for every row of an array, run in batches

A feed is what `session.run(None, feed)` takes: a dict {input name: array}. Functions that time
several batch sizes take `make_inputs(batch_size) -> feed` instead. A feed with the wrong names, or
an array of the wrong dtype or shape, is refused with `inputs.InputError` (the course's one input
check) before anything runs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

from ..inputs import InputError, InputSpec, check_array

Feed = dict[str, np.ndarray]
MakeInputs = Callable[[int], Feed]


def physical_cores() -> int:
    """Physical CPU cores (hyper-threads share one core's INT8 units), at least 1."""
    import psutil

    return max(1, psutil.cpu_count(logical=False) or os.cpu_count() or 1)


def make_session(
    model: str | Path | bytes,
    threads: int | None = None,
    spinning: bool = True,
    config: Mapping[str, str] | None = None,
    *,
    optimized_to: str | Path | None = None,
    profile_prefix: str | None = None,
) -> ort.InferenceSession:
    """A CPU session with `threads` intra-op threads (default: physical cores) and one inter-op
    thread, so that two measurements differ only in the model, never in the threading. Every
    session the course opens is opened here.

    `model`: an ONNX file, or a serialized model (bytes).
    `spinning=False` stops ONNX Runtime's idle threads from busy-waiting for the next run (ONNX
    Runtime's default is to spin). The timing functions here turn it off: when two sessions or
    two runtimes take turns on few cores, one's spinning threads hold the cores the other needs.
    `config`: session configuration entries, e.g. {"session.x64quantprecision": "1"}.
    `optimized_to`: save the graph this CPU executes there (every optimization on).
    `profile_prefix`: turn ONNX Runtime's profiler on, writing its trace to `<prefix>_<time>.json`.
    With either, only errors are logged: ONNX Runtime warns that what it saves is specific to this
    CPU, which is exactly what these sessions are opened to read.
    """
    threads = physical_cores() if threads is None else threads
    if not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be a whole number >= 1; got {threads!r}. Pass e.g. threads=1.")
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    if not spinning:
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    for key, value in (config or {}).items():
        options.add_session_config_entry(key, str(value))
    if optimized_to is not None:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.optimized_model_filepath = str(optimized_to)
    if profile_prefix is not None:
        options.enable_profiling = True
        options.profile_file_prefix = profile_prefix
    if optimized_to is not None or profile_prefix is not None:
        options.log_severity_level = 3
    source = model if isinstance(model, bytes) else str(model)
    return ort.InferenceSession(source, sess_options=options, providers=["CPUExecutionProvider"])


def _check_feed(session: Any, feed: Feed) -> int:
    """Check the feed's names against the session's inputs; return its batch size (dim 0)."""
    expected = sorted(i.name for i in session.get_inputs())
    if not isinstance(feed, Mapping) or sorted(feed) != expected:
        got = sorted(feed) if isinstance(feed, Mapping) else type(feed).__name__
        raise InputError(
            f"The model expects a feed dict with inputs {expected}; got {got}. "
            "Fix the inputs (or make_inputs) to return {name: array} for exactly those names.",
            expected=expected,
            found=got,
        )
    first = np.asarray(feed[expected[0]])
    return int(first.shape[0]) if first.ndim else 1


def _feed_for(inputs: Feed | MakeInputs, batch_size: int) -> Feed:
    """The feed itself, or the one `make_inputs(batch_size)` makes."""
    return inputs(batch_size) if callable(inputs) else inputs


def logits(
    path: str | Path | ort.InferenceSession,
    x: np.ndarray | Mapping[str, np.ndarray],
    *,
    batch: int = 500,
    threads: int | None = None,
    output: str | None = None,
) -> np.ndarray:
    """A classifier file's scores for every row of `x`, run `batch` rows at a time in one session.

    `x`: the array of a one-input model (one example per row), or a feed dict {input name: array}
    whose arrays have the same number of rows. Batches keep 10,000 images from sitting in one
    run's buffers at once; the rows come back in order, as one array of shape (N, classes).
    `output`: the output to return; by default the first two-dimensional one (a PyTorch export's
    logits, or the probabilities of a scikit-learn export, whose first output is the label).
    `threads`: intra-op threads, as in `make_session` (default: physical cores). `path` may also be
    an open session (for example one with session config entries) or a runner with the same
    methods (`runtimes.OpenVINORunner`); `threads` is then its own.

    A dynamically quantized model computes its activation scales over each batch, so its scores
    move a little with `batch`: compare variants at the same batch size.
    """
    if isinstance(path, str | Path):
        session, model = make_session(path, threads), Path(path).name
    else:  # a session opened with options of its own, or a runner
        session, model = path, getattr(path, "name", "the session's model")
    feed = _rows_feed(session, x, model, batch)
    output = _classifier_output(session, output, model)
    return np.concatenate(list(run_batches(session, feed, batch, output)))


def run_batches(session: Any, feed: Feed, batch: int, output: str) -> Iterator[np.ndarray]:
    """`output` for `batch` rows of `feed` at a time, in order: the course's one batched-run loop."""
    n = len(next(iter(feed.values())))
    for i in range(0, n, batch):
        yield session.run([output], {name: array[i : i + batch] for name, array in feed.items()})[0]


def _rows_feed(session: Any, x: np.ndarray | Mapping[str, np.ndarray], model: str, batch: int) -> Feed:
    """logits' input checks: `x` as a feed dict with the session's input names, dtypes and shapes,
    and the same number of rows (at least one) in every input."""
    if not isinstance(batch, int) or batch < 1:
        raise ValueError(
            f"batch must be a whole number >= 1 (rows per run); got {batch!r}. Pass e.g. batch=500."
        )
    inputs = session.get_inputs()
    if not isinstance(x, Mapping):
        if len(inputs) != 1:
            raise ValueError(
                f"{model} has {len(inputs)} inputs ({', '.join(i.name for i in inputs)}); one array cannot "
                "feed them. Pass a feed dict {name: array} with one array per input."
            )
        x = {inputs[0].name: x}
    _check_feed(session, x)
    feed = {name: np.asarray(array) for name, array in x.items()}
    for declared in inputs:
        spec = InputSpec.of_session_input(declared)
        check_array(feed[spec.name], spec, what=f"The array fed to {spec.name!r}", model=model)
    counts = {name: len(array) for name, array in feed.items()}
    if next(iter(counts.values())) == 0 or len(set(counts.values())) != 1:
        raise ValueError(f"logits needs at least one row, the same number in every input; got {counts}.")
    return feed


def _classifier_output(session: Any, output: str | None, model: str) -> str:
    """The output logits returns: `output` if the model has it, else the first (N, classes) one."""
    outputs = session.get_outputs()
    found = ", ".join(f"{o.name} {o.shape}" for o in outputs)
    if output is None:
        output = next((o.name for o in outputs if len(o.shape or []) == 2), None)
        if output is None:
            raise ValueError(
                f"{model} has no output of shape (N, classes); its outputs are: {found}. "
                "Name the one to return: output=<name>."
            )
    elif output not in [o.name for o in outputs]:
        raise ValueError(f"{model} has no output {output!r}; its outputs are: {found}. Pass one of those.")
    return output
