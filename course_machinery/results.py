"""The results store: `<data dir>/results.json`, one entry per measurement, tagged with the
environment that produced it, so that later lessons and the report compare like with like.

    record                  append one measurement (and the file it was measured on)
    load_results            read entries back: of one lesson, from this environment by default
    environment_fingerprint CPU, INT8 features, cores and library versions, with a short hash
    results_path            where the store is ($COURSE_DATA_DIR moves it)
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import os
import platform
import shutil
import warnings
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from course_lib.data import data_dir
from course_lib.files import atomic_write, sha256_file
from course_lib.measure.sessions import physical_cores
from course_lib.versions import library_versions
from course_machinery import hardware

RESULTS_FILE = "results.json"


def results_path() -> Path:
    """Where results are stored: `<data_dir()>/results.json` ($COURSE_DATA_DIR moves it)."""
    return data_dir() / RESULTS_FILE


@lru_cache(maxsize=1)
def _fingerprint() -> dict:
    cpu = hardware.cpu_report()  # py-cpuinfo takes a moment: computed once per process
    facts = {
        "cpu": cpu["cpu"],
        "machine": cpu["machine"],
        "os": platform.system(),
        "logical_cores": cpu["logical_cores"],
        "physical_cores": physical_cores(),
        "int8_features": sorted(name for name, present in cpu["features"].items() if present),
        # Set when the CPU's features are masked to another class's (course_machinery.cpumask):
        # then the figures stand in for that class, the timings for none.
        "cpu_mask": os.environ.get("COURSE_CPU_MASK", ""),
        "versions": library_versions(),
    }
    facts["hash"] = hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:12]
    return facts


def environment_fingerprint() -> dict:
    """CPU, its INT8 features, core counts and library versions, plus a short hash of all that.

    Entries with the same hash were measured in the same environment and can be compared.
    """
    return copy.deepcopy(_fingerprint())


def _jsonable(value: Any) -> Any:
    """Turn results (dataclasses with to_dict, numpy scalars and arrays, paths) into JSON values."""
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(
        f"Cannot store a {type(value).__name__} in the results file ({value!r:.80}); "
        "record numbers, strings, lists and dicts (or objects with a to_dict() method)."
    )


class _CorruptStore(ValueError):
    pass


def _read_store(path: Path) -> list:
    """The stored entries; [] for a missing file; _CorruptStore if it is not a JSON list."""
    if not path.exists():
        return []
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _CorruptStore(f"{path} is not valid JSON ({exc})") from exc
    if not isinstance(entries, list):
        raise _CorruptStore(f"{path} holds a JSON {type(entries).__name__}, not a list of entries")
    return entries


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock beside `path`, so two processes recording at once lose nothing."""
    try:
        import fcntl
    except ImportError:  # Windows: no advisory locks here; notebooks record one at a time
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def record(
    lesson: str,
    model: str,
    variant: str,
    metrics: Mapping[str, Any] | Any,
    options: Mapping[str, Any] | None = None,
    path: str | Path | None = None,
) -> dict:
    """Append one measurement to the results store and return the entry written.

    `metrics` is a dict of numbers (or a result with to_dict(), e.g. a Latency); `options` are
    the settings that produced it (per_channel, calibration method, threads …); `path` is the
    ONNX file measured, whose name, size and SHA-256 are stored so the numbers can be traced
    back to the exact file. A corrupt results file is moved aside (with a warning), not lost.
    """
    entry = {
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
        "lesson": str(lesson),
        "model": str(model),
        "variant": str(variant),
        "options": dict(options or {}),
        "metrics": metrics.to_dict() if hasattr(metrics, "to_dict") else dict(metrics),
        "environment": environment_fingerprint(),
    }
    if path is not None:
        file = Path(path)
        entry["file"] = {
            "name": file.name,
            "bytes": file.stat().st_size,
            "sha256": sha256_file(file),
        }
    entry = json.loads(json.dumps(entry, default=_jsonable))  # fail here, before touching the file

    store = results_path()
    with _locked(store):
        try:
            entries = _read_store(store)
        except _CorruptStore as exc:
            aside = store.with_name(f"{store.name}.corrupt-{datetime.now().strftime('%Y%m%dT%H%M%S%f')}")
            shutil.move(store, aside)
            warnings.warn(
                f"{exc}. Moved it aside to {aside} (its content is kept there) and started a new "
                "results file. Look inside it if earlier results matter; otherwise delete it.",
                stacklevel=2,
            )
            entries = []
        entries.append(entry)
        text = json.dumps(entries, indent=1)
        atomic_write(store, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    return entry


def load_results(lesson: str | None = None, same_environment: bool = True) -> list[dict]:
    """Stored entries, oldest first: of one lesson if given, and by default only those measured
    in this environment (same fingerprint hash), so comparisons are like with like."""
    store = results_path()
    try:
        entries = _read_store(store)
    except _CorruptStore as exc:
        warnings.warn(f"{exc}; no results read. The next record() moves it aside.", stacklevel=2)
        return []
    wanted = environment_fingerprint()["hash"] if same_environment else None
    return [
        e
        for e in entries
        if isinstance(e, dict)
        and (lesson is None or e.get("lesson") == str(lesson))
        and (wanted is None or (e.get("environment") or {}).get("hash") == wanted)
    ]
