"""Every result the course report reads (tooling/keys.py) is one that a lesson, or the benchmark,
writes with `results.record`: found by reading their source, not by running them."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import course_machinery.bench as bench
from conftest import ROOT
from course_machinery import keys, report

ANY = None  # a lesson, model or variant that is not a literal string: any value matches


@dataclass
class Write:
    """One `results.record` call: its lesson, model and variant (a string, a pattern or ANY) and
    the metric names its `metrics` dict can hold (names, and patterns for f-string keys)."""

    where: str
    lesson: str | re.Pattern | None
    model: str | re.Pattern | None
    variant: str | re.Pattern | None
    metrics: set[str] = field(default_factory=set)
    patterns: list[re.Pattern] = field(default_factory=list)

    def has_metric(self, name: str) -> bool:
        return name in self.metrics or any(p.fullmatch(name) for p in self.patterns)


def _matches(written, wanted: str | None) -> bool:
    if written is ANY or wanted is None:
        return True
    if isinstance(written, re.Pattern):
        return bool(written.fullmatch(wanted))
    return written == wanted


class _Module:
    """A source file's assignments and functions, to follow a `metrics=` argument to its dict."""

    def __init__(self, tree: ast.Module, namespace: dict):
        self.tree, self.namespace = tree, namespace
        self.assigned: dict[str, list[ast.expr]] = {}
        self.functions: dict[str, ast.FunctionDef] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        self.assigned.setdefault(target.id, []).append(node.value)
            elif isinstance(node, ast.FunctionDef):
                self.functions[node.name] = node

    def string(self, node: ast.expr):
        """A literal string; an f-string as a pattern; a name the module defines (keys.BENCH); else ANY."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.JoinedStr):
            return _pattern(node)
        try:
            value = eval(compile(ast.Expression(node), "<arg>", "eval"), dict(self.namespace))
        except Exception:
            return ANY
        return value if isinstance(value, str) else ANY

    def keys(self, node: ast.expr, write: Write, seen: frozenset = frozenset()) -> None:
        """Add the keys the dict `node` evaluates to: literal, spread (**x), a name, an element, a call."""
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if key is None:
                    self.keys(value, write, seen)
                elif isinstance(key, ast.Constant):
                    write.metrics.add(key.value)
                elif isinstance(key, ast.JoinedStr):
                    write.patterns.append(_pattern(key))
        elif isinstance(node, ast.DictComp):
            if isinstance(node.key, ast.JoinedStr):
                write.patterns.append(_pattern(node.key))
            elif isinstance(node.key, ast.Constant):
                write.metrics.add(node.key.value)
        elif isinstance(node, ast.Name) and node.id not in seen:
            for value in self.assigned.get(node.id, []):
                self.keys(value, write, seen | {node.id})
        elif isinstance(node, ast.Subscript):  # an element of a dict: the keys of its values
            self.element_keys(node.value, write, seen)
        elif (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in self.functions
        ):
            for ret in ast.walk(self.functions[node.func.id]):
                if isinstance(ret, ast.Return) and ret.value is not None:
                    self.keys(ret.value, write, seen)

    def element_keys(self, node: ast.expr, write: Write, seen: frozenset) -> None:
        if isinstance(node, ast.Name) and node.id not in seen:
            for value in self.assigned.get(node.id, []):
                if isinstance(value, ast.DictComp):
                    self.keys(value.value, write, seen | {node.id})
                elif isinstance(value, ast.Dict):
                    for v in value.values:
                        self.keys(v, write, seen | {node.id})


def _pattern(node: ast.JoinedStr) -> re.Pattern:
    parts = [re.escape(v.value) if isinstance(v, ast.Constant) else ".+" for v in node.values]
    return re.compile("".join(parts))


RECORD_PARAMS = ("lesson", "model", "variant", "metrics")  # results.record's first four parameters


def writes_in(path: Path, namespace: dict | None = None) -> list[Write]:
    """The `results.record(...)` calls in a source file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    module = _Module(tree, namespace or {})
    found = []
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "record"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "results"
        ):
            continue
        args = dict(zip(RECORD_PARAMS, node.args, strict=False))
        args |= {k.arg: k.value for k in node.keywords if k.arg in RECORD_PARAMS}
        write = Write(
            f"{path.relative_to(ROOT)}:{node.lineno}",
            *(module.string(args[name]) if name in args else ANY for name in RECORD_PARAMS[:3]),
        )
        module.keys(args["metrics"], write)
        found.append(write)
    return found


# The lessons record their results from their claims modules (`@book.end`), a few from the lesson itself.
LESSONS = sorted((ROOT / "notebooks" / "src").glob("*.py")) + sorted(
    (ROOT / "course_machinery" / "checks").glob("claims*.py")
)
WRITES = [w for path in LESSONS for w in writes_in(path)] + writes_in(
    ROOT / "course_machinery" / "bench.py", vars(bench)
)


def test_the_lessons_and_the_benchmark_are_read_as_written():
    """Spot checks of the reader itself, on calls whose keys are known."""
    by_place = {(w.lesson, w.model, w.variant if isinstance(w.variant, str) else "*"): w for w in WRITES}
    mlp = by_place["02", "moons_mlp", "dynamic int8"]
    assert mlp.metrics == {"speedup", "max_rel_drift", "fp32_ms", "int8_ms"}
    text = by_place["02", "text_encoder", "dynamic int8 per-channel"]  # metrics=te_metrics, **te_parity[True]
    assert {"speedup_vs_optimized_b16", "cos_min", "cos_mean"} <= text.metrics
    lesson05 = by_place["05", "fashion_resnet18", "*"]  # variant=name, and f"speedup_b{b}" keys
    assert lesson05.has_metric("speedup_b64") and lesson05.has_metric("speedup_low")
    (bench_write,) = [w for w in WRITES if w.lesson == keys.BENCH]  # lesson=keys.BENCH, evaluated
    assert bench_write.model is ANY and bench_write.metrics >= set(keys.SPEED)


@pytest.mark.parametrize("read", keys.READS, ids=lambda r: f"{r.lesson}-{r.model}")
def test_every_key_the_report_reads_is_written(read):
    for variant in read.variants or (None,):
        for metric in read.metrics:
            writers = [
                w
                for w in WRITES
                if _matches(w.lesson, read.lesson)
                and _matches(w.model, read.model)
                and _matches(w.variant, variant)
                and w.has_metric(metric)
            ]
            assert writers, (
                f"The report reads {metric!r} of lesson {read.lesson}, model {read.model}, variant "
                f"{variant!r} (course_machinery/keys.py), but no results.record call writes it"
            )


def test_the_report_reads_only_declared_keys():
    """An undeclared variant or metric is refused, so the report cannot drift from keys.py."""
    with pytest.raises(ValueError, match="declare it in keys.py"):
        report._metric({}, keys.MLP_DYNAMIC, "speedup_b32")
    with pytest.raises(ValueError, match="declare it in keys.py"):
        report._metric({}, keys.MLP_DYNAMIC, "speedup", variant="static int8")
    assert report._metric({}, keys.MLP_DYNAMIC, "speedup") is None


def test_every_metric_written_has_a_named_column_with_its_unit():
    """The report's tables head each metric with a name and unit from keys.COLUMNS; a metric a
    lesson records without one would show under its raw key."""
    missing = {
        f"{w.where}: {metric}"
        for w in WRITES
        for metric in w.metrics
        if metric not in keys.COLUMNS and metric not in keys.INTERVAL_METRICS
    }
    assert not missing, f"Name these metrics (heading with unit, kind) in keys.COLUMNS: {sorted(missing)}"
    assert len(WRITES) >= 10 and all(w.metrics or w.patterns for w in WRITES)  # the reader found the calls
    for key, column in keys.COLUMNS.items():
        for interval_key in column.interval or ():
            assert interval_key.startswith(key) and interval_key.endswith(("_low", "_high")), key
