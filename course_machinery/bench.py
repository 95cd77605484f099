"""The course benchmark: every variant, one run, ratios from interleaved timings.

`python -m course_lib bench` builds (or rebuilds, in seconds) the INT8 variants of the
ResNet18 and the text encoder that the lessons made, and times each against its fp32
baseline with `measure.compare_latency` (turns in blocks, the same feed, fixed threads): a
ratio and its interval always come from the same runs as the medians printed beside it.
ONNX Runtime is also set against PyTorch on the same weights: fp32 against fp32, and
ONNX Runtime's INT8 against PyTorch's dynamic INT8 (`torch.ao`). Where the `openvino` package is
installed, lesson 05's four OpenVINO runs of the ResNet18 (the fp32 file with f32 pinned and with
OpenVINO's default precision, the U8S8 and S8S8 per-channel QDQ files) are each timed in turn
against ONNX Runtime's fp32 too; without it, one line says they were skipped and how to install it.
A run OpenVINO refuses to compile on this CPU (`runtimes.Refusal`) becomes a row that says so, and
its file is timed again with f32 pinned, under its own name: one refusal never stops the benchmark.

A benchmark, not a test: it prints figures and writes them (JSON and a plot) under build/bench.
"""

from __future__ import annotations

import json
import logging
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from course_lib import data, measure
from course_lib.units import megabytes
from course_machinery import models, results, runtimes, text_encoder
from course_machinery.variants import (
    BEST_RESNET,
    RESNET_VARIANTS,
    build_resnet_variants,
    production_resnet_variant,
)

from . import keys
from .paths import BUILD

# The table's name for each model (the results store uses the models' own names).
LABELS = {models.RESNET18: "ResNet18", text_encoder.NAME: "MiniLM-L6"}
FP32 = keys.FP32_BASELINE  # "onnxruntime fp32": the baseline every INT8 variant is timed against
EQUAL_SPEED = "as fast as the baseline"  # the plot's line at 1x (the baseline: fp32, or PyTorch's)

# OpenVINO's runs of the ResNet18, named as lesson 05 names them: the file each runs ("fp32" or a
# variant of variants.RESNET_VARIANTS) and its compile settings beside the threads. By default
# OpenVINO computes the float layers in bf16 on x86 CPUs with AVX512_BF16 or AMX (f16 on ARM with
# FP16 arithmetic); the pinned run keeps f32, the like-for-like fp32 comparison.
OPENVINO_RUNS: dict[str, tuple[str, dict[str, str]]] = {
    "OpenVINO fp32, f32 pinned": ("fp32", {"INFERENCE_PRECISION_HINT": "f32"}),
    "OpenVINO fp32, default": ("fp32", {}),
    "OpenVINO U8S8 per-channel": ("static U8S8 per-channel", {}),
    "OpenVINO S8S8 per-channel": ("static S8S8 per-channel", {}),
}
OPENVINO_SKIPPED = "OpenVINO rows skipped: the openvino package is not installed. Install it with: "


@dataclass
class BenchConfig:
    """What to measure. The defaults are the full benchmark; `QUICK` is for tests."""

    batch_sizes: tuple[int, ...] = (1, 64)
    runs: int = 20
    warmup: int = 3
    threads: int | None = None  # None: physical cores
    eval_images: int = 10_000  # test images for accuracy and agreement
    variants: tuple[str, ...] = tuple(RESNET_VARIANTS)
    text_encoder: bool = True
    text_batches: tuple[int, ...] = (1, 16)
    text_sequence: int = 128
    text_runs: int = 8
    pytorch: bool = True
    openvino: bool = True  # OPENVINO_RUNS, where the openvino package is installed


QUICK = BenchConfig(
    batch_sizes=(1, 8),
    runs=3,
    warmup=1,
    eval_images=200,
    variants=("dynamic (QUInt8)", BEST_RESNET),
    text_encoder=False,
    pytorch=True,
)


@dataclass
class Row:
    """One comparison: `candidate` against `baseline`, timed in turn in the same call; or a run the
    candidate's runtime refused to compile (`refused` says what it said; no batch and no figures)."""

    model: str
    batch: int | None  # None: a refused run, timed at no batch size
    baseline: str
    candidate: str
    baseline_ms: float | None
    candidate_ms: float | None
    candidate_p10_ms: float | None
    candidate_p90_ms: float | None
    speedup: float | None  # baseline median / candidate median
    speedup_low: float | None
    speedup_high: float | None
    runs: int | None
    accuracy: float | None = None  # the candidate's (ResNet18: test accuracy; text encoder: worst cosine)
    agreement: float | None = None
    size_mb: float | None = None
    sequence: int | None = None  # the text encoder's sequence length
    runtime: str | None = None  # the candidate's runtime where it is not ONNX Runtime: "OpenVINO 2026.4.1-…"
    precision: str | None = None  # OpenVINO's INFERENCE_PRECISION_HINT: what its float layers ran in
    refused: str | None = None  # the runtime's refusal (`runtimes.Refusal`, as a line) where it refused

    @property
    def timed(self) -> bool:
        """False for a refused run: a row with no figures."""
        return self.refused is None

    @property
    def label(self) -> str:
        """The model as the table names it: "ResNet18", "MiniLM-L6 (seq 128)"."""
        name = LABELS.get(self.model, self.model)
        return name if self.sequence is None else f"{name} (seq {self.sequence})"


@dataclass
class BenchResult:
    config: dict
    environment: dict
    rows: list[Row] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return {
            "config": self.config,
            "environment": self.environment,
            "seconds": self.seconds,
            "rows": [asdict(r) for r in self.rows],
        }


def _row(model: str, batch: int, comparison: measure.LatencyComparison, **extra) -> Row:
    base, cand = comparison.latency[comparison.baseline], comparison.latency[comparison.candidate]
    return Row(
        model=model,
        batch=batch,
        baseline=comparison.baseline,
        candidate=comparison.candidate,
        baseline_ms=base.median_ms,
        candidate_ms=cand.median_ms,
        candidate_p10_ms=cand.p10_ms,
        candidate_p90_ms=cand.p90_ms,
        speedup=comparison.speedup,
        speedup_low=comparison.speedup_low,
        speedup_high=comparison.speedup_high,
        runs=cand.runs,
        **extra,
    )


# A row's timed figures: None in the row of a refused run.
TIMED = (
    "baseline_ms",
    "candidate_ms",
    "candidate_p10_ms",
    "candidate_p90_ms",
    "speedup",
    "speedup_low",
    "speedup_high",
    "runs",
)


def _refused_row(model: str, refusal: runtimes.Refusal, baseline: str, **extra) -> Row:
    """The row of a run the candidate's runtime would not compile: its name and what the runtime said."""
    candidate = refusal.run or refusal.file
    return Row(model, None, baseline, candidate, **dict.fromkeys(TIMED), refused=str(refusal), **extra)


def run(config: BenchConfig | None = None, out_dir: Path | None = None, log: Callable[[str], None] = print):
    """Build, time and evaluate every variant; write bench.json and bench.png; return the result.

    The quantizer's warnings and its "please pre-process" log lines are silenced while it runs,
    and the caller's warning filters and log level are restored afterwards.
    """
    root = logging.getLogger()
    level = root.level
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        root.setLevel(logging.ERROR)
        try:
            return _run(config or BenchConfig(), out_dir, log)
        finally:
            root.setLevel(level)


def _run(config: BenchConfig, out_dir: Path | None, log: Callable[[str], None]) -> BenchResult:
    out_dir = Path(out_dir or BUILD / "bench")
    start = time.perf_counter()
    result = BenchResult(config=asdict(config), environment=results.environment_fingerprint())
    t = config.threads

    openvino = runtimes.openvino_or_none() if config.openvino else None
    if config.openvino and openvino is None:
        log(OPENVINO_SKIPPED + runtimes.INSTALL_HINT)
    ov_files = [f for f, _ in OPENVINO_RUNS.values() if f != "fp32"] if openvino is not None else []

    log("ResNet18 (Fashion-MNIST): building variants …")
    names = tuple(dict.fromkeys((*config.variants, *ov_files)))  # OpenVINO's files too, built once
    paths = build_resnet_variants(out_dir / "models", names, log=log)
    images, labels = data.load_split("test")
    x_all = data.preprocess(images[: config.eval_images])
    y = labels[: config.eval_images]
    ref = measure.logits(paths["fp32"], x_all, threads=t)
    fp32_mb = megabytes(paths["fp32"])
    for name in config.variants:
        p = measure.parity(ref, measure.logits(paths[name], x_all, threads=t), y)
        for batch in config.batch_sizes:
            c = measure.compare_latency(
                {FP32: paths["fp32"], name: paths[name]},
                {"input": x_all[:batch]},
                threads=t,
                warmup=config.warmup,
                runs=config.runs,
            )
            result.rows.append(
                _row(
                    models.RESNET18,
                    batch,
                    c,
                    accuracy=p.candidate_accuracy,
                    agreement=p.agreement,
                    size_mb=megabytes(paths[name]),
                )
            )
            log(f"  {name:<38} batch {batch:>3}: {c.speedup:.2f}x fp32")
    result.config["resnet_fp32"] = {"accuracy": float((ref.argmax(1) == y).mean()), "size_mb": fp32_mb}
    result.config["openvino_version"] = None if openvino is None else openvino.__version__
    if openvino is not None:
        result.rows += _bench_openvino(openvino, config, paths, x_all, y, ref, log)

    if config.pytorch:
        import torch

        trained = models.load_model(models.RESNET18, train=False, log=log)
        threads = t or measure.physical_cores()
        torch_fp32 = measure.TorchRunner(
            trained.module.eval(), ["input"], threads=threads, name="pytorch fp32"
        )
        torch_int8 = measure.TorchRunner(
            torch.ao.quantization.quantize_dynamic(
                trained.module.eval(), {torch.nn.Linear}, dtype=torch.qint8
            ),
            ["input"],
            threads=threads,
            name="pytorch dynamic int8",
        )
        production = production_resnet_variant()
        best = (
            production
            if production in paths
            else BEST_RESNET
            if BEST_RESNET in paths
            else config.variants[-1]
        )
        for batch in config.batch_sizes:
            feed = {"input": x_all[:batch]}
            for runner, onnx_name in ((torch_fp32, "fp32"), (torch_int8, best)):
                c = measure.compare_latency(
                    {runner.name: runner, f"onnxruntime {onnx_name}": paths[onnx_name]},
                    feed,
                    threads=t,
                    warmup=config.warmup,
                    runs=config.runs,
                )
                result.rows.append(_row(models.RESNET18, batch, c))
                log(f"  onnxruntime {onnx_name} vs {runner.name}, batch {batch}: {c.speedup:.2f}x")

    if config.text_encoder:
        result.rows += _bench_text_encoder(config, out_dir / "models", log)

    result.seconds = time.perf_counter() - start
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "bench.json").write_text(json.dumps(result.to_dict(), indent=2))
    plot(result, out_dir / "bench.png")
    return result


def _bench_openvino(openvino, config: BenchConfig, paths: dict, x_all, y, ref, log) -> list[Row]:
    """OPENVINO_RUNS, each compiled with the bench's threads and timed in turn against ONNX Runtime's
    fp32 session at every batch size; accuracy and agreement on the same images as the variants.

    A run OpenVINO refuses to compile gives one row that says so (`Row.refused`), and its file is
    compiled again with f32 pinned (unless it was pinned already), named by `Refusal.retry_run`."""
    threads = config.threads or measure.physical_cores()  # both runtimes: the same threads
    core = openvino.Core()
    runtime = f"OpenVINO {openvino.__version__}"
    log(f"{short_runtime(runtime)} (CPU plugin): the fp32 and QDQ files, each against {FP32} …")
    rows = []
    pending = list(OPENVINO_RUNS.items())
    while pending:
        name, (file, extra) = pending.pop(0)
        try:
            compiled = core.compile_model(str(paths[file]), "CPU", {"INFERENCE_NUM_THREADS": threads} | extra)
        except RuntimeError as exc:  # refused on this CPU: a row that says so, then f32 pinned
            refusal = runtimes.Refusal.from_exception(exc, paths[file], extra, run=name)
            rows.append(_refused_row(models.RESNET18, refusal, FP32, runtime=runtime))
            log(f"  {name:<38} refused: {refusal.said}")
            if extra.get("INFERENCE_PRECISION_HINT") != "f32":
                pending.insert(0, (refusal.retry_run, (file, extra | {"INFERENCE_PRECISION_HINT": "f32"})))
            continue
        runner = runtimes.OpenVINORunner(compiled, threads=threads, name=name)
        precision = runtimes.precision_hint(compiled)
        p = measure.parity(ref, measure.logits(runner, x_all), y)
        for batch in config.batch_sizes:
            c = measure.compare_latency(
                {FP32: paths["fp32"], name: runner},
                {"input": x_all[:batch]},
                threads=threads,
                warmup=config.warmup,
                runs=config.runs,
            )
            rows.append(
                _row(
                    models.RESNET18,
                    batch,
                    c,
                    accuracy=p.candidate_accuracy,
                    agreement=p.agreement,
                    size_mb=megabytes(paths[file]),
                    runtime=runtime,
                    precision=precision,
                )
            )
            log(f"  {name + f' ({precision})':<38} batch {batch:>3}: {c.speedup:.2f}x fp32")
    return rows


def short_runtime(runtime: str) -> str:
    """A runtime and its version without the build suffix: "OpenVINO 2026.4.1-22982-e21…" -> "OpenVINO 2026.4.1"."""
    name, _, version = runtime.rpartition(" ")
    return f"{name} {version.split('-')[0]}" if name else runtime


@contextmanager
def mha_fastpath(enabled: bool) -> Iterator[None]:
    """PyTorch's MultiheadAttention fast path (its fused inference kernels) set to `enabled` inside
    the block only. The setting is global to the process, so the previous value is put back on
    the way out, also after an exception: timing PyTorch must not change a notebook's PyTorch."""
    import torch

    before = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(enabled)
    try:
        yield
    finally:
        torch.backends.mha.set_fastpath_enabled(before)


def _bench_text_encoder(config: BenchConfig, directory: Path, log: Callable[[str], None]) -> list[Row]:
    import onnx
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    log("all-MiniLM-L6-v2: dynamic INT8 against the optimized fp32 graph …")
    paths = models.get(text_encoder.NAME, log=log).onnx_files
    int8 = directory / "text_encoder.int8.per_channel.onnx"
    quantize_dynamic(
        paths["optimized"],
        int8,
        weight_type=QuantType.QInt8,
        per_channel=True,
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )
    feed = text_encoder.encode(
        text_encoder.load_sentences(max(64, max(config.text_batches))), max_length=config.text_sequence
    )
    ref = text_encoder.onnx_embed(paths["optimized"], feed)
    cos_min = float((ref * text_encoder.onnx_embed(int8, feed)).sum(1).min())
    rows = []
    t = config.threads
    threads = t or measure.physical_cores()
    torch_fp32 = text_encoder.load_torch_model()
    torch_int8 = torch.ao.quantization.quantize_dynamic(torch_fp32, {torch.nn.Linear}, dtype=torch.qint8)
    runners = {
        "fp32": measure.TorchRunner(
            torch_fp32, text_encoder.INPUT_NAMES, threads=threads, name="pytorch fp32"
        ),
        "int8": measure.TorchRunner(
            torch_int8, text_encoder.INPUT_NAMES, threads=threads, name="pytorch dynamic int8"
        ),
    }
    seq = config.text_sequence
    for batch in config.text_batches:
        batch_feed = {k: v[:batch] for k, v in feed.items()}
        c = measure.compare_latency(
            {f"{FP32} (optimized)": paths["optimized"], "dynamic int8 per-channel": int8},
            batch_feed,
            threads=t,
            warmup=config.warmup,
            runs=config.text_runs,
        )
        rows.append(
            _row(text_encoder.NAME, batch, c, accuracy=cos_min, size_mb=megabytes(int8), sequence=seq)
        )
        log(f"  dynamic int8 per-channel, batch {batch}: {c.speedup:.2f}x fp32")
        if config.pytorch:
            for kind, onnx_path in (("fp32", paths["optimized"]), ("int8", int8)):
                with mha_fastpath(False):  # PyTorch timed on its plain attention kernels
                    c = measure.compare_latency(
                        {runners[kind].name: runners[kind], f"onnxruntime {kind}": onnx_path},
                        batch_feed,
                        threads=t,
                        warmup=config.warmup,
                        runs=config.text_runs,
                    )
                rows.append(_row(text_encoder.NAME, batch, c, sequence=seq))
                log(f"  onnxruntime {kind} vs {runners[kind].name}, batch {batch}: {c.speedup:.2f}x")
    return rows


def table(result: BenchResult) -> str:
    """The result as a fixed-width text table, one line per comparison (a refused run: one line that
    says what the runtime said). The candidate's column widens for a longer name (an f32-pinned retry)."""
    wide = max([38, *(len(r.candidate) for r in result.rows)])
    head = (
        f"{'model':<20} {'batch':>5}  {'candidate':<{wide}} {'baseline':<30} {'base ms':>8} {'cand ms':>8} "
        f"{'p10-p90 ms':>15} {'ratio':>6} {'interval':>11} {'acc/cos':>7} {'agree':>7} {'MB':>6} "
        f"{'precision':>9}"
    )
    lines = [head, "-" * len(head)]
    for r in result.rows:
        if not r.timed:
            lines.append(
                f"{r.label:<20} {'':>5}  {r.candidate:<{wide}} {r.baseline:<30} refused: {r.refused}"
            )
            continue
        lines.append(
            f"{r.label:<20} {r.batch:>5}  {r.candidate:<{wide}} {r.baseline:<30} {r.baseline_ms:>8.2f} "
            f"{r.candidate_ms:>8.2f} {f'{r.candidate_p10_ms:.2f}-{r.candidate_p90_ms:.2f}':>15} "
            f"{r.speedup:>5.2f}x {f'{r.speedup_low:.2f}-{r.speedup_high:.2f}':>11} "
            f"{'' if r.accuracy is None else f'{r.accuracy:.4f}':>7} "
            f"{'' if r.agreement is None else f'{r.agreement:.2%}':>7} "
            f"{'' if r.size_mb is None else f'{r.size_mb:.1f}':>6} {r.precision or '':>9}"
        )
    lines.append(
        "ratio = baseline median / candidate median (above 1: the candidate is faster), from the same "
        "interleaved runs; interval: 90% paired bootstrap."
    )
    ov = sorted({short_runtime(r.runtime) for r in result.rows if r.runtime})
    if ov:
        refused = (
            " refused: OpenVINO would not compile that file with those settings on this CPU; the same file "
            "was then timed with f32 pinned, in the row named after it (a pin can cost more than the float layers: lesson 05, section 7)."
            if any(not r.timed for r in result.rows)
            else ""
        )
        lines.append(
            f"OpenVINO rows: {', '.join(ov)}, timed in turn with ONNX Runtime's fp32 session; precision: what "
            "OpenVINO computed the float layers in (INFERENCE_PRECISION_HINT; by default bf16 on CPUs with "
            f"AVX512_BF16 or AMX).{refused}"
        )
    return "\n".join(lines)


def figure(result: BenchResult):
    """A horizontal bar per comparison from 1x to its ratio, with its interval, on a base-2 log
    axis (0.125x ... 8x) with the line of equal speed: a variant 7x slower is as long a bar as one
    7x faster."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    from .plots import ratio_axis

    rows = [r for r in result.rows if r.timed]  # a refused run has no bar: the table says what happened
    fig, ax = plt.subplots(figsize=(11, 0.32 * len(rows) + 1.4))
    y = np.arange(len(rows))
    ratios = np.array([r.speedup for r in rows])
    err = np.array([[r.speedup - r.speedup_low for r in rows], [r.speedup_high - r.speedup for r in rows]])
    colors = ["tab:green" if v >= 1 else "tab:red" for v in ratios]
    ax.barh(y, ratios - 1, left=1, xerr=err, color=colors, alpha=0.8)  # from 1x to the ratio
    ratio_axis(
        ax, [*ratios, *(r.speedup_low for r in rows), *(r.speedup_high for r in rows)], label=EQUAL_SPEED
    )
    ax.set_yticks(y, [f"{r.label}, b{r.batch}: {_candidate(r)} vs {r.baseline}" for r in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("baseline time / candidate time (log scale; right of 1x: the candidate is faster)")
    fig.tight_layout()
    return fig


def _candidate(row: Row) -> str:
    """The candidate as the plot names it: an OpenVINO run with its precision, "OpenVINO fp32, default (bf16)"."""
    return row.candidate if row.precision is None else f"{row.candidate} ({row.precision})"


def plot(result: BenchResult, path: Path) -> Path:
    """Save `figure(result)` as a PNG at `path`."""
    import matplotlib.pyplot as plt

    fig = figure(result)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def record_results(result: BenchResult) -> None:
    """Put each comparison into the results store, where the course report reads its ratios. A
    refused run has no figures to store: the table and bench.json keep it."""
    for row in (r for r in result.rows if r.timed):
        results.record(
            lesson=keys.BENCH,
            model=row.model,
            variant=f"{row.candidate} vs {row.baseline}, batch {row.batch}"
            + ("" if row.sequence is None else f", seq {row.sequence}"),
            metrics={
                "speedup": row.speedup,
                "speedup_low": row.speedup_low,
                "speedup_high": row.speedup_high,
                "accuracy": row.accuracy,
                "agreement": row.agreement,
            },
            options={"batch": row.batch}
            | ({} if row.runtime is None else {"runtime": row.runtime, "precision": row.precision}),
        )
