"""Scoring a quantized classifier against its fp32 model on a test set: one result per variant.

Lessons 03 and 03b quantize the ResNet18 many ways and ask the same questions of each file: how
accurate is it, how often does it pick fp32's class, how large is it, and (for some) how fast at
one batch size, timed in turn with fp32. The quantizer calls stay in the lesson; this module only
does the bookkeeping around them.

    TestSet   the test inputs, their labels and the fp32 model's logits on them (computed once)
    score     one variant's parity with fp32, its size and, when asked, its speed
    Scored    what `score` returns: `.row(...)` gives table cells, `.parity_on(n)` a paired subset
    saturated_share   the share of real activation values outside the ranges an INT8 file stores
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import measure
from .units import megabytes

# The columns `Scored.row` knows, in the order a table shows them.
COLUMNS = ("variant", "MB", "size", "accuracy", "Δ points", "agreement", "speed b64", "calibration s")


@dataclass
class TestSet:
    """Test inputs, labels and the fp32 model's logits on them: what every variant is scored against."""

    fp32: Path
    x: np.ndarray
    labels: np.ndarray
    fp32_logits: np.ndarray
    threads: int
    input_name: str = "input"

    @classmethod
    def of(
        cls, fp32: str | Path, x: np.ndarray, labels: np.ndarray, threads: int = 2, input_name: str = "input"
    ) -> TestSet:
        """Run the fp32 model once on `x` (preprocessed inputs, one per row of `labels`)."""
        if len(x) != len(labels):
            raise ValueError(f"Got {len(x)} inputs and {len(labels)} labels; pass one label per input.")
        logits = measure.logits(fp32, {input_name: x}, threads=threads)
        return cls(Path(fp32), x, np.asarray(labels), logits, threads, input_name)

    def __len__(self) -> int:
        return len(self.labels)


@dataclass
class Scored:
    """One variant on a test set: its parity with fp32, its size, its speed if timed."""

    name: str
    path: Path
    parity: measure.Parity
    logits: np.ndarray = field(repr=False)
    size_ratio: float  # file bytes / fp32 file bytes
    latency: measure.LatencyComparison | None = None
    seconds: float | None = None  # how long quantizing it took, when given
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def speedup(self) -> float | None:
        """fp32's median time / this variant's, at the timed batch; None when not timed."""
        return self.latency.speedup if self.latency else None

    @property
    def megabytes(self) -> float:
        return megabytes(self.path)

    def cell(self, column: str) -> str:
        """One table cell, by the column names in `COLUMNS`."""
        p = self.parity
        if column == "variant":
            return self.name
        if column == "MB":
            return f"{self.megabytes:.1f}"
        if column == "size":
            return f"{self.size_ratio:.3f}"
        if column == "accuracy":
            return f"{p.candidate_accuracy:.2%}"
        if column == "Δ points":
            return f"{100 * (p.candidate_accuracy - p.reference_accuracy):+.2f}"
        if column == "agreement":
            return p.agreement_text()
        if column == "speed b64":
            c = self.latency
            return str(c) if c else ""
        if column == "calibration s":
            return f"{self.seconds:.1f}" if self.seconds is not None else ""
        raise ValueError(f"Unknown column {column!r}; choose from {', '.join(COLUMNS)}.")

    def row(self, *columns: str) -> dict[str, str]:
        """A table row with the named columns (default: every column that has a value)."""
        if not columns:
            columns = tuple(c for c in COLUMNS if self.cell(c) != "")
        return {c: self.cell(c) for c in columns}

    def parity_on(self, test: TestSet, n: int) -> measure.Parity:
        """The parity on the first `n` test inputs only, to pair with a variant scored on those."""
        return measure.parity(test.fp32_logits[:n], self.logits[:n], test.labels[:n])


def score(
    name: str,
    path: str | Path,
    test: TestSet,
    *,
    n: int | None = None,
    timed_batch: int | None = None,
    runs: int = 15,
    seconds: float | None = None,
    **options: Any,
) -> Scored:
    """Score the classifier at `path` on the first `n` inputs of `test` (default: all of them).

    `timed_batch`: also time it against fp32 at that batch size (`measure.compare_latency`, in turn,
    `runs` runs each). `seconds` (how long quantizing took) and `options` (the quantizer settings)
    are kept with the result for the table and the results store."""
    path = Path(path)
    n = len(test) if n is None else n
    if not 0 < n <= len(test):
        raise ValueError(f"n must be between 1 and the test set's {len(test):,} inputs; got {n}.")
    logits = measure.logits(path, {test.input_name: test.x[:n]}, threads=test.threads)
    parity = measure.parity(test.fp32_logits[:n], logits, test.labels[:n])
    latency = None
    if timed_batch is not None:
        feed = {test.input_name: test.x[:timed_batch]}
        latency = measure.compare_latency(
            {"fp32": test.fp32, "int8": path}, feed, threads=test.threads, warmup=3, runs=runs
        )
    ratio = path.stat().st_size / test.fp32.stat().st_size
    return Scored(name, path, parity, logits, ratio, latency, seconds, dict(options))


def time_in_turn(variants: list[Scored], test: TestSet, batch: int = 64, runs: int = 15) -> None:
    """Time fp32 and every variant in the same rounds at `batch` (`measure.compare_in_turn`), and give
    each variant its comparison with fp32: a table of variants then compares ratios taken at the
    same moments, not minutes apart."""
    feed = {test.input_name: test.x[:batch]}
    models = {"fp32": test.fp32, **{v.name: v.path for v in variants}}
    found = measure.compare_in_turn(models, feed, threads=test.threads, warmup=3, runs=runs)
    for v in variants:
        v.latency = found[v.name]


def saturated_share(path: str | Path, values: dict[str, np.ndarray]) -> tuple[dict[str, float], float]:
    """How many real activation values saturate in the INT8 file at `path`: ({tensor: share}, share of
    all values together). `values`: {tensor: array} as `calibration.activation_values` returns them;
    the ranges are those the file stores (`calibration.quantized_ranges`)."""
    from .calibration import quantized_ranges, saturation

    per_tensor = saturation(quantized_ranges(path), values)
    total = sum(values[n].size for n in per_tensor)
    return per_tensor, sum(per_tensor[n] * values[n].size for n in per_tensor) / total if total else 0.0
