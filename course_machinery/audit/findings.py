"""What an audit found, as data (each variant built and measured, and the whole result), and what
a notebook shows of it: the decision and its table (`summary_markdown`).

Kept apart from `run` (which builds and measures) and from `summary` (which writes the whole report
and imports this module), so that no two of them import each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from course_lib import measure
from course_lib.units import format_bytes

from . import candidates, evaluate, second_runtime
from . import inputs as reading
from .decide import Decision, ratio_text, rule_words


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
    sensitivity: candidates.Sensitivity | None = None
    excluded: list[str] = field(default_factory=list)
    recipe: candidates.Recipe | None = None
    keep_float: list[str] = field(default_factory=list)
    keep_float_why: str = ""

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
            "kept_in_float": {"nodes": self.keep_float, "why": self.keep_float_why}
            if self.keep_float_why
            else None,
            "recipe": self.recipe.to_dict() if self.recipe else None,
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
    shares: candidates.WorkShares
    fp32: dict[str, Any]
    variants: list[VariantResult]
    skipped: list[candidates.Skipped]
    decision: Decision
    recommended_path: Path | None
    seconds: float
    files: dict[str, Path] = field(default_factory=dict)
    decided_by: str = ""
    quality_rule: dict[str, Any] = field(default_factory=dict)
    pre_process: candidates.Recipe | None = None
    rebuild: str | None = None
    runtime_runs: list[second_runtime.RuntimeRun] = field(default_factory=list)
    runtime_decision: Decision | None = None
    runtime_choice: dict[str, Any] | None = None
    runtime_note: str = ""

    def to_dict(self) -> dict:
        return {
            "model": str(self.model),
            "out": str(self.out),
            "cpu": self.cpu,
            "batches": self.batches,
            "split": self.split.to_dict(),
            "mode": self.mode,
            "rule": self.rule,
            "decided_by": self.decided_by,
            "quality_rule": self.quality_rule,
            "notes": self.notes,
            "work_shares": self.shares.to_dict(),
            "fp32": self.fp32,
            "pre_process": self.pre_process.to_dict() if self.pre_process else None,
            "variants": [v.to_dict() for v in self.variants],
            "skipped": [vars(s) for s in self.skipped],
            "decision": self.decision.to_dict(),
            "recommended_path": str(self.recommended_path) if self.recommended_path else None,
            "rebuild_recommended": self.rebuild,
            "runtimes": {
                "note": self.runtime_note,
                "runs": [r.to_dict() for r in self.runtime_runs],
                "decision": self.runtime_decision.to_dict() if self.runtime_decision else None,
                "choice": self.runtime_choice,
            },
            "seconds": self.seconds,
        }

    def _repr_markdown_(self) -> str:
        return summary_markdown(self)


def _mb(n: int | None) -> str:
    return "-" if n is None else format_bytes(n)


def _coverage(c: dict[str, Any]) -> str:
    # Pairs kernels could not read (an activation produced at run time) are left out.
    types = ", ".join(f"{t} {n}" for t, n in sorted(c["types"].items()) if "?" not in t)
    text = f"{c['integer']}/{c['compute']} ({c['coverage']:.0%})"
    if c.get("weight_only"):
        text += f", {c['weight_only']} 4-bit weight-only"
    return text + (f" [{types}]" if types else "")


def table(result: AuditResult) -> str:
    """The decision table: fp32 first, then every measured variant."""
    fp32 = result.fp32
    rows = [
        {
            "variant": "fp32 (as given)",
            "quality": "the reference",
            "file": _mb(fp32["file_bytes"]),
            "peak memory": _mb(fp32["peak_memory_bytes"]),
            **{f"speed, batch {b}": "1.00x" for b in result.batches},
            "integer kernels": _coverage(fp32["coverage"]),
            "verdict": "the baseline",
        }
    ]
    for v in result.variants:
        kind, _ = result.decision.verdicts.get(v.name, ("-", ""))
        rows.append(
            {
                "variant": v.name,
                "quality": ("✔ " if v.quality.passes else "✘ ") + v.quality.text,
                "file": f"{_mb(v.file_bytes)} ({v.file_bytes / fp32['file_bytes']:.2f} of fp32)",
                "peak memory": _mb(v.memory.increase_bytes if v.memory else None),
                **{
                    f"speed, batch {b}": ratio_text(v.speed_tuple(b)) if b in v.speed else "-"
                    for b in result.batches
                },
                "integer kernels": _coverage(v.coverage),
                "verdict": kind,
            }
        )
    return measure.markdown_table(rows)


def summary_markdown(result: AuditResult) -> str:
    d = result.decision
    if d.recommended:
        head = f"**Recommended: {d.recommended}** ({result.recommended_path}). {d.reason[0].upper()}{d.reason[1:]}."
    else:
        head = f"**No variant recommended**: {d.reason}."
    rule = (
        f"Decided at {d.decided_at}; quality decided by {result.decided_by or result.rule}; speed: "
        f"{rule_words(d.min_speedup)}."
    )
    parts = [head, rule]
    runtime = runtime_line(result)
    if runtime:
        parts.append(runtime)
    return "\n\n".join([*parts, table(result)]) + "\n"


def runtime_line(result: AuditResult) -> str:
    """The decision across runtimes, in a sentence (empty when no second runtime ran)."""
    d, choice = result.runtime_decision, result.runtime_choice
    if d is None:
        return ""
    if choice is None:
        return (
            f"**Across runtimes** (ONNX Runtime and {_runtime_name(result)}): nothing is clearly faster than ONNX "
            f"Runtime's fp32 at batch {d.batch}; keep ONNX Runtime and the fp32 file."
        )
    settings = ", ".join(f"{k}={v}" for k, v in choice["settings"].items()) or "default settings"
    how = choice["variant"] if choice["runtime"] == "ONNX Runtime" else f"{choice['variant']}, {settings}"
    return (
        f"**Across runtimes: {choice['runtime']}** with `{Path(choice['path']).name}` ({how}). "
        f"{d.reason[0].upper()}{d.reason[1:]}."
    )


def _runtime_name(result: AuditResult) -> str:
    return next((r.runtime for r in result.runtime_runs), "OpenVINO")
