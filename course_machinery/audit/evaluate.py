"""Measuring one variant against fp32: quality (with labels, without, or by the user's metric), speed.

Quality           the quality rule's verdict and the figures behind it, with their intervals
labelled_quality  lesson 04: measure.parity against fp32 and the labels, measure.acceptance
float_quality     outputs that are not class scores: cosine and relative error against fp32, with
                  padded positions left out where an attention mask says which they are
choose_outputs    the outputs the rule reads: the first float output, one named, or all of them
find_mask         the attention-mask input, found by name, and which outputs have its sequence axis
Metric            the user's own task metric (perplexity, F1, ...), called on each model's outputs
Rule              the quality rule of one audit: which of the above decides, and on what
collect           a model's outputs (ONNX Runtime or a runner) for every evaluation row, in batches
speed             measure.compare_latency against fp32 at each batch size, runs sized to a time budget

The user's metric (`metric=`, `--metric module:function`) is called once per model, fp32 first:

    def metric(outputs, inputs, labels):
        # outputs: {output name: array}, every output of the model, one row per evaluation sample
        # inputs:  {input name: array} of the same samples; labels: theirs (an array) or None
        return value, higher_is_better  # e.g. (3.81, False) for a perplexity

A function that returns the value alone says its direction with an attribute instead:
`metric.higher_is_better = False`. A variant passes when its value is within `tolerance` (relative,
default 2 %) of fp32's on the worse side: a perplexity at most 2 % above fp32's, an F1 at most 2 %
below it.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from course_lib import measure

# Without labels: every evaluation sample's output within this cosine of fp32's, and the mean
# above MIN_MEAN_COSINE. The lessons judge the text encoder by its worst sentence's cosine
# (lessons 02 and 06); 0.98 is where its dynamic and static INT8 files sit.
MIN_WORST_COSINE = 0.98
MIN_MEAN_COSINE = 0.99
# One value per sample (a regression): the relative error of 95 % of samples at most this.
MAX_RELATIVE_ERROR = 0.05
# The user's metric: a variant's value at most this far (relative to fp32's) on the worse side.
METRIC_TOLERANCE = 0.02
# Inputs whose name says they mark real tokens (1) and padding (0), lower-cased; a name that ends
# in "attention_mask" counts too (e.g. "encoder_attention_mask").
MASK_NAMES = ("attention_mask", "input_mask", "attn_mask", "padding_mask")


@dataclass
class Quality:
    """How close a variant's outputs are to fp32's on the evaluation samples.

    `mode`: "labels" (lesson 04's parity and acceptance rule), "fp32" (cosine, relative error) or
    "metric" (the user's own);
    `score`: higher is closer to fp32 (agreement, mean cosine, minus the metric's relative change),
    for ranking ties;
    `figures`: the numbers, each interval as (low, high); `text`: one cell for the table."""

    mode: str
    passes: bool
    advice: str
    score: float
    text: str
    figures: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "mode": self.mode,
            "passes": self.passes,
            "advice": self.advice,
            "score": self.score,
            "text": self.text,
            **self.figures,
        }


def _rule_text(mode: str) -> str:
    """The quality rule, in words, for the report."""
    if mode == "labels":
        return (
            "lesson 04's acceptance rule: accuracy at most 0.5 points below fp32's and top-1 agreement with "
            "fp32 above 99 %, on the evaluation samples"
        )
    return (
        f"without labels, the outputs against fp32's: every evaluation sample's cosine at least "
        f"{MIN_WORST_COSINE} and the mean cosine at least {MIN_MEAN_COSINE} (lessons 02 and 06 judge the text "
        f"encoder by its worst sentence's cosine); for one value per sample, 95 % of relative errors at most "
        f"{MAX_RELATIVE_ERROR:.0%}"
    )


def _pct(low_high: tuple[float, float]) -> str:
    return f"{100 * low_high[0]:.2f}–{100 * low_high[1]:.2f}"


def labelled_quality(reference: np.ndarray, candidate: np.ndarray, labels: np.ndarray) -> Quality:
    """Lesson 04: agreement and accuracy against fp32 and the labels, the acceptance rule."""
    p = measure.parity(reference, candidate, labels)
    if p.labelled:
        verdict = measure.acceptance(p)
        change = p.accuracy_change_interval()
        passes, advice = verdict.passes, verdict.advice
        accuracy = (
            f"; accuracy {p.candidate_accuracy:.2%} ({_pct(p.accuracy_interval())}) against fp32's "
            f"{p.reference_accuracy:.2%}, change {-verdict.drop_points:+.2f} points "
            f"({change[0]:+.2f} to {change[1]:+.2f})"
        )
    else:  # every label is -1: agreement alone
        passes = p.agreement > 0.99
        advice = "passes" if passes else f"agreement {p.agreement:.2%} not above 99%"
        change, accuracy = None, ""
    figures = {
        "n": p.n,
        "agreement": p.agreement,
        "agreement_interval": p.agreement_interval(),
        "reference_accuracy": p.reference_accuracy,
        "candidate_accuracy": p.candidate_accuracy,
        "accuracy_interval": p.accuracy_interval() if p.labelled else None,
        "accuracy_change_points": None
        if p.labelled is None
        else 100 * (p.candidate_accuracy - p.reference_accuracy),
        "accuracy_change_interval": change,
        "max_abs_drift": p.max_abs_drift,
    }
    text = f"agreement {p.agreement_text()}{accuracy}"
    return Quality("labels", passes, advice, p.agreement, text, figures)


def comparable(array: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """One row per sample, float64; with `mask` (N, positions), the positions where it is 0 set to
    0 first, so that they add nothing to a dot product, a norm or a difference: a cosine of the
    masked rows is the cosine over the real positions alone."""
    a = np.asarray(array, np.float64)
    if mask is not None:
        keep = (np.asarray(mask) != 0).astype(np.float64)
        a = a * keep.reshape(keep.shape + (1,) * (a.ndim - keep.ndim))
    return a.reshape(len(a), -1)


def float_quality(
    reference: np.ndarray, candidate: np.ndarray, *, seed: int = 0, mask: np.ndarray | None = None
) -> Quality:
    """Outputs without labels (embeddings, regression): per sample, the cosine with fp32's output
    and the relative error |candidate - fp32| / |fp32|; the mean cosine's interval by bootstrap.
    `mask`: (N, positions) of 1 for real tokens and 0 for padding, for outputs whose axis 1 is
    those positions: the padded positions are left out of both measures."""
    ref, cand = comparable(reference, mask), comparable(candidate, mask)
    norm_ref, norm_cand = np.linalg.norm(ref, axis=1), np.linalg.norm(cand, axis=1)
    tiny = 1e-12 + 1e-6 * float(np.abs(ref).mean())
    relative = np.linalg.norm(cand - ref, axis=1) / np.maximum(norm_ref, tiny)
    if ref.shape[1] == 1:  # one value per sample: a cosine of two numbers only says "same sign"
        p95 = float(np.quantile(relative, 0.95))
        passes = p95 <= MAX_RELATIVE_ERROR
        advice = (
            "passes" if passes else f"95 % of relative errors reach {p95:.1%}, above {MAX_RELATIVE_ERROR:.0%}"
        )
        text = f"relative error median {np.median(relative):.2%}, 95th percentile {p95:.2%}"
        figures = {
            "n": len(ref),
            "relative_error_median": float(np.median(relative)),
            "relative_error_p95": p95,
        }
        return Quality("fp32", passes, advice, -p95, text, figures)
    cosine = (ref * cand).sum(1) / np.maximum(norm_ref * norm_cand, tiny * tiny)
    idx = np.random.default_rng(seed).integers(0, len(cosine), size=(1000, len(cosine)))
    low, high = np.quantile(cosine[idx].mean(axis=1), [0.025, 0.975])
    worst, mean = float(cosine.min()), float(cosine.mean())
    passes = worst >= MIN_WORST_COSINE and mean >= MIN_MEAN_COSINE
    if passes:
        advice = "passes"
    elif mean < MIN_MEAN_COSINE:
        advice = f"mean cosine {mean:.4f} below {MIN_MEAN_COSINE}"
    else:
        below = int((cosine < MIN_WORST_COSINE).sum())
        advice = f"worst cosine {worst:.4f}: {below} sample(s) below {MIN_WORST_COSINE}"
    text = (
        f"cosine mean {mean:.4f} ({low:.4f}–{high:.4f}), worst {worst:.4f}; relative error median "
        f"{np.median(relative):.2%}, worst {relative.max():.2%}"
    )
    figures = {
        "n": len(ref),
        "cosine_mean": mean,
        "cosine_mean_interval": (float(low), float(high)),
        "cosine_worst": worst,
        "cosine_p1": float(np.quantile(cosine, 0.01)),
        "relative_error_median": float(np.median(relative)),
        "relative_error_max": float(relative.max()),
    }
    return Quality("fp32", passes, advice, mean, text, figures)


# --------------------------------------------------------------------------------------------
# Which outputs the rule reads, and which positions of them are padding
# --------------------------------------------------------------------------------------------
def choose_outputs(info: Any, output: str | Sequence[str] | None) -> list[str]:
    """The float outputs the output rule reads: the first one (None), the one or ones named (a
    name, names separated by commas, or a list), or every one ("all")."""
    from .inputs import AuditError

    floats = list(info.float_outputs)
    if output is None:
        return floats[:1]
    if isinstance(output, str):
        if output.strip().lower() == "all":
            return floats
        names = [part.strip() for part in output.split(",") if part.strip()]
    else:
        names = [str(name) for name in output]
    unknown = [name for name in names if name not in floats]
    if not names or unknown:
        others = sorted(set(info.outputs) - set(floats))
        raise AuditError(
            f"Expected the output(s) to compare to be float outputs of {info.path.name}: "
            f"{', '.join(map(repr, floats))}, or 'all'; got {output!r}"
            + (f" ({', '.join(map(repr, unknown))} is not one" if unknown else "")
            + (f"; {', '.join(map(repr, others))} are not float tensors" if others else "")
            + (")" if unknown else "")
            + f". Pass e.g. output={floats[0]!r} (--output {floats[0]}) or output='all'.",
            expected=floats,
            found=output,
        )
    return list(dict.fromkeys(names))


@dataclass(frozen=True)
class Masking:
    """The attention-mask input (or None) and, per compared output, whether its padded positions
    are left out (`masked`), with one sentence per output for the report (`notes`)."""

    mask: str | None
    masked: dict[str, bool]
    notes: list[str]

    def to_dict(self) -> dict:
        return {"mask_input": self.mask, "masked_outputs": self.masked, "notes": self.notes}


def _dim_names(model_path: Path) -> dict[str, tuple[Any, ...]]:
    import onnx

    graph = onnx.load(str(model_path), load_external_data=False).graph
    return {
        v.name: tuple(d.dim_param or (d.dim_value or None) for d in v.type.tensor_type.shape.dim)
        for v in (*graph.input, *graph.output)
    }


def find_mask(
    info: Any, samples: Mapping[str, np.ndarray], outputs: Sequence[str], shapes: Mapping[str, tuple]
) -> Masking:
    """The input that marks real tokens (1) and padding (0), by its name (MASK_NAMES), a rank-2
    integer or boolean input whose sample values are all 0 or 1; and which of `outputs` (their
    fp32 `shapes`) have its positions on axis 1: the same symbolic dimension in the graph, or,
    where the graph does not say, rank 3 or more and the same length."""
    integer = [
        spec
        for spec in info.inputs
        if spec.shape is not None
        and len(spec.shape) == 2
        and (np.issubdtype(spec.dtype, np.integer) or spec.dtype == np.bool_)
    ]
    named = [
        spec
        for spec in integer
        if spec.name.lower() in MASK_NAMES or spec.name.lower().endswith("attention_mask")
    ]
    mask = next((s.name for s in named if np.isin(np.asarray(samples[s.name]), (0, 1)).all()), None)
    if mask is None:
        if not integer:
            return Masking(None, dict.fromkeys(outputs, False), [])
        why = (
            f"input {named[0].name!r} is named like an attention mask but holds values other than 0 and 1"
            if named
            else f"no input is named like an attention mask ({', '.join(MASK_NAMES)})"
        )
        return Masking(
            None,
            dict.fromkeys(outputs, False),
            [
                f"the model takes token-like inputs, but {why}: padded positions, if any, count in the comparison"
            ],
        )
    dims = _dim_names(info.path)
    seq_dim = dims.get(mask, (None, None))[1]
    length = samples[mask].shape[1]
    masked, notes = {}, []
    padded = float((np.asarray(samples[mask]) == 0).mean())
    for name in outputs:
        shape = tuple(shapes.get(name, ()))
        declared = dims.get(name, ())
        symbolic = len(declared) >= 2 and isinstance(seq_dim, str) and declared[1] == seq_dim
        numeric = (
            len(shape) >= 3
            and shape[1] == length
            and not (len(declared) >= 2 and isinstance(declared[1], str))
        )
        masked[name] = bool(len(shape) >= 2 and shape[1] == length and (symbolic or numeric))
        if masked[name]:
            notes.append(
                f"padded positions ({mask!r} = 0, {padded:.0%} of the sample positions) are left out of the "
                f"comparison of {name!r}: only real tokens count"
            )
        else:
            notes.append(
                f"{name!r} has no axis of {mask!r}'s positions (shape {shape}), so it is compared as the model "
                "gives it: whatever padding does to it, the model did itself"
            )
    return Masking(mask, masked, notes)


# --------------------------------------------------------------------------------------------
# The user's metric
# --------------------------------------------------------------------------------------------
@dataclass
class Metric:
    """The user's task metric: `fn(outputs, inputs, labels)` returns `(value, higher_is_better)`, or
    the value alone when `fn.higher_is_better` says the direction; `name`: how the report names it;
    `tolerance`: how far, relative to fp32's value, a variant may be on the worse side."""

    fn: Callable[..., Any]
    name: str
    tolerance: float = METRIC_TOLERANCE

    def __call__(
        self,
        outputs: Mapping[str, np.ndarray],
        inputs: Mapping[str, np.ndarray],
        labels: np.ndarray | None,
    ) -> tuple[float, bool]:
        """The value and its direction, checked: a finite number, and a direction given."""
        from .inputs import AuditError

        try:
            got = self.fn(dict(outputs), dict(inputs), labels)
        except Exception as exc:  # noqa: BLE001 - the user's code: say where it failed, and how to try it
            raise AuditError(
                f"Expected the metric {self.name} to score a model's outputs; it raised {type(exc).__name__}: "
                f"{str(exc)[:200]}. It is called as metric(outputs, inputs, labels), outputs {{name: array}} "
                f"with every output ({', '.join(f'{k} {np.shape(v)}' for k, v in outputs.items())}), inputs "
                "{name: array} of the same samples, labels an array or None: try it on those first.",
                expected="metric(outputs, inputs, labels) -> (value, higher_is_better)",
                found=f"{type(exc).__name__}: {str(exc)[:80]}",
            ) from exc
        if isinstance(got, tuple) and len(got) == 2:
            value, higher = got
        else:
            value, higher = got, getattr(self.fn, "higher_is_better", None)
        if not isinstance(higher, bool | np.bool_):
            raise AuditError(
                f"Expected the metric {self.name} to return (value, higher_is_better), or a value with "
                f"{self.name}.higher_is_better = True/False set on the function; got {got!r:.80} and no "
                "direction. Return e.g. (perplexity, False) or (f1, True).",
                expected="(float, bool)",
                found=repr(got)[:80],
            )
        try:
            value = float(value)
        except (TypeError, ValueError):
            value = float("nan")
        if not np.isfinite(value):
            raise AuditError(
                f"Expected the metric {self.name} to return a finite number; got {got!r:.80}. Check it on "
                "fp32's outputs first: metric(outputs, inputs, labels) with outputs {name: array}.",
                expected="a finite float",
                found=repr(got)[:80],
            )
        return value, bool(higher)


def load_metric(metric: Any, tolerance: float = METRIC_TOLERANCE) -> Metric | None:
    """`metric` as a Metric: None stays None; a callable as it is; a string "module:function" or
    "path/to/file.py:function" imported. Errors say what was expected, what was found, the fix."""
    from .inputs import AuditError

    if not isinstance(tolerance, int | float) or isinstance(tolerance, bool) or not 0 <= tolerance < 1:
        raise AuditError(
            f"Expected the metric's tolerance as a fraction of fp32's value between 0 and 1, e.g. 0.02 "
            f"for 2 %; got {tolerance!r}. Pass metric_tolerance=0.02 (--metric-tolerance 0.02).",
            expected="0 <= tolerance < 1",
            found=tolerance,
        )
    if metric is None:
        return None
    if isinstance(metric, Metric):
        return Metric(metric.fn, metric.name, float(tolerance))
    if callable(metric):
        name = getattr(metric, "__qualname__", None) or type(metric).__name__
        module = getattr(metric, "__module__", "")
        return Metric(
            metric, f"{module}:{name}" if module and module != "__main__" else name, float(tolerance)
        )
    if not isinstance(metric, str) or metric.count(":") < 1 or not metric.rpartition(":")[2].isidentifier():
        raise AuditError(
            f"Expected the metric as a function or 'module:function' (or 'path/to/file.py:function'); got "
            f"{metric!r}. Pass e.g. metric='my_metrics:perplexity' (--metric my_metrics:perplexity), the "
            "module importable from where you run the audit.",
            expected="module:function",
            found=metric,
        )
    where, _, attr = metric.rpartition(":")
    try:
        if where.endswith(".py") or "/" in where or "\\" in where:
            path = Path(where).expanduser().resolve()
            if not path.is_file():
                raise FileNotFoundError(f"no file {path}")
            stem = re.sub(r"\W", "_", path.stem)
            spec = importlib.util.spec_from_file_location(f"_audit_metric_{stem}", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(where)
        fn = getattr(module, attr)
    except Exception as exc:  # noqa: BLE001 - any failure to import is the user's to fix
        raise AuditError(
            f"Expected {metric!r} to name a function the audit can import; it failed: {type(exc).__name__}: "
            f"{str(exc)[:160]}. Check the module and the function's name, e.g. 'my_metrics:perplexity' with "
            "my_metrics.py importable (in the folder you run from), or give the file: 'path/to/my_metrics.py:perplexity'.",
            expected="module:function",
            found=metric,
        ) from exc
    if not callable(fn):
        raise AuditError(
            f"Expected {metric!r} to be a function; it is a {type(fn).__name__}. Name the function itself.",
            expected="a callable",
            found=type(fn).__name__,
        )
    shown = f"{Path(where).name}:{attr}" if where.endswith(".py") else metric  # a path's folder says nothing
    return Metric(fn, shown, float(tolerance))


# --------------------------------------------------------------------------------------------
# Running a model over the evaluation rows
# --------------------------------------------------------------------------------------------
def collect(
    model: Any,
    feed: Mapping[str, np.ndarray],
    names: Sequence[str] | None,
    *,
    batch: int,
    threads: int | None,
) -> dict[str, np.ndarray]:
    """The outputs `names` (every output when None) of `model` (a path, or a session or runner with
    `run(names, feed)`) for every row of `feed`, `batch` rows per run, one row per sample."""
    from .inputs import AuditError

    session = measure.make_session(model, threads) if isinstance(model, str | Path) else model
    wanted = list(names) if names is not None else [o.name for o in session.get_outputs()]
    count = len(next(iter(feed.values())))
    parts: dict[str, list[np.ndarray]] = {name: [] for name in wanted}
    for start in range(0, count, batch):
        rows = {k: v[start : start + batch] for k, v in feed.items()}
        size = len(next(iter(rows.values())))
        for name, got in zip(wanted, session.run(wanted, rows), strict=True):
            got = np.asarray(got)
            if got.ndim == 0 or got.shape[0] != size:
                raise AuditError(
                    f"Expected output {name!r} to have one row per sample along axis 0; a batch of {size} "
                    f"gave shape {got.shape}. Export the model batch-first, or compare other outputs "
                    "(--output NAME).",
                    expected=f"({size}, ...)",
                    found=got.shape,
                )
            parts[name].append(got.astype(np.float32) if np.issubdtype(got.dtype, np.floating) else got)
    return {name: np.concatenate(chunks) for name, chunks in parts.items()}


# --------------------------------------------------------------------------------------------
# The rule of one audit
# --------------------------------------------------------------------------------------------
@dataclass
class Rule:
    """The quality rule of one audit and fp32's side of it.

    `mode`: "metric" when the user gave one (it decides), else "labels" when labels were given
    (lesson 04's acceptance rule on `outputs[0]`), else "fp32" (cosine and relative error on each
    of `outputs`, each must pass). `reference`: fp32's outputs on the evaluation rows; `inputs`:
    those rows; `labels`: theirs or None; `masking`: which outputs leave padded positions out."""

    mode: str
    outputs: list[str]
    reference: dict[str, np.ndarray]
    inputs: dict[str, np.ndarray]
    labels: np.ndarray | None = None
    metric: Metric | None = None
    masking: Masking | None = None
    reference_metric: tuple[float, bool] | None = None

    def __post_init__(self) -> None:
        if self.metric is not None and self.reference_metric is None:
            self.reference_metric = self.metric(self.reference, self.inputs, self.labels)

    @property
    def needs(self) -> list[str] | None:
        """The outputs to collect of each model: all of them for a metric (None), else those compared."""
        return None if self.metric is not None else list(self.outputs)

    def _mask(self, name: str) -> np.ndarray | None:
        m = self.masking
        return self.inputs[m.mask] if m is not None and m.mask and m.masked.get(name) else None

    def _outputs_quality(self, candidate: Mapping[str, np.ndarray]) -> Quality:
        if self.labels is not None:
            name = self.outputs[0]
            return labelled_quality(
                comparable(self.reference[name]), comparable(candidate[name]), self.labels
            )
        each = {
            name: float_quality(self.reference[name], candidate[name], mask=self._mask(name))
            for name in self.outputs
        }
        if len(each) == 1:
            return next(iter(each.values()))
        worst = min(each.values(), key=lambda q: (q.passes, q.score))
        failing = [f"{name!r}: {q.advice}" for name, q in each.items() if not q.passes]
        return Quality(
            "fp32",
            all(q.passes for q in each.values()),
            "; ".join(failing) or "passes",
            min(q.score for q in each.values()),
            "; ".join(f"{name}: {q.text}" for name, q in each.items()),
            {**worst.figures, "outputs": {name: q.figures for name, q in each.items()}},
        )

    def judge(self, candidate: Mapping[str, np.ndarray]) -> Quality:
        """The candidate's outputs on the evaluation rows against fp32's, by this rule."""
        by_outputs = self._outputs_quality(candidate)
        if self.metric is None:
            return by_outputs
        reference, higher = self.reference_metric
        value, _ = self.metric(candidate, self.inputs, self.labels)
        change = (value - reference) / max(abs(reference), 1e-12)
        worse = -change if higher else change
        tol = self.metric.tolerance
        passes = worse <= tol
        side = "below" if higher else "above"
        advice = "passes" if passes else f"{self.metric.name} {abs(change):.2%} {side} fp32's, past {tol:.0%}"
        text = (
            f"{self.metric.name} {value:.4g} against fp32's {reference:.4g} ({change:+.2%}; the rule: at most "
            f"{tol:.0%} {side}); outputs, not deciding: {by_outputs.text}"
        )
        figures = {
            "n": len(next(iter(self.inputs.values()))),
            "metric": self.metric.name,
            "metric_value": value,
            "metric_fp32": reference,
            "metric_change": change,
            "metric_higher_is_better": higher,
            "metric_tolerance": tol,
            "outputs_rule": {"passes": by_outputs.passes, "advice": by_outputs.advice, **by_outputs.figures},
        }
        return Quality("metric", passes, advice, -abs(change), text, figures)

    def decided_by(self) -> str:
        """Which rule decided, in a phrase: 'your metric m:f', 'labels ...', 'cosine on output X'."""
        outputs = ", ".join(map(repr, self.outputs))
        if self.metric is not None:
            reference, higher = self.reference_metric
            return (
                f"your metric {self.metric.name} ({'higher' if higher else 'lower'} is better; fp32 scores "
                f"{reference:.4g}), within {self.metric.tolerance:.0%} of fp32's"
            )
        if self.labels is not None:
            return f"labels: lesson 04's acceptance rule on output {outputs}"
        if len(self.outputs) > 1:
            return f"cosine on every compared output ({outputs}): each must pass"
        return f"cosine on output {outputs}"

    def text(self) -> str:
        """The rule in words, for the report's first section."""
        if self.metric is not None:
            reference, higher = self.reference_metric
            side = "below" if higher else "above"
            base = "the labels" if self.labels is not None else "fp32's outputs"
            return (
                f"your metric {self.metric.name}, called on each model's outputs for the evaluation samples: a "
                f"variant passes when its value is at most {self.metric.tolerance:.0%} {side} fp32's "
                f"({reference:.4g}); the comparison with {base} ({_rule_text(self.mode_of_outputs)}) is "
                "reported beside it and does not decide"
            )
        return _rule_text(self.mode)

    @property
    def mode_of_outputs(self) -> str:
        return "labels" if self.labels is not None else "fp32"

    def to_dict(self) -> dict:
        return {
            "mode": self.mode,
            "decided_by": self.decided_by(),
            "outputs": self.outputs,
            "metric": None
            if self.metric is None
            else {
                "name": self.metric.name,
                "tolerance": self.metric.tolerance,
                "fp32_value": self.reference_metric[0],
                "higher_is_better": self.reference_metric[1],
            },
            "masking": self.masking.to_dict() if self.masking else None,
            "text": self.text(),
        }


def feed_at(feed: Mapping[str, np.ndarray], batch: int) -> dict[str, np.ndarray]:
    """The first `batch` rows of every input (repeated when there are fewer rows)."""
    count = len(next(iter(feed.values())))
    index = np.arange(batch) % count
    return {name: np.ascontiguousarray(array[index]) for name, array in feed.items()}


def runs_for(seconds_per_run: float, budget_s: float) -> int:
    """Timed runs per model for a comparison of two models to take about `budget_s`: between 10
    and 50 (each turn of 5 timed runs adds one untimed switch-over run)."""
    return int(np.clip(budget_s / (2 * 1.2 * max(seconds_per_run, 1e-4)), 10, 50))


def speed(
    fp32: Path,
    variant: Path,
    feeds: Mapping[int, Mapping[str, np.ndarray]],
    runs: Mapping[int, int],
    *,
    name: str,
    threads: int | None,
) -> dict[int, measure.LatencyComparison]:
    """fp32 and the variant timed in turn (`measure.compare_latency`) at each batch size."""
    return {
        batch: measure.compare_latency(
            {"fp32": fp32, name: variant},
            dict(feed),
            threads=threads,
            runs=runs[batch],
            warmup=max(2, min(10, runs[batch] // 5)),
        )
        for batch, feed in feeds.items()
    }


def seconds_per_run(path: Path, feed: Mapping[str, np.ndarray], threads: int | None) -> float:
    """A quick median of a few runs: only to size the real measurements."""
    return measure.measure_latency(path, dict(feed), threads=threads, warmup=1, runs=3).median_ms / 1e3


def batches_checked(batch: Any, fixed: int | None) -> tuple[list[int], str]:
    """The batch sizes to time, sorted, and a note when the model's fixed batch overrides them."""
    from .inputs import AuditError

    values: Sequence[Any] = [batch] if isinstance(batch, int) else list(batch)
    if not values or any(not isinstance(b, int) or isinstance(b, bool) or b < 1 for b in values):
        raise AuditError(
            f"Expected batch sizes as whole numbers >= 1, e.g. batch=(1, 32) or --batch 1,32; got {batch!r}. "
            "Pass the batch sizes your deployment runs.",
            expected="ints >= 1",
            found=batch,
        )
    sizes = sorted(set(values))
    if fixed == 1 and sizes != [1]:
        return [
            1
        ], f"the model was exported with a fixed batch of 1, so it is timed at batch 1 only (asked: {sizes})"
    return sizes, ""


def serve_batch_checked(serve: Any, batches: list[int], fixed: int | None) -> tuple[list[int], int, str, str]:
    """The batches to time (with the served batch added), the batch the decision reads, why that
    one ("the batch you serve", "the largest batch timed"), and a note when the served batch was
    added to the batches timed."""
    from .inputs import AuditError

    if serve is None:
        basis = "the only batch timed" if len(batches) == 1 else "the largest batch timed"
        return batches, max(batches), basis, ""
    if not isinstance(serve, int) or isinstance(serve, bool) or serve < 1:
        raise AuditError(
            f"Expected the batch you serve as a whole number >= 1, e.g. serve_batch=1 (--serve-batch 1) for "
            f"an online service answering one request at a time; got {serve!r}.",
            expected="an int >= 1",
            found=serve,
        )
    if fixed == 1 and serve != 1:
        raise AuditError(
            f"Expected a batch the model can run; it was exported with a fixed batch of 1, so it serves batch 1, "
            f"not the batch {serve} asked. Pass serve_batch=1, or export the model with a dynamic batch axis.",
            expected=1,
            found=serve,
        )
    if serve in batches:
        return batches, serve, "the batch you serve", ""
    return (
        sorted({*batches, serve}),
        serve,
        "the batch you serve",
        f"batch {serve}, the batch you serve, was added to the batch sizes timed ({batches})",
    )
