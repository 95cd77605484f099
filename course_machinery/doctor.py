"""`python -m course_lib doctor`'s check of the installed requirements against the course's own.

requirement_status   each requirement the installed course declares (extras included), checked
"""

from __future__ import annotations

import importlib.metadata

from course_lib.versions import package_version

COURSE_DIST = "onnx-quant-course"


def requirement_status(dist: str = COURSE_DIST) -> list[dict]:
    """Each requirement the installed course declares (its own metadata, extras included), checked.

    One dict per requirement: `name`, `wanted` (the specifier), `extra` (None for what the lessons
    need, else the extra that asks for it), `installed` (version or None) and `ok`.
    Requirements whose environment marker excludes this platform are left out.
    """
    from packaging.markers import default_environment
    from packaging.requirements import Requirement

    try:
        declared = importlib.metadata.requires(dist) or []
    except importlib.metadata.PackageNotFoundError as exc:
        raise RuntimeError(
            f"{dist} is not installed: run `pip install -e .` (or `make`) in the course"
        ) from exc
    rows, seen = [], set()
    for text in declared:
        req = Requirement(text)
        if req.name.lower().replace("_", "-") == dist:
            continue  # an extra naming another extra of the course (tooling -> lab)
        extra = None
        if req.marker is not None:
            extra = next(
                (
                    e
                    for e in ("lab", "tooling", "openvino", "test")
                    if req.marker.evaluate({**default_environment(), "extra": e})
                ),
                None,
            )
            if extra is None and not req.marker.evaluate({**default_environment(), "extra": ""}):
                continue
        key = (req.name.lower(), extra)
        if key in seen:
            continue
        seen.add(key)
        installed = package_version(req.name, "")
        ok = bool(installed) and req.specifier.contains(installed, prereleases=True)
        rows.append(
            {
                "name": req.name,
                "wanted": str(req.specifier) or "any",
                "extra": extra,
                "installed": installed or None,
                "ok": ok,
            }
        )
    return rows
