"""Reference runs: what the course measured on its named reference CPUs.

A lesson states its results in its markdown, before anything runs. Where a result depends on the
CPU, the figures come from the course's reference runs: one stored run per CPU class (an AVX2-only
AMD EPYC, an AMD EPYC with AVX-512 VNNI, ...), kept in `course_machinery/reference_runs/` and written
into the lessons' markdown between markers by `python -m course_lib reference`. The live run then
prints "yours:" beside them.

Each lesson's last cell saves the figures its markdown quotes (`save_figures`), so that after a
full run (`python -m course_lib run`), `python -m course_lib reference record` stores this
machine's class with one command.

    save_figures    this run's named figures of one lesson: <data dir>/figures/NN.json
    load_figures    read them back
    reference_runs  the stored runs, one per CPU class
    cpu_class       this machine's class: a file-name slug and the label the lessons print

Imports nothing heavy (no torch, onnx or onnxruntime).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from course_lib.data import data_dir
from course_lib.files import atomic_write

REFERENCE_DIR = Path(__file__).parent / "reference_runs"
FIGURES_DIR = "figures"

# AMD's generations by CPU family and model, as /proc/cpuinfo gives them (AMD's processor
# programming references): only to name a reference CPU, never to decide anything.
_AMD_GENERATIONS = (
    (0x17, range(0x00, 0x30), "Zen"),
    (0x17, range(0x30, 0x100), "Zen 2"),
    (0x19, range(0x00, 0x10), "Zen 3"),
    (0x19, range(0x10, 0x20), "Zen 4"),
    (0x19, range(0x20, 0x60), "Zen 3"),
    (0x19, range(0x60, 0x80), "Zen 4"),
    (0x19, range(0xA0, 0xB0), "Zen 4"),
    (0x1A, range(0x00, 0x100), "Zen 5"),
)


@dataclass(frozen=True)
class CpuClass:
    """A class of CPU as the course tells them apart: the model name and the INT8 instructions."""

    slug: str  # file name of its reference run, e.g. "amd-epyc-avx2-only"
    label: str  # as the lessons print it, e.g. "AMD EPYC Zen 3, AVX2 only"


def isa_label(machine: str, features: list[str] | set[str]) -> str:
    """The INT8-relevant instruction sets in a few words: 'AVX2 only', 'AVX-512 VNNI', 'AVX-512 VNNI, AMX'."""
    f = set(features)
    if machine.lower() in ("arm64", "aarch64"):
        parts = [name for name in ("ARM dot product", "ARM i8mm") if name in f]
        return ", ".join(parts) or "ARM, no dot product"
    if "AMX (INT8)" in f:
        return "AVX-512 VNNI, AMX"
    if "AVX-512 VNNI" in f:
        return "AVX-512 VNNI"
    if "AVX-VNNI" in f:
        return "AVX2, AVX-VNNI"
    if "AVX-512" in f:
        return "AVX-512, no VNNI"
    return "AVX2 only" if "AVX2" in f else "no AVX2"


def _generation(cpu: str) -> str:
    """'Zen 4' for an AMD CPU whose family and model /proc/cpuinfo gives; '' elsewhere."""
    cpuinfo = Path("/proc/cpuinfo")
    if "AMD" not in cpu or not cpuinfo.exists():
        return ""
    fields = {}
    for line in cpuinfo.read_text().splitlines():
        key, _, value = line.partition(":")
        if not key.strip() and fields:
            break  # the first processor is enough
        fields.setdefault(key.strip(), value.strip())
    try:
        family, model = int(fields["cpu family"]), int(fields["model"])
    except (KeyError, ValueError):
        return ""
    return next((name for f, models, name in _AMD_GENERATIONS if f == family and model in models), "")


def short_cpu_name(name: str) -> str:
    """A CPU's model name without trademarks and filler: 'Intel Xeon' for 'Intel(R) Xeon(R) Processor'."""
    words = name.replace("(R)", " ").replace("(TM)", " ").replace("(tm)", " ").split()
    keep = [w for w in words if w not in ("Processor", "CPU") and not w.endswith("-Core")]
    return " ".join(keep).split(" @ ")[0].strip() or name


def class_of(cpu: str, machine: str, features: list[str] | set[str], generation: str = "") -> CpuClass:
    """The class of a CPU named `cpu` with these INT8_FEATURES (as an environment fingerprint lists them)."""
    name = " ".join(filter(None, [short_cpu_name(cpu), generation]))
    isa = isa_label(machine, features)
    slug = "-".join("".join(c if c.isalnum() else " " for c in f"{name} {isa}".lower()).split())
    return CpuClass(slug=slug, label=f"{name}, {isa}")


def cpu_class() -> CpuClass:
    """This machine's CPU class."""
    from course_machinery.hardware import cpu_report

    cpu = cpu_report()
    features = [name for name, present in cpu["features"].items() if present]
    return class_of(cpu["cpu"], cpu["machine"], features, _generation(cpu["cpu"]))


# --------------------------------------------------------------------------------------------
# This run's figures
# --------------------------------------------------------------------------------------------
def _plain(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise TypeError(
        f"A reference figure must be a number, a string, None or a list or dict of them; got a "
        f"{type(value).__name__} ({value!r:.60}). Store the number itself, e.g. comparison.speedup."
    )


def _figures_path(lesson: str) -> Path:
    """Where `save_figures` keeps one lesson's figures: <data dir>/figures/NN.json."""
    return data_dir() / FIGURES_DIR / f"{lesson}.json"


def save_figures(lesson: str, figures: dict[str, Any], *, timed: Iterable[str] = ()) -> Path:
    """Save the figures a lesson's markdown quotes, by name, and its claims' verdicts, for
    `python -m course_lib reference record`.

    The names are the ones the lesson's `<!-- reference: ... -->` templates use. `timed` names the
    figures read off a clock (speeds, milliseconds): a run whose CPU features are masked or
    overridden stands in for another CPU class in everything but those, which stay the host's.
    The claims are the ones this kernel checked (`claims.ledger()`), each with its verdict."""
    from course_machinery.results import environment_fingerprint

    from .claims import ledger

    bad = [k for k in figures if not str(k).isidentifier()]
    if bad:
        raise ValueError(f"Figure names must be identifiers such as 's8s8_speedup_b64'; got {bad}.")
    timed = sorted(set(timed))
    unknown = [k for k in timed if k not in figures]
    if unknown:
        raise ValueError(
            f"timed= names figures this lesson does not save: {unknown}. Name figures of `figures` "
            f"(these: {', '.join(sorted(figures)[:8])}, ...)."
        )
    entry = {
        "lesson": str(lesson),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "environment": environment_fingerprint(),
        "figures": _plain(dict(figures)),
        "timed": timed,
        "claims": [c.to_record() for c in ledger()],
    }
    path = _figures_path(lesson)
    text = json.dumps(entry, indent=1)
    atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    return path


def load_figures(lesson: str) -> dict | None:
    """One lesson's saved figures with their environment, or None if that lesson has not saved any."""
    path = _figures_path(lesson)
    if not path.exists():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


# --------------------------------------------------------------------------------------------
# The stored reference runs
# --------------------------------------------------------------------------------------------
@dataclass
class ReferenceRun:
    """One reference CPU's stored figures, lesson by lesson, with where they were measured, and its
    ledger: every claim's verdict on that run (held, contradicted, unsettled, not for this CPU, not
    timed), lesson by lesson.

    A figure is a plain value, or {"value": ..., "commit": ..., "source": ...} when it comes from
    another commit than the run's (figures quoted from earlier measurements), with "masked": the
    host's CPU when it was measured with the CPU's features masked to this class's (everything but
    timings: see `timed`)."""

    cpu_class: str
    label: str
    commit: str
    date: str
    source: str
    figures: dict[str, dict[str, Any]]
    machine: str = ""
    versions: dict[str, str] = field(default_factory=dict)
    claims: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # lesson -> claim records
    claims_commit: str = ""  # the commit of the run that gave the claims (default: `commit`)
    claims_source: str = ""  # how: this run, or a masked run on another host
    timed: dict[str, list[str]] = field(default_factory=dict)  # lesson -> the figures that are timings
    # lesson -> sentence name -> its verdict on this run, with the fingerprint of the sentence it checked
    sentences: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    sentences_commit: str = ""  # the commit of the run that gave the sentences' verdicts

    def figure(self, lesson: str, key: str) -> tuple[Any, str] | None:
        """(value, commit) of one figure, or None if this run lacks it."""
        found = self.figures.get(str(lesson), {}).get(key)
        if found is None:
            return None
        if isinstance(found, dict) and "value" in found:
            return found["value"], found.get("commit", self.commit)
        return found, self.commit

    def masked_host(self, lesson: str, key: str) -> str:
        """The host whose masked CPU measured this figure ('' for a figure measured on this class)."""
        found = self.figures.get(str(lesson), {}).get(key)
        return found.get("masked", "") if isinstance(found, dict) else ""

    def to_dict(self) -> dict:
        return {
            "cpu_class": self.cpu_class,
            "label": self.label,
            "machine": self.machine,
            "commit": self.commit,
            "date": self.date,
            "source": self.source,
            "versions": self.versions,
            "figures": self.figures,
            "timed": self.timed,
            "claims_commit": self.claims_commit,
            "claims_source": self.claims_source,
            "claims": self.claims,
            "sentences": self.sentences,
            "sentences_commit": self.sentences_commit,
        }


def reference_runs(directory: Path = REFERENCE_DIR) -> list[ReferenceRun]:
    """The stored reference runs, AVX2-only CPUs first, then by label."""
    runs = []
    for path in sorted(Path(directory).glob("*.json")):
        raw = json.loads(path.read_text(encoding="utf-8"))
        known = {k: raw[k] for k in ReferenceRun.__dataclass_fields__ if k in raw}
        runs.append(ReferenceRun(**known))
    return sorted(runs, key=lambda r: ("AVX2 only" not in r.label, r.label))
