"""`audit`: the course's method applied to a model someone brings, start to finish.

Read and check the model and its samples; split them; pre-process; build the variants that fit
this model and this CPU; measure each against fp32 (quality by the audit's rule, size, peak memory,
speed, integer kernels); debug a static variant that fails and try it once more with its worst
layers in float; decide at the batch served (or the largest timed); where OpenVINO is installed, run
the fp32 file and the best static files there too and decide across both runtimes; write the
report, with the Python call that rebuilds the recommended file. Progress, with an estimate of the
time left, as it goes.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from course_lib import kernels, measure
from course_lib.nodes import checked_node_names
from course_machinery import hardware

from . import candidates, evaluate, second_runtime
from . import inputs as reading
from .decide import Measured, decide
from .findings import AuditResult, VariantResult

SECONDS_PER_COMPARISON = 6.0  # time budget of one fp32-against-variant timing at one batch size
EXCLUDE_LAYERS = 3  # layers a failing static variant keeps in float on its one rerun


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
    serve_batch: int | None = None,
    output: str | Sequence[str] | None = None,
    metric: Callable[..., Any] | str | None = None,
    metric_tolerance: float = evaluate.METRIC_TOLERANCE,
    openvino: bool | None = None,
) -> AuditResult:
    """Audit `model` (an .onnx path) on its sample inputs (an .npz path, a dict {input: array} or
    one array for a one-input model), with class `labels` (an .npy path or array) when it is a
    classifier. Times at each of the `batch` sizes; decides at `serve_batch`, the batch you serve
    (added to those timed), else at the largest. Writes variants and reports under `out` (default
    ./audit/<model name>).

    The quality rule reads `output` (a float output's name, several, or "all": each must pass;
    default the first float output), and masks padded positions where an attention-mask input says
    which they are. `metric` (a function or "module:function", see `evaluate`'s docstring for how it
    is called) replaces it with your task's own measure, within `metric_tolerance` of fp32's.
    `openvino`: None runs the second runtime where it is installed, False never, True requires it.
    See the package's docstring for what it does and decides."""
    from . import summary

    started = time.perf_counter()
    info = reading.read_model(model)
    samples = reading.read_samples(inputs, info)
    count = len(next(iter(samples.values())))
    compared = evaluate.choose_outputs(info, output)
    if labels is not None and len(compared) > 1:
        raise reading.AuditError(
            f"Expected one output of class scores to judge against the labels; output={output!r} names "
            f"{len(compared)} ({', '.join(compared)}). Name the classifier's scores (output='{compared[0]}'), or "
            "leave out the labels to compare every output with fp32.",
            expected="one output",
            found=compared,
        )
    y = reading.read_labels(labels, count, info, compared[0]) if labels is not None else None
    user_metric = evaluate.load_metric(metric, metric_tolerance)
    ov = _openvino_wanted(openvino)
    batches, batch_note = evaluate.batches_checked(batch, info.fixed_batch)
    batches, decision_batch, basis, serve_note = evaluate.serve_batch_checked(
        serve_batch, batches, info.fixed_batch
    )
    split = reading.split_samples(count)
    out = (Path(out) if out is not None else Path.cwd() / "audit" / info.path.stem).resolve()
    work, built = out / "work", out / "variants"
    for folder in (work, built):
        folder.mkdir(parents=True, exist_ok=True)
    notes = [split.describe()]
    notes += [n for n in (batch_note, serve_note) if n]
    if len(info.float_outputs) > 1 and len(compared) < len(info.float_outputs):
        notes.append(
            f"the model has {len(info.float_outputs)} float outputs; the audit compares {', '.join(map(repr, compared))} "
            "(choose with output= / --output NAME, or 'all' to judge each)"
        )
    calibration = reading.rows(samples, split.calibration)
    evaluation = reading.rows(samples, split.evaluation)
    eval_batch = min(max(batches), len(split.evaluation))
    bar = _Progress(progress, info.path.name)
    finished = False
    bar.say(f"Auditing {info.path.name}: {notes[0]}.")
    try:
        with bar.step("pre-processing (quant_pre_process)", 10):
            pre = work / f"{info.path.stem}.pre.onnx"
            pre_done = candidates.pre_process(info.path, pre, external_data=info.external_data)
        notes.append(pre_done.note)
        t0 = time.perf_counter()
        needs = None if user_metric is not None else compared
        with bar.step("fp32: reference outputs", 5):
            reference = evaluate.collect(info.path, evaluation, needs, batch=eval_batch, threads=threads)
        eval_seconds = time.perf_counter() - t0
        masking = evaluate.find_mask(info, evaluation, compared, {n: reference[n].shape for n in compared})
        rule = evaluate.Rule(
            "metric" if user_metric is not None else "labels" if y is not None else "fp32",
            compared,
            reference,
            evaluation,
            labels=y[split.evaluation] if y is not None else None,
            metric=user_metric,
            masking=masking,
        )
        notes += masking.notes
        sample_shapes = {name: array.shape[1:] for name, array in samples.items()}
        shares = candidates.work_shares(pre, sample_shapes)
        products, unnamed = candidates.activation_matmuls(pre)
        plans, skipped = candidates.plan_variants(
            shares,
            saturates=hardware.u8s8_can_saturate(),
            dot_product=hardware.has_vnni(),
            activation_products=products,
            unnamed_products=unnamed,
        )
        if masking.mask and any(p.kind == "static" for p in plans):
            notes.append(
                f"padded positions do enter calibration: the calibrator records every position's values, "
                f"{masking.mask!r} or not, so static ranges also cover what the model computes for padding"
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
        calibration_batch = candidates.CALIBRATION_MOST_ROWS
        if any(p.kind == "static" for p in plans):
            with bar.step("calibration: rows per batch that fit in memory", 1):
                calibration_batch = candidates.calibration_batch(
                    pre, calibration, work, external_data=info.external_data
                )
            notes.append(
                f"static variants calibrated {calibration_batch} samples at a time, which keeps what the "
                f"calibrator holds near {candidates.ROW_MEMORY / 2**20:.0f} MiB"
            )
        reader = {
            "samples": len(split.calibration),
            "rows": f"split_samples({count}, seed={split.seed}).calibration",
            "description": (
                f"the audit's calibration reader, course_machinery.audit.candidates.FeedReader(rows, "
                f"batch={calibration_batch}), over the {len(split.calibration)} calibration samples: "
                f"rows = {{name: array[split.calibration]}} for each input's sample array, "
                f"split = course_machinery.audit.split_samples({count}, seed={split.seed})"
            ),
        }
        results: list[VariantResult] = []
        queue = list(plans)
        while queue:
            plan = queue.pop(0)
            slug = _slug(plan.name)
            with bar.step(f"{plan.name}: building", calibrate if plan.kind == "static" else 3):
                t0 = time.perf_counter()
                excluded = plan.options.pop("_exclude", None)
                recipe = candidates.recipe_for(
                    plan,
                    external_data=info.external_data,
                    nodes_to_exclude=excluded,
                    calibration_batch=calibration_batch,
                    reader=reader,
                )
                try:
                    path = recipe.run(pre, built / f"{info.path.stem}.{slug}.onnx", calibration)
                except Exception as exc:  # noqa: BLE001 - a quantizer's failure is a finding, not a crash
                    skipped.append(
                        candidates.Skipped(
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
                recipe=recipe,
                keep_float=list(plan.keep_float),
                keep_float_why=plan.keep_float_why,
            )
            if plan.name.startswith("static S8S8"):
                u8 = next(
                    (r for r in results if r.name.startswith("static U8S8 per-channel") and not r.excluded),
                    None,
                )
                if u8 is not None and result.coverage["integer"] < u8.coverage["integer"]:
                    skipped.append(
                        candidates.Skipped(
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
                candidate = evaluate.collect(path, evaluation, rule.needs, batch=eval_batch, threads=threads)
                result.quality = rule.judge(candidate)
                del candidate
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
        decision = decide(measured, decision_batch, basis=basis)
        runtime_runs: list[second_runtime.RuntimeRun] = []
        runtime_decision, runtime_choice = None, None
        if ov is None:
            runtime_note = (
                "OpenVINO was not run: "
                + (
                    "switched off (openvino=False, --runtimes onnxruntime)"
                    if openvino is False
                    else "the openvino package is not installed"
                )
                + " (lesson 05c compares the two runtimes)"
            )
        else:
            picked = second_runtime.pick(results, decision.recommended, decision_batch)
            estimate = (1 + len(picked)) * (3 + 1.5 * eval_seconds + timing / len(batches))
            bar.add(estimate)
            with bar.step(f"OpenVINO: fp32 and {len(picked)} static file(s)", estimate):
                runtime_runs = second_runtime.run_all(
                    ov,
                    info.path,
                    fp32["file_bytes"],
                    picked,
                    judge=rule.judge,
                    needs=rule.needs,
                    evaluation=evaluation,
                    eval_batch=eval_batch,
                    feed=feeds[decision_batch],
                    batch=decision_batch,
                    runs=runs[decision_batch],
                    threads=threads,
                    say=bar.say,
                )
            runtime_decision, runtime_choice = second_runtime.decide_runtime(
                results, runtime_runs, decision_batch, basis
            )
            runtime_note = (
                f"OpenVINO {ov.__version__.split('-')[0]} ran the fp32 file"
                + (f" and {', '.join(v.name for v in picked)}" if picked else "")
                + f" at its default precision, each timed in turn with ONNX Runtime's fp32 at batch {decision_batch} "
                "only; dynamic and 4-bit files are not run there (its INT8 path reads QDQ files)"
                + ("" if picked else "; no static QDQ file passed the quality rule on ONNX Runtime")
            )
        recommended, rebuild = None, None
        if decision.recommended is not None:
            chosen = next(r for r in results if r.name == decision.recommended)
            recommended = out / f"{info.path.stem}.recommended.onnx"
            shutil.copyfile(chosen.path, recommended)
            for data_file in built.glob(f"{chosen.path.name}.data"):
                shutil.copyfile(data_file, out / data_file.name)
            rebuild = candidates.rebuild_code(info.path, pre_done.call, chosen.recipe, recommended.name)
        shutil.rmtree(work / "kernels", ignore_errors=True)
        result = AuditResult(
            info.path,
            out,
            hardware.cpu_summary(),
            batches,
            split,
            rule.mode,
            rule.text(),
            notes,
            shares,
            fp32,
            results,
            skipped,
            decision,
            recommended,
            time.perf_counter() - started,
            decided_by=rule.decided_by(),
            quality_rule=rule.to_dict(),
            pre_process=pre_done.call,
            rebuild=rebuild,
            runtime_runs=runtime_runs,
            runtime_decision=runtime_decision,
            runtime_choice=runtime_choice,
            runtime_note=runtime_note,
        )
        with bar.step("writing the report", 1):
            result.files = summary.write(result)
        finished = True
    finally:
        bar.close(finished)
    return result


def _openvino_wanted(openvino: bool | None) -> Any:
    """The openvino module when the second runtime runs: None asks whether it is installed, False
    switches it off, True requires it (an AuditError that says how to install it otherwise)."""
    from course_machinery import runtimes

    if openvino is False:
        return None
    module = runtimes.openvino_or_none()
    if module is None and openvino is True:
        raise reading.AuditError(
            f"Expected OpenVINO for the second runtime (openvino=True, --runtimes onnxruntime,openvino); "
            f"the openvino package is not installed. Install it ({runtimes.INSTALL_HINT}), or leave it out: "
            "openvino=None runs it only where installed.",
            expected="openvino installed",
            found="not installed",
        )
    return module


def _speed_line(result: VariantResult, batches: list[int]) -> str:
    from .decide import ratio_text

    return ", ".join(f"batch {b}: {ratio_text(result.speed_tuple(b))}" for b in batches if b in result.speed)


def _debug_and_retry(plan, result, pre, calibration, work, queue, bar, estimate, external_data) -> None:
    """qdq_loss_debug on a static variant that fails; queue one rerun with its worst layers in float."""
    with bar.step(f"{plan.name}: qdq_loss_debug", 5):
        try:
            result.sensitivity = candidates.sensitive_layers(
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
        candidates.Plan(
            f"{plan.name}, {len(names)} layers in float",
            plan.kind,
            options,
            "04_parity.ipynb",
            f"nodes_to_exclude from qdq_loss_debug (ranked by {result.sensitivity.ranked_by}): {', '.join(names)}",
            plan.keep_float,
            plan.keep_float_why,
        ),
    )
    bar.add(estimate)
