"""The same files on a second runtime: OpenVINO beside ONNX Runtime (lesson 05c).

Where the `openvino` package is installed (`runtimes.openvino_or_none()`), the audit compiles the
fp32 file and at most MOST_VARIANTS of its static QDQ files that passed the quality rule on ONNX
Runtime (the recommended one first) with OpenVINO's CPU plugin, at its default precision, checks
their outputs by the same quality rule, and times each in turn with ONNX Runtime's fp32 session
(`measure.compare_latency` takes an `OpenVINORunner`) at the batch the decision reads only: a few
runs, not a second audit. A file OpenVINO refuses to compile on this CPU is a row that says so
(`runtimes.Refusal`); it is compiled once more with f32 pinned, as lesson 05c does. Dynamic and
4-bit files are not run there: OpenVINO's INT8 path reads QDQ files (lesson 05c).

Then one decision across both runtimes (`decide`, the same rule): every ONNX Runtime variant and
every OpenVINO run, each as a speed ratio against ONNX Runtime's fp32, so the ratios compare.

    RuntimeRun  one file compiled (or refused) by OpenVINO, its quality and speed
    pick        the ONNX Runtime variants worth running on OpenVINO
    run_all     compile, judge and time them
    decide_runtime  the runtime and file to ship
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from course_lib import measure
from course_machinery import runtimes

from .decide import Decision, Measured, decide
from .evaluate import collect

MOST_VARIANTS = 2  # static QDQ files run on OpenVINO besides fp32: the time stays a few runs
ORT = "ONNX Runtime"
BASELINE = "ONNX Runtime fp32"


@dataclass
class RuntimeRun:
    """One file on OpenVINO: `of` the variant it is ("fp32" or an ONNX Runtime variant's name),
    the compile `settings` beside the threads, the `precision` the float parts ran in, its quality
    by the audit's rule and its speed against ONNX Runtime's fp32; or the `refusal`."""

    name: str
    runtime: str
    of: str
    path: Path
    file_bytes: int
    settings: dict[str, str] = field(default_factory=dict)
    precision: str | None = None
    quality: Any = None
    speed: dict[int, measure.LatencyComparison] = field(default_factory=dict)
    refusal: runtimes.Refusal | None = None

    def speed_tuple(self, batch: int) -> tuple[float, float, float] | None:
        c = self.speed.get(batch)
        return None if c is None else (c.speedup, c.speedup_low, c.speedup_high)

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "runtime": self.runtime,
            "of": self.of,
            "path": str(self.path),
            "file_bytes": self.file_bytes,
            "settings": self.settings,
            "precision": self.precision,
            "quality": self.quality.to_dict() if self.quality else None,
            "speed": {
                str(b): {k: v for k, v in c.to_dict().items() if k != "latency"}
                | {name: {"median_ms": lat.median_ms, "runs": lat.runs} for name, lat in c.latency.items()}
                for b, c in self.speed.items()
            },
            "refused": None
            if self.refusal is None
            else {
                "said": self.refusal.said,
                "settings": self.refusal.settings_text,
                "text": str(self.refusal),
            },
        }


def pick(results: Sequence[Any], recommended: str | None, batch: int) -> list[Any]:
    """The static QDQ variants that passed on ONNX Runtime, the recommended one first, then the
    fastest at `batch`; at most MOST_VARIANTS."""
    passing = [r for r in results if r.kind == "static" and r.quality is not None and r.quality.passes]

    def key(r: Any) -> tuple[bool, float]:
        speed = r.speed_tuple(batch)
        return (r.name != recommended, -(speed[0] if speed else 0.0))

    return sorted(passing, key=key)[:MOST_VARIANTS]


def run_all(
    openvino: Any,
    fp32: Path,
    fp32_bytes: int,
    variants: Sequence[Any],
    *,
    judge: Any,
    needs: Sequence[str] | None,
    evaluation: Mapping[str, np.ndarray],
    eval_batch: int,
    feed: Mapping[str, np.ndarray],
    batch: int,
    runs: int,
    threads: int | None,
    say: Any = print,
) -> list[RuntimeRun]:
    """fp32 and each of `variants` compiled by OpenVINO with the same threads as ONNX Runtime,
    judged by `judge` (the audit's rule) on the evaluation rows, and timed in turn with ONNX
    Runtime's fp32 at `batch`. A refusal is a row; its file is compiled again with f32 pinned."""
    threads = threads or measure.physical_cores()
    core = openvino.Core()
    runtime = f"OpenVINO {openvino.__version__.split('-')[0]}"
    pending: list[tuple[str, str, Path, int, dict[str, str]]] = [
        ("OpenVINO · fp32 file", "fp32", fp32, fp32_bytes, {}),
        *[(f"OpenVINO · {v.name}", v.name, v.path, v.file_bytes, {}) for v in variants],
    ]
    done: list[RuntimeRun] = []
    while pending:
        name, of, path, size, settings = pending.pop(0)
        row = RuntimeRun(name, runtime, of, path, size, dict(settings))
        done.append(row)
        try:
            compiled = core.compile_model(str(path), "CPU", {"INFERENCE_NUM_THREADS": threads} | settings)
        except RuntimeError as exc:  # refused on this CPU: a row that says so, then f32 pinned
            row.refusal = runtimes.Refusal.from_exception(exc, path, settings, run=name)
            say(f"  {name}: {row.refusal}")
            if settings.get("INFERENCE_PRECISION_HINT") != "f32":
                retry = settings | {"INFERENCE_PRECISION_HINT": "f32"}
                pending.insert(0, (row.refusal.retry_run, of, path, size, retry))
            continue
        runner = runtimes.OpenVINORunner(compiled, threads=threads, name=name)
        row.precision = runtimes.precision_hint(compiled)
        row.quality = judge(collect(runner, evaluation, needs, batch=eval_batch, threads=None))
        row.speed[batch] = measure.compare_latency(
            {BASELINE: fp32, name: runner},
            dict(feed),
            threads=threads,
            runs=runs,
            warmup=max(2, min(10, runs // 5)),
        )
        c = row.speed[batch]
        say(f"  {name} ({row.precision}): {row.quality.text}; batch {batch}: {c} {BASELINE}")
    return done


def decide_runtime(
    results: Sequence[Any], runs: Sequence[RuntimeRun], batch: int, basis: str
) -> tuple[Decision, dict[str, Any] | None]:
    """One decision over both runtimes at `batch` (the audit's rule), and the choice as
    {runtime, name, path, settings}, or None when nothing is clearly faster than ONNX Runtime's fp32."""
    measured, where = [], {}
    for r in results:
        if r.quality is None:
            continue
        name = f"{ORT} · {r.name}"
        measured.append(
            Measured(
                name,
                r.quality.passes,
                r.quality.score,
                r.file_bytes,
                {b: r.speed_tuple(b) for b in r.speed},
                r.quality.advice,
            )
        )
        where[name] = {"runtime": ORT, "variant": r.name, "path": str(r.path), "settings": {}}
    for run in runs:
        if run.refusal is not None or run.quality is None:
            continue
        measured.append(
            Measured(
                run.name,
                run.quality.passes,
                run.quality.score,
                run.file_bytes,
                {b: run.speed_tuple(b) for b in run.speed},
                run.quality.advice,
            )
        )
        where[run.name] = {
            "runtime": run.runtime,
            "variant": run.of,
            "path": str(run.path),
            "settings": run.settings,
        }
    decision = decide(measured, batch, basis=basis)
    for run in runs:
        if run.refusal is not None:
            pinned = run.settings.get("INFERENCE_PRECISION_HINT") == "f32"
            decision.verdicts[run.name] = (
                "refused",
                str(run.refusal).rstrip(".")
                + ("" if pinned else "; compiled again with f32 pinned: the row after it"),
            )
    choice = where.get(decision.recommended) if decision.recommended else None
    return decision, choice
