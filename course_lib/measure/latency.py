"""Latency: one model timed properly, and two models timed in turn with the ratio of their medians.

    measure_latency           median / p10 / p90 over timed runs of one session, at fixed threads
    compare_latency           two models timed alternately, in blocks, with a paired interval of
                              the ratio of their medians (`LatencyComparison`)
    _latency_from_samples      the summary of timed runs, given in seconds
    bootstrap_ratio_interval  how far the ratio of medians could move, by a paired bootstrap
    TorchRunner               a PyTorch module behind the session methods timing uses

Every timed run is one `session.run(None, feed)` between two `time.perf_counter()` calls, after
discarded warm-up runs, with Python's garbage collector paused.
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, overload

import numpy as np
import onnxruntime as ort

from ..units import format_ratio
from .sessions import Feed, MakeInputs, _check_feed, _feed_for, make_session, physical_cores


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


def _latency_from_samples(
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
    model: str | Path | ort.InferenceSession | Any, threads: int | None, spinning: bool = True
) -> tuple[Any, int, str]:
    """A session, its intra-op thread count and a label, from a path or a ready session/runner."""
    if isinstance(model, str | Path):
        session = make_session(model, threads, spinning=spinning)
        return session, session.get_session_options().intra_op_num_threads, Path(model).name
    if not hasattr(model, "get_session_options"):
        # a runner: TorchRunner, runtimes.OpenVINORunner, or anything with run, get_inputs, threads, name
        if not all(hasattr(model, a) for a in ("run", "get_inputs", "threads", "name")):
            raise TypeError(
                f"Expected a model path, an onnxruntime.InferenceSession or a runner "
                f"(measure.TorchRunner, runtimes.OpenVINORunner); got {type(model).__name__}."
            )
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


def _timed(session: Any, feed: Feed, runs: int) -> list[float]:
    """The seconds each of `runs` runs takes (the course's one timed loop)."""
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        session.run(None, feed)
        samples.append(time.perf_counter() - start)
    return samples


def _time_runs(session: Any, feed: Feed, warmup: int, runs: int) -> list[float]:
    for _ in range(warmup):  # first runs allocate buffers and pick kernels: not representative
        session.run(None, feed)
    with _gc_paused():
        return _timed(session, feed, runs)


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
            _latency_from_samples(samples, model=label, batch_size=batch, threads=n_threads, warmup=warmup)
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

    def __str__(self) -> str:
        """The ratio with its interval, as the lessons print it: '1.34x (1.29–1.40)'."""
        return format_ratio(self.speedup, self.speedup_low, self.speedup_high)

    def speedup_below(self, target: float) -> bool | None:
        """Whether this ratio stays below `target`, judged by its interval: True when the whole
        interval lies below it, False when it lies at or above it, None when it reaches both sides."""
        reached = self.speedup_at_least(target)
        return None if reached is None else not reached

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

    def speedup_at_least(self, target: float) -> bool | None:
        """Whether this ratio reaches `target` (e.g. 1.5 for "at least 1.5x"), judged by its interval.

        True when the whole interval lies at or above `target`, False when it lies wholly below,
        None when it reaches both sides: this run's noise cannot say, so neither is claimed.
        """
        if self.speedup_low >= target:
            return True
        if self.speedup_high < target:
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
    """Time two models in turn on the same feed: `block` runs of one, then `block` of the other,
    until each has `runs`. The first name is the baseline (e.g. {"fp32": fp32_path, "int8":
    int8_path}); see `LatencyComparison` for the ratio and its interval.

    Why in turn: a noisy neighbour or a frequency change then hits both models alike, instead of
    whichever ran second. Why blocks of runs with an untimed first one, and `spinning` off: after
    a run, ONNX Runtime's idle threads keep spinning for a while, holding the cores the other
    model needs next (`benchmarks/latency_stability.py` measures the difference).
    """
    if len(models_to_compare) != 2:
        raise ValueError(
            f"compare_latency compares exactly two models; got {len(models_to_compare)} "
            f"({', '.join(models_to_compare)}). Pass e.g. {{'fp32': fp32_path, 'int8': int8_path}}; "
            "for more, compare_in_turn."
        )
    candidate = list(models_to_compare)[1]
    return compare_in_turn(
        models_to_compare,
        inputs,
        batch_size=batch_size,
        threads=threads,
        warmup=warmup,
        runs=runs,
        confidence=confidence,
        spinning=spinning,
        block=block,
    )[candidate]


def _time_in_turn(
    models: Mapping[str, Any],
    inputs: Any,
    batch_size: int | None,
    threads: int | None,
    warmup: int,
    runs: int,
    spinning: bool,
    block: int,
) -> tuple[dict[str, Latency], dict[str, list[float]]]:
    """Time every model in turn, `block` runs each (see `compare_latency`): their latencies and samples."""
    _check_counts(warmup, runs)
    if not isinstance(block, int) or block < 1:
        raise ValueError(f"block must be a whole number >= 1 (timed runs per turn); got {block!r}.")
    names = list(models)
    opened = {name: _open(m, threads, spinning) for name, m in models.items()}
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
                samples[name] += _timed(session, feed, min(block, runs - len(samples[name])))
    latency = {
        name: _latency_from_samples(
            samples[name], model=name, batch_size=batch, threads=opened[name][1], warmup=warmup
        )
        for name in names
    }
    return latency, samples


def compare_in_turn(
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
) -> dict[str, LatencyComparison]:
    """Time several models in turn on the same feed, each against the first (the baseline): one
    `LatencyComparison` per candidate, all taken in the same rounds, so that a table of variants
    compares ratios measured at the same moments (as `compare_latency` does for two)."""
    if len(models_to_compare) < 2:
        raise ValueError(
            f"compare_in_turn needs a baseline and at least one candidate; got {len(models_to_compare)}."
        )
    latency, samples = _time_in_turn(
        models_to_compare, inputs, batch_size, threads, warmup, runs, spinning, block
    )
    base, *candidates = list(models_to_compare)
    out = {}
    for cand in candidates:
        low, high = bootstrap_ratio_interval(samples[base], samples[cand], confidence=confidence)
        out[cand] = LatencyComparison(
            baseline=base,
            candidate=cand,
            latency={base: latency[base], cand: latency[cand]},
            speedup=latency[base].median_ms / latency[cand].median_ms,
            speedup_low=low,
            speedup_high=high,
            confidence=confidence,
        )
    return out
