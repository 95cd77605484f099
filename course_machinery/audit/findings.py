"""What an audit found, as data: each variant built and measured, and the whole result.

Kept apart from `run` (which builds and measures) so that `report` (which writes the result down)
and `run` need not import each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from course_lib import measure

from . import candidates, evaluate, second_runtime
from . import inputs as reading
from .decide import Decision


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
        from .summary import summary_markdown  # report reads this module: imported when shown

        return summary_markdown(self)
