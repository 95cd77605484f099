"""Measuring an fp32 ONNX model against its INT8 variants: facts, latency, memory, parity, results.

Every lesson compares models with these functions, so that "smaller", "faster" and "as accurate"
always mean the same measurement:

    model_facts       what is in the file: bytes by dtype, op types, which nodes are quantized
    measure_latency   median / p10 / p90 over timed runs of one session, at fixed thread counts
    compare_latency   two models timed alternately (ABAB…), with the ratio of their medians
    peak_memory       peak resident memory of loading and running a model, in a fresh process
    parity            how far a candidate's logits drift from the reference's, and who is right
    record / load_results   a JSON results store, tagged with the environment that produced it

Results are small dataclasses with `to_dict()`, so a notebook can print a table without pandas.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import hashlib
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any, overload

import numpy as np
import onnx
import onnxruntime as ort

from . import hardware
from .data import data_dir


def _models():
    """course_lib.models, imported on first use: it imports torch, which a process that only
    measures ONNX files (e.g. `peak_memory_of`'s child) should not pay for."""
    from . import models

    return models


Feed = dict[str, np.ndarray]
MakeInputs = Callable[[int], Feed]


# --------------------------------------------------------------------------------------------
# Model facts: what is in the file
# --------------------------------------------------------------------------------------------
# Ops that run as integer kernels: the QOperator format (QLinear*), dynamic quantization
# (MatMulInteger, ConvInteger) and ONNX Runtime's contrib ops. Any op named QLinear* counts too.
INTEGER_OPS = frozenset(
    {
        "MatMulInteger",
        "ConvInteger",
        "QGemm",
        "QAttention",
        "QEmbedLayerNormalization",
        "DynamicQuantizeMatMul",
        "DynamicQuantizeLSTM",
        "MatMulIntegerToFloat",
        "MatMulNBits",
    }
)
# Ops that only convert between float and integer: the plumbing around quantized ops.
QUANTIZATION_OPS = frozenset({"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"})
# Ops that only move or reshape data: not counted among the "float ops left".
STRUCTURAL_OPS = frozenset(
    {"Constant", "ConstantOfShape", "Flatten", "Identity", "Reshape", "Shape", "Size", "Squeeze", "Unsqueeze"}
)
# Element types stored more than one to a byte.
_SUB_BYTE_BITS = {
    getattr(onnx.TensorProto, name): bits
    for name, bits in (("INT4", 4), ("UINT4", 4), ("FLOAT4E2M1", 4), ("INT2", 2), ("UINT2", 2))
    if hasattr(onnx.TensorProto, name)
}


@dataclass
class ModelFacts:
    """What an ONNX file holds. Sizes in bytes; `initializer_bytes` maps dtype name -> bytes."""

    path: str
    file_bytes: int  # the .onnx file itself
    external_data_bytes: int  # files holding external initializer data, if any
    sha256: str
    initializer_bytes: dict[str, int]
    parameter_count: int  # elements in all initializers except int64 ones (shapes and axes)
    op_counts: dict[str, int]
    quant_format: str  # "float", "QDQ", "QOperator", "dynamic", "weight-only QDQ" or a "+" mix
    quantized_nodes: list[dict[str, str]]  # name, op_type and how: "integer kernel" or "QDQ"
    float_ops: dict[str, int]  # op type -> count of nodes still computing in float

    @property
    def quantized_count(self) -> int:
        return len(self.quantized_nodes)

    @property
    def float_op_count(self) -> int:
        return sum(self.float_ops.values())

    @property
    def total_initializer_bytes(self) -> int:
        return sum(self.initializer_bytes.values())

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(
            quantized_count=self.quantized_count,
            float_op_count=self.float_op_count,
            total_initializer_bytes=self.total_initializer_bytes,
        )
        return d


def _graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """The graph and every subgraph inside it (If / Loop / Scan bodies), depth first."""
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from _graphs(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for g in attr.graphs:
                    yield from _graphs(g)


def tensor_bytes(tensor: onnx.TensorProto) -> tuple[str, int, int]:
    """(dtype name, element count, bytes) of an initializer, whether its values are stored in
    raw_data, in the typed fields (float_data, int32_data …) or in an external file.

    Computed from the shape and element type, so the answer does not depend on how it is stored.
    """
    count = int(np.prod(tensor.dims, dtype=np.int64))
    dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type)
    if tensor.data_type == onnx.TensorProto.STRING:
        return "string", count, sum(len(s) for s in tensor.string_data)
    bits = _SUB_BYTE_BITS.get(tensor.data_type, 8 * dtype.itemsize)
    return dtype.name, count, (count * bits + 7) // 8


def _external_data_bytes(model: onnx.ModelProto, directory: Path) -> int:
    locations = set()
    for graph in _graphs(model.graph):
        for tensor in graph.initializer:
            if tensor.data_location == onnx.TensorProto.EXTERNAL:
                locations |= {e.value for e in tensor.external_data if e.key == "location"}
    return sum((directory / loc).stat().st_size for loc in locations if (directory / loc).is_file())


def _quantized_nodes(model: onnx.ModelProto) -> list[dict[str, str]]:
    """Nodes that run in INT8: integer-kernel ops, and in QDQ graphs the float ops whose data
    input (their first input) comes out of a DequantizeLinear, which ONNX Runtime fuses with the
    surrounding DequantizeLinear / QuantizeLinear into an integer kernel.

    A float op fed only by a dequantized *weight* (weight-only QDQ) still computes in float.
    """
    producer = {out: node.op_type for g in _graphs(model.graph) for node in g.node for out in node.output}
    found = []
    for graph in _graphs(model.graph):
        for node in graph.node:
            if node.op_type in QUANTIZATION_OPS:
                continue
            if node.op_type in INTEGER_OPS or node.op_type.startswith("QLinear"):
                how = "integer kernel"
            elif node.input and producer.get(node.input[0]) == "DequantizeLinear":
                how = "QDQ"
            else:
                continue
            found.append({"name": node.name, "op_type": node.op_type, "how": how})
    return found


def _quant_format(op_counts: Counter, quantized: list[dict[str, str]]) -> str:
    kinds = []
    if any(q["how"] == "QDQ" for q in quantized):
        kinds.append("QDQ")
    if any(
        q["how"] == "integer kernel" and q["op_type"] not in ("MatMulInteger", "ConvInteger")
        for q in quantized
    ):
        kinds.append("QOperator")
    if op_counts["DynamicQuantizeLinear"] or any(
        q["op_type"] in ("MatMulInteger", "ConvInteger") for q in quantized
    ):
        kinds.append("dynamic")
    if not kinds and op_counts["DequantizeLinear"]:
        kinds.append("weight-only QDQ")
    return "+".join(kinds) or "float"


def model_facts(path: str | Path) -> ModelFacts:
    """File size, initializer bytes by dtype, op counts and the quantized nodes of an ONNX file.

    Reads the graph without loading external data, so it is quick even for large models.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"model_facts expects an ONNX file; found nothing at {path}. "
            "Export or quantize the model first, or check the path."
        )
    model = onnx.load(str(path), load_external_data=False)

    by_dtype: Counter = Counter()
    parameters = 0
    for graph in _graphs(model.graph):
        for tensor in graph.initializer:
            dtype, count, nbytes = tensor_bytes(tensor)
            by_dtype[dtype] += nbytes
            if dtype != "int64":
                parameters += count

    op_counts = Counter(node.op_type for g in _graphs(model.graph) for node in g.node)
    quantized = _quantized_nodes(model)
    quantized_names = Counter(q["op_type"] for q in quantized)
    float_ops = Counter(
        {
            op: n - quantized_names[op]
            for op, n in op_counts.items()
            if op not in QUANTIZATION_OPS and op not in STRUCTURAL_OPS and n > quantized_names[op]
        }
    )
    return ModelFacts(
        path=str(path),
        file_bytes=path.stat().st_size,
        external_data_bytes=_external_data_bytes(model, path.parent),
        sha256=_models().sha256_file(path),
        initializer_bytes=dict(sorted(by_dtype.items())),
        parameter_count=parameters,
        op_counts=dict(sorted(op_counts.items())),
        quant_format=_quant_format(op_counts, quantized),
        quantized_nodes=quantized,
        float_ops=dict(sorted(float_ops.items())),
    )


# --------------------------------------------------------------------------------------------
# Latency: one session, fixed threads, warm-up discarded, many timed runs
# --------------------------------------------------------------------------------------------
def physical_cores() -> int:
    """Physical CPU cores (hyper-threads share one core's INT8 units), at least 1."""
    import psutil

    return max(1, psutil.cpu_count(logical=False) or os.cpu_count() or 1)


def make_session(
    path: str | Path,
    threads: int | None = None,
    spinning: bool = True,
    config: Mapping[str, str] | None = None,
) -> ort.InferenceSession:
    """A CPU session with `threads` intra-op threads (default: physical cores) and one inter-op
    thread, so that two measurements differ only in the model, never in the threading.

    `spinning=False` stops ONNX Runtime's idle threads from busy-waiting for the next run (ONNX
    Runtime's default is to spin). The timing functions here turn it off: when two sessions or
    two runtimes take turns on few cores, one's spinning threads hold the cores the other needs.
    `config`: session configuration entries, e.g. {"session.x64quantprecision": "1"}.
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
    return ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])


@dataclass
class Latency:
    """Timings of one model at one batch size, in milliseconds; throughput in items per second."""

    model: str
    batch_size: int
    threads: int
    warmup: int
    runs: int
    median_ms: float
    p10_ms: float
    p90_ms: float
    mean_ms: float
    min_ms: float
    throughput: float  # batch_size / median, items per second
    samples_ms: list[float] = field(repr=False)

    def to_dict(self) -> dict:
        return asdict(self)


def latency_from_samples(
    samples_s: Sequence[float], *, model: str, batch_size: int, threads: int, warmup: int
) -> Latency:
    """Summarise timed runs (in seconds): the median is the headline, p10-p90 the spread."""
    ms = np.asarray(samples_s, dtype=np.float64) * 1e3
    median = float(np.median(ms))
    return Latency(
        model=model,
        batch_size=batch_size,
        threads=threads,
        warmup=warmup,
        runs=len(ms),
        median_ms=median,
        p10_ms=float(np.percentile(ms, 10)),
        p90_ms=float(np.percentile(ms, 90)),
        mean_ms=float(ms.mean()),
        min_ms=float(ms.min()),
        throughput=batch_size / (median / 1e3),
        samples_ms=ms.tolist(),
    )


class TorchRunner:
    """A PyTorch module behind the two methods timing uses (`run(None, feed)`, `get_inputs()`),
    so that `measure_latency` and `compare_latency` can time it, interleaved with an ONNX model,
    on the same feed dict. The feed's arrays go to `module` as positional tensors, in
    `input_names` order, under `torch.inference_mode()` with `threads` intra-op threads."""

    def __init__(self, module: Any, input_names: Sequence[str], threads: int | None = None, name: str = ""):
        threads = physical_cores() if threads is None else threads
        if not isinstance(threads, int) or threads < 1:
            raise ValueError(f"threads must be a whole number >= 1; got {threads!r}.")
        self.module, self.input_names, self.threads = module, tuple(input_names), threads
        self.name = name or type(module).__name__

    def get_inputs(self) -> list[Any]:
        from types import SimpleNamespace

        return [SimpleNamespace(name=n) for n in self.input_names]

    def run(self, output_names: Any, feed: Feed) -> list[np.ndarray]:
        import torch

        if torch.get_num_threads() != self.threads:
            torch.set_num_threads(self.threads)
        with torch.inference_mode():
            out = self.module(*(torch.from_numpy(np.asarray(feed[n])) for n in self.input_names))
        return [out.numpy()]


def _open(
    model: str | Path | ort.InferenceSession | TorchRunner, threads: int | None, spinning: bool = True
) -> tuple[Any, int, str]:
    """A session, its intra-op thread count and a label, from a path or a ready session/runner."""
    if isinstance(model, str | Path):
        session = make_session(model, threads, spinning=spinning)
        return session, session.get_session_options().intra_op_num_threads, Path(model).name
    if isinstance(model, TorchRunner):
        found, label = model.threads, model.name
    else:
        found = model.get_session_options().intra_op_num_threads
        label = Path(getattr(model, "_model_path", "") or "session").name
    if threads is not None and threads != found:
        raise ValueError(
            f"threads={threads} was asked for, but the {type(model).__name__} given runs with "
            f"{found} intra-op threads. Pass the model's path instead (the session is then made "
            "with the threads asked for), make it with the same threads, or leave threads out."
        )
    return model, found, label


def _check_feed(session: Any, feed: Feed) -> int:
    """Check the feed's names against the session's inputs; return its batch size (dim 0)."""
    expected = sorted(i.name for i in session.get_inputs())
    if not isinstance(feed, Mapping) or sorted(feed) != expected:
        got = sorted(feed) if isinstance(feed, Mapping) else type(feed).__name__
        raise ValueError(
            f"The model expects a feed dict with inputs {expected}; got {got}. "
            "Fix the inputs (or make_inputs) to return {name: array} for exactly those names."
        )
    first = np.asarray(feed[expected[0]])
    return int(first.shape[0]) if first.ndim else 1


def _feed_for(inputs: Feed | MakeInputs, batch_size: int) -> Feed:
    return inputs(batch_size) if callable(inputs) else inputs


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Keep Python's garbage collector from pausing in the middle of a timed run (as timeit does)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _time_runs(session: Any, feed: Feed, warmup: int, runs: int) -> list[float]:
    for _ in range(warmup):  # first runs allocate buffers and pick kernels: not representative
        session.run(None, feed)
    samples = []
    with _gc_paused():
        for _ in range(runs):
            start = time.perf_counter()
            session.run(None, feed)
            samples.append(time.perf_counter() - start)
    return samples


def _check_counts(warmup: int, runs: int) -> None:
    if warmup < 0 or runs < 1:
        raise ValueError(f"Need warmup >= 0 and runs >= 1; got warmup={warmup}, runs={runs}.")


@overload
def measure_latency(
    path_or_session: str | Path | ort.InferenceSession,
    inputs: Feed | MakeInputs,
    *,
    threads: int | None = None,
    warmup: int = 10,
    runs: int = 50,
    batch_sizes: int | None = None,
    spinning: bool = False,
) -> Latency: ...
@overload
def measure_latency(
    path_or_session: str | Path | ort.InferenceSession,
    inputs: MakeInputs,
    *,
    threads: int | None = None,
    warmup: int = 10,
    runs: int = 50,
    batch_sizes: Sequence[int],
    spinning: bool = False,
) -> list[Latency]: ...
def measure_latency(
    path_or_session, inputs, *, threads=None, warmup=10, runs=50, batch_sizes=None, spinning=False
):
    """Time `runs` inference runs after `warmup` discarded ones, with `time.perf_counter`.

    `inputs` is a feed dict, or `make_inputs(batch_size) -> feed dict`. With one batch size (an
    int, or None: the dict's own, or 1 for a callable) this returns one `Latency`; with a list of
    batch sizes it returns one `Latency` per batch size, all timed on the same session.
    `threads` sets intra-op threads (default: physical cores); inter-op threads are always 1.
    `spinning`: whether a session made here from a path lets its idle threads busy-wait between
    runs; off by default, as in `compare_latency` (see there why).
    """
    _check_counts(warmup, runs)
    session, n_threads, label = _open(path_or_session, threads, spinning)
    if not callable(inputs) and batch_sizes is not None and not isinstance(batch_sizes, int):
        raise ValueError(
            "Several batch sizes need inputs made to order: pass make_inputs(batch_size) -> feed dict "
            "instead of a fixed feed dict."
        )
    sizes = (
        [1 if batch_sizes is None else batch_sizes]
        if isinstance(batch_sizes, int | None)
        else list(batch_sizes)
    )
    results = []
    for size in sizes:
        feed = _feed_for(inputs, size)
        batch = _check_feed(session, feed)
        samples = _time_runs(session, feed, warmup, runs)
        results.append(
            latency_from_samples(samples, model=label, batch_size=batch, threads=n_threads, warmup=warmup)
        )
    return results if isinstance(batch_sizes, Sequence) else results[0]


@dataclass
class LatencyComparison:
    """Two models timed alternately. `speedup` = baseline median / candidate median: 2.0 means
    the candidate takes half the time. `speedup_low`..`speedup_high` is a paired-bootstrap
    interval of that ratio (`confidence`, e.g. 0.9 for the 5th to 95th percentile)."""

    baseline: str
    candidate: str
    latency: dict[str, Latency]
    speedup: float
    speedup_low: float
    speedup_high: float
    confidence: float

    def to_dict(self) -> dict:
        return {
            "baseline": self.baseline,
            "candidate": self.candidate,
            "speedup": self.speedup,
            "speedup_low": self.speedup_low,
            "speedup_high": self.speedup_high,
            "confidence": self.confidence,
            "latency": {name: lat.to_dict() for name, lat in self.latency.items()},
        }

    def speedup_clearly_above(self, other: LatencyComparison) -> bool | None:
        """Whether this ratio is clearly larger than `other`'s, judged by their intervals.

        True when this interval lies wholly above the other's (`speedup_low > other.speedup_high`),
        False when it lies wholly below, None when the two overlap, touching endpoints included:
        then the medians differ by no more than the noise, and neither can be claimed larger.
        """
        if self.speedup_low > other.speedup_high:
            return True
        if other.speedup_low > self.speedup_high:
            return False
        return None


def bootstrap_ratio_interval(
    baseline_s: Sequence[float],
    candidate_s: Sequence[float],
    *,
    confidence: float = 0.9,
    resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """Interval of median(baseline) / median(candidate) by a paired bootstrap.

    The runs were interleaved, so run i of each side shares the machine's state at that moment;
    resampling whole pairs keeps that pairing. Seeded, so the same samples give the same interval.
    """
    a, b = np.asarray(baseline_s, dtype=np.float64), np.asarray(candidate_s, dtype=np.float64)
    idx = np.random.default_rng(seed).integers(0, len(a), size=(resamples, len(a)))
    ratios = np.median(a[idx], axis=1) / np.median(b[idx], axis=1)
    low, high = np.quantile(ratios, [(1 - confidence) / 2, (1 + confidence) / 2])
    return float(low), float(high)


def compare_latency(
    models_to_compare: Mapping[str, str | Path | ort.InferenceSession],
    inputs: Feed | MakeInputs,
    *,
    batch_size: int | None = None,
    threads: int | None = None,
    warmup: int = 10,
    runs: int = 50,
    confidence: float = 0.9,
    spinning: bool = False,
    block: int = 5,
) -> LatencyComparison:
    """Time two models in turn (A×block, B×block, A×block, …) on the same feed.

    Taking turns means a noisy neighbour, a frequency change or a background job hits both
    models alike instead of whichever happened to run second. The first name is the baseline
    (e.g. {"fp32": fp32_path, "int8": int8_path}); see `LatencyComparison` for the ratio and its
    interval (a paired bootstrap over the runs, paired in the order they were taken).

    Why blocks, not single runs: after a run, ONNX Runtime's idle threads keep spinning for tens
    of milliseconds, waiting for more work. Alternating run by run, each model then runs while
    the other's threads still hold the cores (measured on 2 cores: a ResNet18 batch took 40 ms
    instead of 18). So each turn starts with one untimed switch-over run, then times `block` runs.

    `spinning` applies to ONNX Runtime sessions made here from paths, and is off by default. With
    it on, each run starts a little sooner, but on 2 cores the two sessions' idle threads compete
    for the cores. Measured on an AMD EPYC (AVX2, 2 cores), the same ResNet18 pair at batch 1, two
    runs of five comparisons each (`benchmarks/latency_stability.py`): spinning on gave 1.24-2.17x
    and 1.43-1.90x, with intervals up to 2.5x wide; spinning off 1.41-1.50x and 1.57-1.90x, with
    intervals of 0.1-0.2. The rest of the spread is the machine's own (standalone medians of one
    model moved by up to 2x between processes): read the interval, and compare again. PyTorch's
    threads, on the other side of a `TorchRunner` comparison, would wait on the spinning too.
    """
    _check_counts(warmup, runs)
    if not isinstance(block, int) or block < 1:
        raise ValueError(f"block must be a whole number >= 1 (timed runs per turn); got {block!r}.")
    if len(models_to_compare) != 2:
        raise ValueError(
            f"compare_latency compares exactly two models; got {len(models_to_compare)} "
            f"({', '.join(models_to_compare)}). Pass e.g. {{'fp32': fp32_path, 'int8': int8_path}}."
        )
    names = list(models_to_compare)
    opened = {name: _open(m, threads, spinning) for name, m in models_to_compare.items()}
    feed = _feed_for(inputs, 1 if batch_size is None else batch_size)
    batch = {name: _check_feed(session, feed) for name, (session, _, _) in opened.items()}[names[0]]

    samples: dict[str, list[float]] = {name: [] for name in names}
    with _gc_paused():
        for _ in range(warmup):  # the first runs allocate buffers and pick kernels: not timed
            for name in names:
                opened[name][0].run(None, feed)
        while len(samples[names[0]]) < runs:
            for name in names:
                session = opened[name][0]
                session.run(None, feed)  # switch-over: the other model's threads may still spin
                for _ in range(min(block, runs - len(samples[name]))):
                    start = time.perf_counter()
                    session.run(None, feed)
                    samples[name].append(time.perf_counter() - start)

    latency = {
        name: latency_from_samples(
            samples[name], model=name, batch_size=batch, threads=opened[name][1], warmup=warmup
        )
        for name in names
    }
    base, cand = names
    low, high = bootstrap_ratio_interval(samples[base], samples[cand], confidence=confidence)
    return LatencyComparison(
        baseline=base,
        candidate=cand,
        latency=latency,
        speedup=latency[base].median_ms / latency[cand].median_ms,
        speedup_low=low,
        speedup_high=high,
        confidence=confidence,
    )


# --------------------------------------------------------------------------------------------
# Peak memory: load and run in a fresh process
# --------------------------------------------------------------------------------------------
# Runs in a fresh interpreter: only numpy and onnxruntime are imported, so the baseline is small
# and nothing the notebook allocated earlier counts. Prints one JSON line.
_MEMORY_HELPERS = r"""
import sys

def high_water_bytes():  # peak resident memory of this process so far, in bytes
    try:  # Linux: VmHWM belongs to this process image. ru_maxrss does not: after fork + exec it
        # starts from the parent's peak, i.e. the notebook's, which is what we must not count.
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        import resource
    except ImportError:  # Windows: the peak working set
        import psutil
        info = psutil.Process().memory_info()
        return int(getattr(info, "peak_wset", info.rss))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)  # macOS: bytes; others: KiB

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
    `ru_maxrss` (macOS) or the peak working set (Windows).
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


# --------------------------------------------------------------------------------------------
# Parity: drift of the logits, agreement of the answers, and who is right
# --------------------------------------------------------------------------------------------
# Floor of the denominator of the relative drift |ref - cand| / max(|ref|, eps). Logits are of
# order 1; below 1e-3 a relative error says nothing useful, and without a floor a logit that
# happens to sit at 0 would give an infinite drift. Near-zero logits still dominate the maximum,
# which is why the lessons lead with absolute drift and top-1 agreement.
RELATIVE_DRIFT_EPS = 1e-3


@dataclass
class Parity:
    """How a candidate (e.g. int8) matches a reference (e.g. fp32) on the same inputs.

    Agreement is not correctness: when labels are given, the counts split the labelled rows
    into both right, both wrong with the same answer, both wrong with different answers, only
    the reference right and only the candidate right (they add up to `labelled`). Rows labelled
    -1 (no ground truth) count for agreement and drift only.
    """

    n: int
    agreement: float  # fraction with the same top-1 class
    disagreements: int
    max_abs_drift: float
    mean_abs_drift: float
    max_rel_drift: float  # |ref - cand| / max(|ref|, eps)
    allclose: bool  # np.allclose(cand, ref, rtol, atol): |cand - ref| <= atol + rtol * |ref|
    atol: float
    rtol: float
    eps: float
    labelled: int | None = None  # rows with a label >= 0; accuracies and counts are over these
    reference_accuracy: float | None = None
    candidate_accuracy: float | None = None
    both_right: int | None = None
    both_wrong_same: int | None = None
    both_wrong_different: int | None = None
    only_reference_right: int | None = None
    only_candidate_right: int | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    def accuracy_change_interval(self, confidence: float = 0.95) -> tuple[float, float]:
        """An interval for candidate minus reference accuracy, in points, on these labelled rows.

        Both models saw the same images, so only the images on which exactly one of them is right
        move the difference: with b rows only the reference right and c only the candidate right
        out of n, the change is (c - b) / n with the paired (McNemar) standard error
        sqrt(b + c - (c - b)^2 / n) / n, far smaller than either accuracy's own uncertainty.
        """
        if self.labelled is None:
            raise ValueError("accuracy_change_interval needs labels: pass labels to measure.parity(...).")
        n, b, c = self.labelled, self.only_reference_right, self.only_candidate_right
        change = (c - b) / n
        se = math.sqrt(max(b + c - (c - b) ** 2 / n, 0.0)) / n
        z = statistics.NormalDist().inv_cdf(0.5 + confidence / 2)
        return 100 * (change - z * se), 100 * (change + z * se)


def _as_logits(name: str, logits: Any) -> np.ndarray:
    a = np.asarray(logits, dtype=np.float64)
    if a.ndim == 1:
        a = a[None, :]
    if a.ndim != 2 or a.shape[0] == 0:
        raise ValueError(
            f"{name} must be logits of shape (N, classes); got shape {np.shape(logits)}. "
            "Pass the model's output for a batch, e.g. session.run(None, feed)[0]."
        )
    return a


def parity(
    reference_logits: Any,
    candidate_logits: Any,
    labels: Any = None,
    *,
    atol: float = 5e-2,
    rtol: float = 0.0,
    eps: float = RELATIVE_DRIFT_EPS,
) -> Parity:
    """Compare candidate logits with reference logits, and with the labels when given.

    `rtol` defaults to 0 so that `allclose` reads "every logit within atol of the reference";
    pass rtol to allow a relative slack as well (np.allclose's rule).
    """
    ref, cand = (
        _as_logits("reference_logits", reference_logits),
        _as_logits("candidate_logits", candidate_logits),
    )
    if ref.shape != cand.shape:
        raise ValueError(
            f"Reference and candidate logits must have the same shape; got {ref.shape} and {cand.shape}. "
            "Run both models on the same inputs, in the same order."
        )
    drift = np.abs(cand - ref)
    ref_top, cand_top = ref.argmax(1), cand.argmax(1)
    same = ref_top == cand_top
    result = Parity(
        n=len(ref),
        agreement=float(same.mean()),
        disagreements=int((~same).sum()),
        max_abs_drift=float(drift.max()),
        mean_abs_drift=float(drift.mean()),
        max_rel_drift=float((drift / np.maximum(np.abs(ref), eps)).max()),
        allclose=bool(np.allclose(cand, ref, rtol=rtol, atol=atol)),
        atol=atol,
        rtol=rtol,
        eps=eps,
    )
    if labels is None:
        return result
    y = np.asarray(labels).reshape(-1)
    if len(y) != len(ref):
        raise ValueError(
            f"Got {len(y)} labels for {len(ref)} rows of logits; pass one label per row (in the same order)."
        )
    known = y >= 0  # label -1: no ground truth (e.g. two-moons points outside the training range)
    result.labelled = int(known.sum())
    if not result.labelled:
        return result
    ref_ok, cand_ok, same = (ref_top == y)[known], (cand_top == y)[known], same[known]
    result.reference_accuracy = float(ref_ok.mean())
    result.candidate_accuracy = float(cand_ok.mean())
    result.both_right = int((ref_ok & cand_ok).sum())
    result.both_wrong_same = int((~ref_ok & ~cand_ok & same).sum())
    result.both_wrong_different = int((~ref_ok & ~cand_ok & ~same).sum())
    result.only_reference_right = int((ref_ok & ~cand_ok).sum())
    result.only_candidate_right = int((~ref_ok & cand_ok).sum())
    return result


# --------------------------------------------------------------------------------------------
# Results store: <data dir>/results.json, one entry per measurement
# --------------------------------------------------------------------------------------------
RESULTS_FILE = "results.json"


def results_path() -> Path:
    """Where results are stored: `<data_dir()>/results.json` ($COURSE_DATA_DIR moves it)."""
    return data_dir() / RESULTS_FILE


@lru_cache(maxsize=1)
def _fingerprint() -> dict:
    cpu = hardware.cpu_report()  # py-cpuinfo takes a moment: computed once per process
    facts = {
        "cpu": cpu["cpu"],
        "machine": cpu["machine"],
        "os": platform.system(),
        "logical_cores": cpu["logical_cores"],
        "physical_cores": physical_cores(),
        "int8_features": sorted(name for name, present in cpu["features"].items() if present),
        "versions": _models().library_versions(),
    }
    facts["hash"] = hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:12]
    return facts


def environment_fingerprint() -> dict:
    """CPU, its INT8 features, core counts and library versions, plus a short hash of all that.

    Entries with the same hash were measured in the same environment and can be compared.
    """
    return copy.deepcopy(_fingerprint())


def _jsonable(value: Any) -> Any:
    """Turn results (dataclasses with to_dict, numpy scalars and arrays, paths) into JSON values."""
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(
        f"Cannot store a {type(value).__name__} in the results file ({value!r:.80}); "
        "record numbers, strings, lists and dicts (or objects with a to_dict() method)."
    )


class _CorruptStore(ValueError):
    pass


def _read_store(path: Path) -> list:
    """The stored entries; [] for a missing file; _CorruptStore if it is not a JSON list."""
    if not path.exists():
        return []
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _CorruptStore(f"{path} is not valid JSON ({exc})") from exc
    if not isinstance(entries, list):
        raise _CorruptStore(f"{path} holds a JSON {type(entries).__name__}, not a list of entries")
    return entries


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock beside `path`, so two processes recording at once lose nothing."""
    try:
        import fcntl
    except ImportError:  # Windows: no advisory locks here; notebooks record one at a time
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def record(
    lesson: str,
    model: str,
    variant: str,
    metrics: Mapping[str, Any] | Any,
    options: Mapping[str, Any] | None = None,
    path: str | Path | None = None,
) -> dict:
    """Append one measurement to the results store and return the entry written.

    `metrics` is a dict of numbers (or a result with to_dict(), e.g. a Latency); `options` are
    the settings that produced it (per_channel, calibration method, threads …); `path` is the
    ONNX file measured, whose name, size and SHA-256 are stored so the numbers can be traced
    back to the exact file. A corrupt results file is moved aside (with a warning), not lost.
    """
    entry = {
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
        "lesson": str(lesson),
        "model": str(model),
        "variant": str(variant),
        "options": dict(options or {}),
        "metrics": metrics.to_dict() if hasattr(metrics, "to_dict") else dict(metrics),
        "environment": environment_fingerprint(),
    }
    if path is not None:
        file = Path(path)
        entry["file"] = {
            "name": file.name,
            "bytes": file.stat().st_size,
            "sha256": _models().sha256_file(file),
        }
    entry = json.loads(json.dumps(entry, default=_jsonable))  # fail here, before touching the file

    store = results_path()
    with _locked(store):
        try:
            entries = _read_store(store)
        except _CorruptStore as exc:
            aside = store.with_name(f"{store.name}.corrupt-{datetime.now().strftime('%Y%m%dT%H%M%S%f')}")
            shutil.move(store, aside)
            warnings.warn(
                f"{exc}. Moved it aside to {aside} (its content is kept there) and started a new "
                "results file. Look inside it if earlier results matter; otherwise delete it.",
                stacklevel=2,
            )
            entries = []
        entries.append(entry)
        text = json.dumps(entries, indent=1)
        _models().atomic_write(store, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    return entry


def load_results(lesson: str | None = None, same_environment: bool = True) -> list[dict]:
    """Stored entries, oldest first: of one lesson if given, and by default only those measured
    in this environment (same fingerprint hash), so comparisons are like with like."""
    store = results_path()
    try:
        entries = _read_store(store)
    except _CorruptStore as exc:
        warnings.warn(f"{exc}; no results read. The next record() moves it aside.", stacklevel=2)
        return []
    wanted = environment_fingerprint()["hash"] if same_environment else None
    return [
        e
        for e in entries
        if isinstance(e, dict)
        and (lesson is None or e.get("lesson") == str(lesson))
        and (wanted is None or (e.get("environment") or {}).get("hash") == wanted)
    ]


def markdown_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """A Markdown table from a list of dicts: the keys of the first row are the columns."""
    if not rows:
        return "(no rows)"
    cols = list(rows[0])

    def cell(value: Any) -> str:  # a "|" inside a cell (e.g. "max |drift|") would end it
        return str(value).replace("|", "\\|")

    lines = ["| " + " | ".join(map(cell, cols)) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(cell(r.get(c, "")) for c in cols) + " |" for r in rows]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Deciding: the acceptance rule, margins, disagreements
# --------------------------------------------------------------------------------------------
@dataclass
class Verdict:
    """The acceptance rule applied to one candidate (seed 000's thresholds by default)."""

    passes: bool
    drop_points: float  # reference accuracy minus candidate accuracy, in percentage points
    agreement: float
    advice: str

    def to_dict(self) -> dict:
        return asdict(self)


def acceptance(
    p: Parity,
    *,
    max_drop_points: float = 0.5,
    min_agreement: float = 0.99,
    review_points: float = 1.0,
    per_channel_points: float = 3.0,
) -> Verdict:
    """Pass when accuracy drops at most `max_drop_points` and top-1 agreement exceeds
    `min_agreement`. Over `review_points` of drop: review the calibration set first; over
    `per_channel_points`: per_channel is often missing. Needs a Parity computed with labels."""
    if p.reference_accuracy is None or p.candidate_accuracy is None:
        raise ValueError(
            "acceptance needs accuracies: compute the parity with labels, parity(ref, cand, labels)."
        )
    drop = 100 * (p.reference_accuracy - p.candidate_accuracy)
    passes = drop <= max_drop_points and p.agreement > min_agreement
    if passes:
        advice = "passes"
    elif drop > per_channel_points:
        advice = f"drop over {per_channel_points:g} points: per_channel is often missing"
    elif drop > review_points:
        advice = f"drop over {review_points:g} point: review the calibration set first"
    elif drop > max_drop_points:
        advice = f"drop over {max_drop_points:g} points: not accepted"
    else:
        advice = f"agreement {p.agreement:.2%} not above {min_agreement:.0%}: the models decide differently"
    return Verdict(passes=passes, drop_points=drop, agreement=p.agreement, advice=advice)


def softmax(logits: Any) -> np.ndarray:
    z = np.asarray(logits, dtype=np.float64)
    z = np.exp(z - z.max(axis=-1, keepdims=True))
    return z / z.sum(axis=-1, keepdims=True)


def margin(logits: Any) -> np.ndarray:
    """Per row: probability of the top class minus that of the runner-up (0: a coin toss, 1: sure)."""
    p = np.sort(softmax(logits), axis=-1)
    return p[..., -1] - p[..., -2]
