"""`audit`: the course's method applied to a model someone brings, start to finish.

Read and check the model and its samples; split them; pre-process; build the variants that fit
this model and this CPU; measure each against fp32 (quality, size, peak memory, speed, integer
kernels); debug a static variant that fails and try it once more with its worst layers in float;
decide; write the report. Progress, with an estimate of the time left, as it goes.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import hardware, kernels, measure
from ..nodes import checked_node_names
from . import evaluate, variants
from . import inputs as reading
from .decide import Decision, Measured, decide

SECONDS_PER_COMPARISON = 6.0  # time budget of one fp32-against-variant timing at one batch size
EXCLUDE_LAYERS = 3  # layers a failing static variant keeps in float on its one rerun


@dataclass
class VariantResult:
    """One variant, built and measured (or set aside after building, with `skipped`)."""

    name: str
    kind: str
    lesson: str
    note: str
    path: Path
    file_bytes: int
    build_seconds: float
    coverage: dict[str, Any]
    quality: evaluate.Quality | None = None
    speed: dict[int, measure.LatencyComparison] = field(default_factory=dict)
    memory: measure.Memory | None = None
    sensitivity: variants.Sensitivity | None = None
    excluded: list[str] = field(default_factory=list)

    def speed_tuple(self, batch: int) -> tuple[float, float, float] | None:
        c = self.speed.get(batch)
        return None if c is None else (c.speedup, c.speedup_low, c.speedup_high)

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "kind": self.kind,
            "lesson": self.lesson,
            "note": self.note,
            "path": str(self.path),
            "file_bytes": self.file_bytes,
            "build_seconds": self.build_seconds,
            "coverage": self.coverage,
            "quality": self.quality.to_dict() if self.quality else None,
            "speed": {
                str(b): {k: v for k, v in c.to_dict().items() if k != "latency"}
                | {name: {"median_ms": lat.median_ms, "runs": lat.runs} for name, lat in c.latency.items()}
                for b, c in self.speed.items()
            },
            "peak_memory_bytes": self.memory.increase_bytes if self.memory else None,
            "sensitivity": self.sensitivity.to_dict() if self.sensitivity else None,
            "nodes_to_exclude": self.excluded,
        }


@dataclass
class AuditResult:
    """What `audit` found: every variant measured, those skipped and why, the decision, the files."""

    model: Path
    out: Path
    cpu: str
    batches: list[int]
    split: reading.Split
    mode: str
    rule: str
    notes: list[str]
    shares: variants.WorkShares
    fp32: dict[str, Any]
    variants: list[VariantResult]
    skipped: list[variants.Skipped]
    decision: Decision
    recommended_path: Path | None
    seconds: float
    files: dict[str, Path] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "model": str(self.model),
            "out": str(self.out),
            "cpu": self.cpu,
            "batches": self.batches,
            "split": self.split.to_dict(),
            "mode": self.mode,
            "rule": self.rule,
            "notes": self.notes,
            "work_shares": self.shares.to_dict(),
            "fp32": self.fp32,
            "variants": [v.to_dict() for v in self.variants],
            "skipped": [vars(s) for s in self.skipped],
            "decision": self.decision.to_dict(),
            "recommended_path": str(self.recommended_path) if self.recommended_path else None,
            "seconds": self.seconds,
        }

    def _repr_markdown_(self) -> str:
        from .report import summary_markdown

        return summary_markdown(self)


class _Progress:
    """One bar over the whole audit, in estimated seconds of work, so that tqdm's time left is an ETA."""

    def __init__(self, enabled: bool, model: str):
        from tqdm.auto import tqdm

        self.enabled = enabled
        self.bar = tqdm(
            total=10.0,
            disable=not enabled,
            desc=f"audit {model}",
            bar_format="{desc:<48.48} {percentage:3.0f}%|{bar:20}| {elapsed} elapsed, about {remaining} left",
            dynamic_ncols=True,
        )

    def add(self, estimate: float) -> None:
        self._set_total(self.bar.total + estimate)

    def _set_total(self, total: float) -> None:
        self.bar.total = total
        # In a notebook the bar is an ipywidget whose length tqdm sets once, from the first total;
        # without this it stays full from the first step on while the text says 30 %.
        widget = getattr(self.bar, "container", None)
        if widget is not None:
            widget.children[1].max = total
        self.bar.refresh()

    @contextlib.contextmanager
    def step(self, what: str, estimate: float) -> Iterator[None]:
        self.bar.set_description_str(what)
        try:
            yield
        finally:
            self.advance(estimate)

    def advance(self, estimate: float) -> None:
        if self.bar.n + estimate > self.bar.total:  # an estimate ran short: never past 100 %
            self._set_total(self.bar.n + estimate)
        self.bar.update(estimate)

    def say(self, line: str) -> None:
        if self.enabled:
            self.bar.write(line)

    def close(self, finished: bool) -> None:
        """End the bar: at 100 % when the audit finished (what the estimates left over was never work),
        where it stopped otherwise, which tqdm's notebook bar shows in red."""
        if finished and self.bar.n < self.bar.total:
            self.bar.update(self.bar.total - self.bar.n)
        self.bar.close()


def _slug(name: str) -> str:
    keep = "".join(c if c.isalnum() else "_" for c in name.lower())
    return "_".join(part for part in keep.split("_") if part)


def _size(path: Path) -> int:
    facts = measure.model_facts(path)
    return facts.file_bytes + facts.external_data_bytes


def _coverage(path: Path, folder: Path, threads: int | None) -> dict[str, Any]:
    folder.mkdir(parents=True, exist_ok=True)
    k = kernels.kernels(path, threads=threads, folder=folder)
    return {
        "coverage": k.coverage,
        "integer": k.integer_count,
        "compute": k.compute_count,
        "types": k.types,
        "weight_only": k.weight_only,
        "integer_ops": k.integer,
        "float_ops": k.float_compute,
    }


def audit(
    model: str | Path,
    inputs: Any,
    labels: Any = None,
    batch: int | Sequence[int] = (1, 32),
    out: str | Path | None = None,
    progress: bool = True,
    *,
    threads: int | None = None,
) -> AuditResult:
    """Audit `model` (an .onnx path) on its sample inputs (an .npz path, a dict {input: array} or
    one array for a one-input model), with class `labels` (an .npy path or array) when it is a
    classifier. Times at each of the `batch` sizes; writes variants and reports under `out`
    (default ./audit/<model name>). See the package's docstring for what it does and decides."""
    from . import report

    started = time.perf_counter()
    info = reading.read_model(model)
    samples = reading.read_samples(inputs, info)
    count = len(next(iter(samples.values())))
    output = info.float_outputs[0]
    y = reading.read_labels(labels, count, info, output) if labels is not None else None
    batches, batch_note = evaluate.batches_checked(batch, info.fixed_batch)
    split = reading.split_samples(count)
    out = (Path(out) if out is not None else Path.cwd() / "audit" / info.path.stem).resolve()
    work, built = out / "work", out / "variants"
    for folder in (work, built):
        folder.mkdir(parents=True, exist_ok=True)
    notes = [split.describe()]
    notes += [batch_note] if batch_note else []
    if len(info.outputs) > 1:
        notes.append(f"the model has {len(info.outputs)} outputs; the audit compares {output!r}")
    calibration = reading.rows(samples, split.calibration)
    evaluation = reading.rows(samples, split.evaluation)
    eval_batch = min(max(batches), len(split.evaluation))
    bar = _Progress(progress, info.path.name)
    finished = False
    bar.say(f"Auditing {info.path.name}: {notes[0]}.")
    try:
        with bar.step("pre-processing (quant_pre_process)", 10):
            pre = work / f"{info.path.stem}.pre.onnx"
            pre_note = variants.pre_process(info.path, pre, external_data=info.external_data)
        notes.append(pre_note)
        t0 = time.perf_counter()
        with bar.step("fp32: reference outputs", 5):
            reference = evaluate.outputs(info.path, evaluation, output, batch=eval_batch, threads=threads)
        eval_seconds = time.perf_counter() - t0
        mode = "labels" if y is not None else "fp32"
        quality_of = (
            (lambda cand: evaluate.labelled_quality(reference, cand, y[split.evaluation]))
            if y is not None
            else (lambda cand: evaluate.float_quality(reference, cand))
        )
        sample_shapes = {name: array.shape[1:] for name, array in samples.items()}
        shares = variants.work_shares(pre, sample_shapes)
        plans, skipped = variants.plan_variants(
            shares, saturates=hardware.u8s8_can_saturate(), dot_product=hardware.has_vnni()
        )
        feeds = {b: evaluate.feed_at(evaluation, b) for b in batches}
        with bar.step("fp32: timing a few runs", 2):
            per_run = {b: evaluate.seconds_per_run(info.path, feeds[b], threads) for b in batches}
        runs = {b: evaluate.runs_for(per_run[b], SECONDS_PER_COMPARISON) for b in batches}
        timing = sum(2 * 1.2 * runs[b] * per_run[b] * 1.3 + 0.5 for b in batches)
        calibrate = 2 + 3 * eval_seconds * len(split.calibration) / len(split.evaluation)
        per_variant = 4 + 1.5 * eval_seconds + timing
        bar.add(sum(per_variant + (calibrate if p.kind == "static" else 3) for p in plans) + 4)
        with bar.step("fp32: kernels, peak memory", 2):
            fp32 = {
                "path": str(info.path),
                "file_bytes": _size(info.path),
                "coverage": _coverage(info.path, work / "kernels", threads),
                "peak_memory_bytes": measure.peak_memory(
                    info.path, feeds[max(batches)], max(batches), threads=threads
                ).increase_bytes,
            }
        calibration_batch = variants.CALIBRATION_MOST_ROWS
        if any(p.kind == "static" for p in plans):
            with bar.step("calibration: rows per batch that fit in memory", 1):
                calibration_batch = variants.calibration_batch(
                    pre, calibration, work, external_data=info.external_data
                )
            notes.append(
                f"static variants calibrated {calibration_batch} samples at a time, which keeps what the "
                f"calibrator holds near {variants.ROW_MEMORY / 2**20:.0f} MiB"
            )
        results: list[VariantResult] = []
        queue = list(plans)
        while queue:
            plan = queue.pop(0)
            slug = _slug(plan.name)
            with bar.step(f"{plan.name}: building", calibrate if plan.kind == "static" else 3):
                t0 = time.perf_counter()
                excluded = plan.options.pop("_exclude", None)
                try:
                    path = variants.build(
                        plan,
                        pre,
                        built / f"{info.path.stem}.{slug}.onnx",
                        calibration,
                        external_data=info.external_data,
                        nodes_to_exclude=excluded,
                        calibration_batch=calibration_batch,
                    )
                except Exception as exc:  # noqa: BLE001 - a quantizer's failure is a finding, not a crash
                    skipped.append(
                        variants.Skipped(
                            plan.name,
                            f"the quantizer failed: {type(exc).__name__}: {str(exc)[:200]}",
                            plan.lesson,
                        )
                    )
                    bar.advance(per_variant)
                    continue
                build_seconds = time.perf_counter() - t0
            result = VariantResult(
                plan.name,
                plan.kind,
                plan.lesson,
                plan.note,
                path,
                _size(path),
                build_seconds,
                _coverage(path, work / "kernels", threads),
                excluded=list(excluded or []),
            )
            if plan.name.startswith("static S8S8"):
                u8 = next(
                    (r for r in results if r.name.startswith("static U8S8 per-channel") and not r.excluded),
                    None,
                )
                if u8 is not None and result.coverage["integer"] < u8.coverage["integer"]:
                    skipped.append(
                        variants.Skipped(
                            plan.name,
                            f"built, but only {result.coverage['integer']} of its {result.coverage['compute']} "
                            f"compute ops run integer kernels here (U8S8: {u8.coverage['integer']}): S8S8's "
                            "kernels are not integer on this CPU, so it was not measured",
                            plan.lesson,
                        )
                    )
                    bar.advance(per_variant)
                    continue
            with bar.step(f"{plan.name}: quality on {len(split.evaluation):,} samples", 1.5 * eval_seconds):
                candidate = evaluate.outputs(path, evaluation, output, batch=eval_batch, threads=threads)
                result.quality = quality_of(candidate)
            if plan.kind == "static" and not result.quality.passes and not excluded:
                _debug_and_retry(
                    plan,
                    result,
                    pre,
                    calibration,
                    work,
                    queue,
                    bar,
                    calibrate + per_variant,
                    info.external_data,
                )
            with bar.step(f"{plan.name}: speed against fp32", timing):
                result.speed = evaluate.speed(info.path, path, feeds, runs, name=plan.name, threads=threads)
            with bar.step(f"{plan.name}: peak memory", 4):
                result.memory = measure.peak_memory(path, feeds[max(batches)], max(batches), threads=threads)
            results.append(result)
            bar.say(f"  {plan.name}: {result.quality.text}; {_speed_line(result, batches)}")
        measured = [
            Measured(
                r.name,
                r.quality.passes,
                r.quality.score,
                r.file_bytes,
                {b: r.speed_tuple(b) for b in r.speed},
                r.quality.advice,
            )
            for r in results
        ]
        decision = decide(measured, max(batches))
        recommended = None
        if decision.recommended is not None:
            chosen = next(r for r in results if r.name == decision.recommended)
            recommended = out / f"{info.path.stem}.recommended.onnx"
            shutil.copyfile(chosen.path, recommended)
            for data_file in built.glob(f"{chosen.path.name}.data"):
                shutil.copyfile(data_file, out / data_file.name)
        shutil.rmtree(work / "kernels", ignore_errors=True)
        result = AuditResult(
            info.path,
            out,
            hardware.cpu_summary(),
            batches,
            split,
            mode,
            evaluate.rule_text(mode),
            notes,
            shares,
            fp32,
            results,
            skipped,
            decision,
            recommended,
            time.perf_counter() - started,
        )
        with bar.step("writing the report", 1):
            result.files = report.write(result)
        finished = True
    finally:
        bar.close(finished)
    return result


def _speed_line(result: VariantResult, batches: list[int]) -> str:
    from .decide import ratio_text

    return ", ".join(f"batch {b}: {ratio_text(result.speed_tuple(b))}" for b in batches if b in result.speed)


def _debug_and_retry(plan, result, pre, calibration, work, queue, bar, estimate, external_data) -> None:
    """qdq_loss_debug on a static variant that fails; queue one rerun with its worst layers in float."""
    with bar.step(f"{plan.name}: qdq_loss_debug", 5):
        try:
            result.sensitivity = variants.sensitive_layers(
                pre,
                result.path,
                calibration,
                work,
                name=plan.name,
                keep=EXCLUDE_LAYERS,
                external_data=external_data,
            )
        except Exception as exc:  # noqa: BLE001 - the debugger's failure is reported, the audit goes on
            result.note = (
                result.note + "; " if result.note else ""
            ) + f"qdq_loss_debug failed: {type(exc).__name__}"
            return
    proposal = result.sensitivity.proposal
    if not proposal:
        return
    names = checked_node_names(pre, proposal)
    options = {**plan.options, "_exclude": names}
    queue.insert(
        0,
        variants.Plan(
            f"{plan.name}, {len(names)} layers in float",
            plan.kind,
            options,
            "04_parity.ipynb",
            f"nodes_to_exclude from qdq_loss_debug (ranked by {result.sensitivity.ranked_by}): {', '.join(names)}",
        ),
    )
    bar.add(estimate)
