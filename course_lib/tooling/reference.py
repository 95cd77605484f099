"""The reference blocks in the lessons' markdown: figures from the course's reference runs.

A lesson source marks a block with a template, then the generated text, then an end marker:

    # <!-- reference: S8S8 ran at {s8s8_speedup_b64:.2f}x fp32's speed at batch 64 -->
    # *Reference runs* (stored by the course, measured on these CPUs, not on yours):
    # - **AMD EPYC Zen 3, AVX2 only** (commit ce0944a): S8S8 ran at 0.48x fp32's speed at batch 64
    # - **AMD EPYC Zen 4, AVX-512 VNNI** (commit b8fa592): S8S8 ran at 0.37x fp32's speed at batch 64
    # <!-- /reference -->

`{name}` is a figure the same lesson saves (`reference.save_figures`), `{05.name}` one of lesson
05's; after the colon, a Python format spec. `<!-- reference-table: header = {name:.2f}x ; ... -->`
gives a table instead, one row per reference CPU. The template may span several lines.

    render_source    a lesson source with every block regenerated from the stored runs
    write / stale    regenerate the blocks of every lesson (or list the stale ones)
    record           store this machine's run (its class replaces an earlier run of that class)
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..reference import REFERENCE_DIR, ReferenceRun, cpu_class, load_figures, reference_runs
from .paths import ROOT

START = re.compile(r"^# <!-- reference(-table)?:", re.MULTILINE)
END = "# <!-- /reference -->"
FIELD = re.compile(r"\{(?:(\d\d[a-z]?)\.)?([A-Za-z_]\w*)(?::([^{}]*))?\}")
HEADING = "*Reference runs* (the course's stored measurements on these CPUs, not on yours):"


class ReferenceError(ValueError):
    """A template or a run that cannot be used; the message says what to fix."""


def lesson_of(source: Path) -> str:
    """'03' for notebooks/src/03_static_qdq.py, '03b' for 03b_calibration_deep_dive.py."""
    return source.name.split("_", 1)[0]


def template_fields(template: str, lesson: str) -> list[tuple[str, str, str]]:
    """(lesson, figure name, format spec) of each placeholder."""
    return [(m.group(1) or lesson, m.group(2), m.group(3) or "") for m in FIELD.finditer(template)]


def fill(template: str, lesson: str, run: ReferenceRun) -> tuple[str, set[str]] | None:
    """The template with `run`'s figures, and the commits they come from; None if one is missing."""
    commits: set[str] = set()
    missing = False

    def value(m: re.Match) -> str:
        nonlocal missing
        found = run.figure(m.group(1) or lesson, m.group(2))
        if found is None or found[0] is None:
            missing = True
            return ""
        commits.add(found[1])
        spec = m.group(3) or ""
        try:
            return format(found[0], spec)
        except (TypeError, ValueError) as exc:
            raise ReferenceError(
                f"lesson {lesson}: cannot format {m.group(2)}={found[0]!r} with {spec!r} ({exc})"
            ) from exc

    text = FIELD.sub(value, template)
    return None if missing else (text, commits)


def _where(run: ReferenceRun, commits: Iterable[str]) -> str:
    commits = sorted(set(commits) or {run.commit})
    return f"**{run.label}** (commit{'s' if len(commits) > 1 else ''} {', '.join(commits)})"


def render_block(template: str, lesson: str, runs: list[ReferenceRun], table: bool = False) -> list[str]:
    """The markdown lines of one block (without its markers)."""
    if not runs:
        return ["*Reference runs:* none stored yet (`python -m course_lib reference record`)."]
    if table:
        columns = [part.split("=", 1) for part in template.split(";")]
        if any(len(c) != 2 for c in columns):
            raise ReferenceError(f"lesson {lesson}: a reference-table template is 'header = text ; ...'")
        lines = [
            "| reference CPU | " + " | ".join(h.strip() for h, _ in columns) + " |",
            "|---" * (len(columns) + 1) + "|",
        ]
        for run in runs:
            cells, commits = [], set()
            for _, cell in columns:
                filled = fill(cell.strip(), lesson, run)
                cells.append(filled[0] if filled else "not measured")
                commits |= filled[1] if filled else set()
            lines.append(f"| {_where(run, commits)} | " + " | ".join(cells) + " |")
        return ["*Reference runs* (the course's stored measurements, not yours):", "", *lines]
    lines = [HEADING]
    for run in runs:
        filled = fill(template, lesson, run)
        if filled is None:
            lines.append(f"- **{run.label}**: not measured on this CPU yet.")
        else:
            lines.append(f"- {_where(run, filled[1])}: {filled[0]}")
    return lines


def _blocks(text: str) -> list[tuple[int, int, int, str, bool]]:
    """(start, body start, body end, template, is table) of each block in a percent source."""
    blocks = []
    for m in START.finditer(text):
        close = text.find("-->", m.end())
        if close < 0:
            raise ReferenceError("a '<!-- reference:' template has no closing '-->'")
        raw = text[m.end() : close]
        template = " ".join(line.removeprefix("#").strip() for line in raw.splitlines()).strip()
        body = text.index("\n", close) + 1
        end = text.find(END, body)
        if end < 0:
            raise ReferenceError(f"the block {template[:50]!r} has no '{END}' line after it")
        blocks.append((m.start(), body, end, template, bool(m.group(1))))
    return blocks


def templates(text: str) -> list[tuple[str, bool]]:
    """The templates of a lesson source, in order, each with whether it is a table."""
    return [(template, table) for _, _, _, template, table in _blocks(text)]


def render_source(text: str, lesson: str, runs: list[ReferenceRun]) -> str:
    """The lesson source with every block's body regenerated from `runs`."""
    out, last = [], 0
    for _, body, end, template, table in _blocks(text):
        lines = render_block(template, lesson, runs, table)
        out.append(text[last:body])
        out.append("".join(f"# {line}".rstrip() + "\n" for line in lines))
        last = end
    out.append(text[last:])
    return "".join(out)


def lesson_sources(root: Path = ROOT) -> list[Path]:
    return sorted((root / "notebooks" / "src").glob("[0-9][0-9]*_*.py"))


def write(root: Path = ROOT, runs: list[ReferenceRun] | None = None, dry_run: bool = False) -> list[Path]:
    """Regenerate every lesson source's blocks; return the sources that changed (would change)."""
    runs = reference_runs(root / "course_lib" / "reference_runs") if runs is None else runs
    changed = []
    for src in lesson_sources(root):
        text = src.read_text()
        wanted = render_source(text, lesson_of(src), runs)
        if wanted != text:
            changed.append(src)
            if not dry_run:
                src.write_text(wanted)
    return changed


def stale(root: Path = ROOT) -> list[Path]:
    return write(root, dry_run=True)


def wanted_figures(root: Path = ROOT) -> dict[str, set[str]]:
    """Lesson -> the figure names its own and other lessons' templates read from it."""
    wanted: dict[str, set[str]] = {}
    for src in lesson_sources(root):
        for template, _ in templates(src.read_text()):
            for lesson, name, _ in template_fields(template, lesson_of(src)):
                wanted.setdefault(lesson, set()).add(name)
    return wanted


def git_label(root: Path = ROOT) -> str:
    """HEAD's short hash, with '+' when tracked files differ from it (the lessons that ran)."""
    from .bundle import git_commit

    git = git_commit(root)
    if not git:
        return "unknown"
    return git["git_commit"][:7] + ("+" if git["git_uncommitted_changes"] else "")


def record(
    root: Path = ROOT, source: str | None = None, directory: Path | None = None, commit: str | None = None
) -> Path:
    """Store this machine's figures (saved by a full run of the lessons) as its CPU class's reference run."""
    from ..measure.results import environment_fingerprint

    here = environment_fingerprint()
    wanted = wanted_figures(root)
    figures: dict[str, dict[str, Any]] = {}
    problems = []
    for lesson in sorted({lesson_of(s) for s in lesson_sources(root)}):
        saved = load_figures(lesson)
        if saved is None:
            if wanted.get(lesson):
                problems.append(f"lesson {lesson} saved no figures")
            continue
        if saved["environment"]["hash"] != here["hash"]:
            problems.append(
                f"lesson {lesson}'s figures come from another environment ({saved['environment']['cpu']}, "
                f"{saved['date']})"
            )
            continue
        missing = sorted(wanted.get(lesson, set()) - set(saved["figures"]))
        if missing:
            problems.append(f"lesson {lesson} did not save {', '.join(missing)}")
        figures[lesson] = saved["figures"]
    if problems:
        raise ReferenceError(
            "Cannot record a reference run: "
            + "; ".join(problems)
            + ". Run every lesson on this machine first (`python -m course_lib run`)."
        )
    cls = cpu_class()
    run = ReferenceRun(
        cpu_class=cls.slug,
        label=cls.label,
        machine=here["machine"],
        commit=commit or git_label(root),
        date=datetime.now(UTC).isoformat(timespec="seconds"),
        source=source or "python -m course_lib run, then python -m course_lib reference record",
        versions=here["versions"],
        figures=figures,
    )
    directory = directory or (root / "course_lib" / "reference_runs")
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{cls.slug}.json"
    path.write_text(json.dumps(run.to_dict(), indent=1, ensure_ascii=False) + "\n")
    return path


__all__ = [
    "REFERENCE_DIR",
    "ReferenceError",
    "fill",
    "record",
    "render_block",
    "render_source",
    "stale",
    "template_fields",
    "templates",
    "wanted_figures",
    "write",
]
