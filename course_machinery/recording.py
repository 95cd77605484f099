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
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from course_lib.files import atomic_write
from course_machinery.reference import REFERENCE_DIR, ReferenceRun, load_figures, reference_runs

from .paths import ROOT

START = re.compile(r"^# <!-- reference(-table|-claim|-order)?:", re.MULTILINE)
END = "# <!-- /reference -->"
FIELD = re.compile(r"\{(?:(\d\d[a-z]?)\.)?([A-Za-z_]\w*)(?::([^{}]*))?\}")
HEADING = "*Reference runs* (the course's stored measurements, not yours):"


class ReferenceRunError(ValueError):
    """A template or a run that cannot be used; the message says what to fix."""


def lesson_of(source: Path) -> str:
    """'03' for notebooks/src/03_static_qdq.py, '03b' for 03b_calibration_deep_dive.py."""
    return source.name.split("_", 1)[0]


def template_fields(template: str, lesson: str) -> list[tuple[str, str, str]]:
    """(lesson, figure name, format spec) of each placeholder."""
    return [(m.group(1) or lesson, m.group(2), m.group(3) or "") for m in FIELD.finditer(template)]


def fill(template: str, lesson: str, run: ReferenceRun) -> tuple[str, set[tuple[str, str]]] | None:
    """The template with `run`'s figures, and where they come from: (commit, host of a masked run or '');
    None if one is missing."""
    origins: set[tuple[str, str]] = set()
    missing = False

    def value(m: re.Match) -> str:
        nonlocal missing
        figure_lesson = m.group(1) or lesson
        found = run.figure(figure_lesson, m.group(2))
        if found is None or found[0] is None:
            missing = True
            return ""
        origins.add((found[1], run.masked_host(figure_lesson, m.group(2))))
        spec = m.group(3) or ""
        try:
            return format(found[0], spec)
        except (TypeError, ValueError) as exc:
            raise ReferenceRunError(
                f"lesson {lesson}: cannot format {m.group(2)}={found[0]!r} with {spec!r} ({exc})"
            ) from exc

    text = FIELD.sub(value, template)
    return None if missing else (text, origins)


def _commits(commits: Iterable[str]) -> str:
    commits = sorted(set(commits))
    return f"commit{'s' if len(commits) > 1 else ''} {', '.join(commits)}"


def isa_of(run: ReferenceRun) -> str:
    """The instruction-set part of a run's label: 'AVX2 only' of 'AMD EPYC Zen 3, AVX2 only'."""
    return run.label.split(", ", 1)[1] if ", " in run.label else run.label


def _where(run: ReferenceRun, origins: Iterable[tuple[str, str]]) -> str:
    """The CPU and commits of a filled template: a masked run's figures are named as emulated."""
    origins = set(origins) or {(run.commit, "")}
    real = {commit for commit, host in origins if not host}
    masked = {commit for commit, host in origins if host}
    hosts = ", ".join(sorted({host for _, host in origins if host}))
    if not masked:
        return f"**{run.label}** ({_commits(real)})"
    emulated = f"{_commits(masked)}, emulated: CPUID masked on an {hosts}"
    if not real:
        return f"**{isa_of(run)}, emulated** ({emulated})"
    return f"**{run.label}** ({_commits(real)}; {emulated})"


def render_block(template: str, lesson: str, runs: list[ReferenceRun], table: bool = False) -> list[str]:
    """The markdown lines of one block (without its markers)."""
    if not runs:
        return ["*Reference runs:* none stored yet (`python -m course_lib reference record`)."]
    if table:
        columns = [part.split("=", 1) for part in template.split(";")]
        if any(len(c) != 2 for c in columns):
            raise ReferenceRunError(f"lesson {lesson}: a reference-table template is 'header = text ; ...'")
        lines = [
            "| reference CPU | " + " | ".join(h.strip() for h, _ in columns) + " |",
            "|---" * (len(columns) + 1) + "|",
        ]
        for run in runs:
            cells, origins = [], set()
            for _, cell in columns:
                filled = fill(cell.strip(), lesson, run)
                cells.append(filled[0] if filled else "not measured")
                origins |= filled[1] if filled else set()
            if _replayed_only(run) and not origins:
                continue  # an emulated class that replayed none of these figures: no row
            lines.append(f"| {_where(run, origins)} | " + " | ".join(cells) + " |")
        return ["*Reference runs* (the course's stored measurements, not yours):", "", *lines]
    parts, commits = [], []
    for run in runs:
        filled = fill(template, lesson, run)
        if filled is None and _replayed_only(run):
            continue  # an emulated class (ARM) replays a few lessons' files only
        if filled is None:
            parts.append(f"**{_short_label(run)}** not measured yet")
            continue
        masked = any(host for _, host in filled[1])
        parts.append(f"**{_short_label(run)}{', emulated' if masked else ''}** {filled[0]}")
        commits += [commit for commit, _ in filled[1]] or [run.commit]
    where = f" ({_commits(commits)})" if commits else ""
    return [f"{HEADING} " + "; ".join(parts) + f"{where}."]


def _replayed_only(run: ReferenceRun) -> bool:
    """A class recorded on emulated CPUs (`python -m course_lib emulated`), which has figures only for
    the sections it replayed."""
    return (run.claims_source or "").startswith("emulated")


def _short_label(run: ReferenceRun) -> str:
    from course_machinery.verdicts import _short

    return _short(run.label)


def claim_record(run: ReferenceRun, lesson: str, statement: str) -> dict | None:
    """A stored run's verdict on one sentence of a lesson, or None if that run did not check it."""
    return next((c for c in run.claims.get(lesson, []) if c["statement"] == statement), None)


def render_order(template: str, lesson: str, runs: list[ReferenceRun]) -> list[str]:
    """The reference classes ranked by the template's first figure, largest first: the generated
    text for a sentence that compares classes ("the gain is largest on ..."), which no lesson types."""
    fields = template_fields(template, lesson)
    if not fields:
        raise ReferenceRunError(f"lesson {lesson}: a reference-order template needs a figure to rank by")
    first_lesson, first_name, _ = fields[0]
    ranked, missing = [], []
    for run in runs:
        found, filled = run.figure(first_lesson, first_name), fill(template, lesson, run)
        if found is None or filled is None or not isinstance(found[0], int | float):
            missing.append(f"**{run.label}**")
        else:
            ranked.append((found[0], f"{_where(run, filled[1])} {filled[0]}"))
    parts = [text for _, text in sorted(ranked, key=lambda pair: -pair[0])]
    line = "*Reference runs, largest first* (the course's stored measurements): " + "; ".join(parts) + "."
    if missing:
        line += f" Not measured on {' and '.join(missing)}."
    return [line]


CLAIM_LESSON = re.compile(r"^(\d\d[a-z]?): ")


def claim_of(template: str, lesson: str) -> tuple[str, str]:
    """(statement, lesson) a claim block names: its own lesson's sentence, or "05: ..." another's."""
    m = CLAIM_LESSON.match(template)
    return (template[m.end() :], m.group(1)) if m else (template, lesson)


def render_claim(
    statement: str, lesson: str, runs: list[ReferenceRun], extra: list[Ledger] | tuple = ()
) -> list[str]:
    """Where one claim held, from the stored ledgers: the generated text that says on which CPU
    classes a sentence held, so that no lesson says "on both" or "on every" by hand. `extra`: the
    ledgers of other runs (weights from other seeds), named after the classes when they checked it."""
    by_verdict: dict[str, list[str]] = {}
    for run in runs:
        found = claim_record(run, lesson, statement)
        verdict = found["verdict"] if found else "not checked"
        commit = run.claims_commit or run.commit
        where = f"**{run.label}** (commit {commit}{', emulated' if 'masked' in run.claims_source else ''})"
        if found and verdict == "not for this CPU" and found.get("scope"):
            where += f", the sentence being about {found['scope']}"
        by_verdict.setdefault(verdict, []).append(where)
    order = ("held", "unsettled", "contradicted", "not for this CPU", "not timed", "not checked")
    words = {
        "held": "held on",
        "unsettled": "unsettled on",
        "contradicted": "**contradicted** on",
        "not for this CPU": "not for",
        "not timed": "not timed (CPU masked) on",
        "not checked": "not checked yet on",
    }
    parts = [f"{words[v]} {' and '.join(by_verdict[v])}" for v in order if v in by_verdict]
    others: dict[str, list[str]] = {}
    for ledger in extra:
        found = ledger.verdicts().get((lesson, statement))
        if found:
            others.setdefault(found["verdict"], []).append(ledger.name)
    for verdict in order:
        if verdict in others:
            parts.append(f"{words[verdict]} the runs {', '.join(others[verdict])} (commit {extra[0].commit})")
    return [f"*Reference runs* (the course's stored checks of this sentence): {'; '.join(parts)}."]


def _blocks(text: str) -> list[tuple[int, int, int, str, str]]:
    """(start, body start, body end, template, kind) of each block in a percent source; kind is
    "sentence", "table", "claim" (a claim's statement: where it held) or "order" (the classes
    ranked by the template's first figure)."""
    blocks = []
    for m in START.finditer(text):
        close = text.find("-->", m.end())
        if close < 0:
            raise ReferenceRunError("a '<!-- reference:' template has no closing '-->'")
        raw = text[m.end() : close]
        template = " ".join(line.removeprefix("#").strip() for line in raw.splitlines()).strip()
        body = text.index("\n", close) + 1
        end = text.find(END, body)
        if end < 0:
            raise ReferenceRunError(f"the block {template[:50]!r} has no '{END}' line after it")
        kind = {None: "sentence", "-table": "table", "-claim": "claim", "-order": "order"}[m.group(1)]
        blocks.append((m.start(), body, end, template, kind))
    return blocks


def templates(text: str) -> list[tuple[str, str]]:
    """The templates of a lesson source, in order, each with its kind (sentence, table, claim)."""
    return [(template, kind) for _, _, _, template, kind in _blocks(text)]


def render_source(text: str, lesson: str, runs: list[ReferenceRun], extra: list[Ledger] | tuple = ()) -> str:
    """The lesson source with every block's body regenerated from `runs` (and the `extra` ledgers,
    for the claim blocks)."""
    out, last = [], 0
    for _, body, end, template, kind in _blocks(text):
        if (
            kind == "claim"
        ):  # superseded by <!-- claim: name --> and the check tables (tests/test_sentences.py)
            lines = render_claim(*claim_of(template, lesson), runs, extra)
        elif kind == "order":
            lines = render_order(template, lesson, runs)
        else:
            lines = render_block(template, lesson, runs, kind == "table")
        out.append(text[last:body])
        out.append("".join(f"# {line}".rstrip() + "\n" for line in lines))
        last = end
    out.append(text[last:])
    return "".join(out)


def lesson_sources(root: Path = ROOT) -> list[Path]:
    return sorted((root / "notebooks" / "src").glob("[0-9][0-9]*_*.py"))


def write(
    root: Path = ROOT,
    runs: list[ReferenceRun] | None = None,
    dry_run: bool = False,
    only: set[str] | None = None,
) -> list[Path]:
    """Regenerate every lesson source's blocks (or those of the lessons `only` names, e.g. {"03"});
    return the sources that changed (would change)."""
    directory = root / "course_machinery" / "reference_runs"
    runs = reference_runs(directory) if runs is None else runs
    extra = extra_ledgers(directory)
    changed = []
    for src in lesson_sources(root):
        if only is not None and lesson_of(src) not in only:
            continue
        text = src.read_text()
        wanted = render_source(text, lesson_of(src), runs, extra)
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
        for template, kind in templates(src.read_text()):
            if kind == "claim":
                continue
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


def saved_run(root: Path = ROOT) -> tuple[dict, dict[str, dict]]:
    """The environment and the saved figures of the last full run of the lessons (one environment
    for all of them); ReferenceRunError names what is missing."""
    wanted = wanted_figures(root)
    saved: dict[str, dict] = {}
    problems = []
    for lesson in sorted({lesson_of(s) for s in lesson_sources(root)}):
        found = load_figures(lesson)
        if found is None:
            if wanted.get(lesson):
                problems.append(f"lesson {lesson} saved no figures")
            continue
        missing = sorted(wanted.get(lesson, set()) - set(found["figures"]))
        if missing:
            problems.append(f"lesson {lesson} did not save {', '.join(missing)}")
        saved[lesson] = found
    environments = {found["environment"]["hash"]: found["environment"] for found in saved.values()}
    if len(environments) > 1:
        where = "; ".join(f"lesson {k}: {v['environment']['cpu']}, {v['date']}" for k, v in saved.items())
        problems.append(f"the lessons' figures come from {len(environments)} environments ({where})")
    if problems:
        raise ReferenceRunError(
            "Cannot record a reference run: "
            + "; ".join(problems)
            + ". Run every lesson in one environment first (`python -m course_lib run`)."
        )
    return next(iter(environments.values()), {}), saved


def _class_of(environment: dict) -> tuple[str, str]:
    """(slug, label) of the CPU class an environment fingerprint describes."""
    from course_machinery.reference import _generation, class_of

    cls = class_of(environment["cpu"], environment["machine"], environment["int8_features"])
    generation = _generation(environment["cpu"])
    if generation:
        cls = class_of(environment["cpu"], environment["machine"], environment["int8_features"], generation)
    return cls.slug, cls.label


def _masked_into(label: str, runs: list[ReferenceRun], into: str | None) -> ReferenceRun:
    """The stored run a masked run stands in for: `into`, else the one whose instruction sets match."""
    isa = label.split(", ", 1)[1]
    found = [r for r in runs if (r.cpu_class == into if into else isa_of(r) == isa)]
    if len(found) != 1:
        stored = ", ".join(f"{r.cpu_class} ({isa_of(r)})" for r in runs)
        raise ReferenceRunError(
            f"A run with masked CPU features ({label}) stands in for a stored class, and "
            f"{'--into ' + into if into else 'its instruction sets (' + isa + ')'} match"
            f"{'es' if len(found) == 1 else ''} {len(found)} of them ({stored}). Name one with --into."
        )
    return found[0]


def record(
    root: Path = ROOT,
    source: str | None = None,
    directory: Path | None = None,
    commit: str | None = None,
    into: str | None = None,
    keep_measured: bool = False,
) -> Path:
    """Store the last full run of the lessons (its figures and its claims' verdicts) as its CPU
    class's reference run.

    A run with the CPU's features masked (`python -m course_lib run --cpu-mask ...`) stands in for
    a stored class (`into`, or the one with its instruction sets): its figures replace that class's,
    each marked as measured on the masked host, except the timings (`timed`), which stay the class's
    own; its claims' verdicts become the class's ledger. With `keep_measured`, a figure the class's
    own run measured stays, and the masked run only fills the figures that run lacks."""
    environment, saved = saved_run(root)
    directory = directory or (root / "course_machinery" / "reference_runs")
    commit = commit or git_label(root)
    slug, label = _class_of(environment)
    figures = {lesson: found["figures"] for lesson, found in saved.items()}
    timed = {lesson: found.get("timed", []) for lesson, found in saved.items()}
    claims = {lesson: found.get("claims", []) for lesson, found in saved.items()}
    sentences = sentences_of(claims)
    mask = environment.get("cpu_mask", "")
    if mask:
        runs = reference_runs(directory)
        base = _masked_into(label, runs, into)
        host = reference_short_name(environment["cpu"])
        merged = {lesson: dict(values) for lesson, values in base.figures.items()}
        for lesson, values in figures.items():
            for name, value in values.items():
                if name in timed[lesson]:
                    continue  # the host's timings say nothing of this class's
                own = base.figure(lesson, name)
                if keep_measured and own is not None and not base.masked_host(lesson, name):
                    continue
                entry = {"value": value, "commit": commit, "masked": host}
                merged.setdefault(lesson, {})[name] = entry | {
                    "source": f"python -m course_lib run --cpu-mask {mask} on an {host}"
                }
        run = ReferenceRun(
            **{
                **{
                    k: getattr(base, k) for k in ("cpu_class", "label", "machine", "commit", "date", "source")
                },
                "versions": base.versions,
                "figures": merged,
                "timed": timed,
                "claims": claims,
                "sentences": {**base.sentences, **sentences},
                "sentences_commit": commit,
                "claims_commit": commit,
                "claims_source": f"masked: CPUID masked to {mask} on an {host} "
                "(sentences about speed not timed)",
            }
        )
    else:
        # The class's stored run, whatever slug an older labelling gave its file, is the one replaced:
        # a second file for one class would hold two reference runs of it.
        same = [r for r in reference_runs(directory) if r.label == label] if directory.exists() else []
        run = ReferenceRun(
            cpu_class=same[0].cpu_class if same else slug,
            label=label,
            machine=environment.get("machine", ""),
            commit=commit,
            date=datetime.now(UTC).isoformat(timespec="seconds"),
            source=source or "python -m course_lib run, then python -m course_lib reference record",
            versions=environment.get("versions", {}),
            figures=figures,
            timed=timed,
            claims=claims,
            claims_commit=commit,
            claims_source="this run",
            sentences=sentences,
            sentences_commit=commit,
        )
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{run.cpu_class}.json"
    text = json.dumps(run.to_dict(), indent=1, ensure_ascii=False) + "\n"
    atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    return path


def rejudge(
    into: str, ids: list[str], directory: Path | None = None, commit: str | None = None, root: Path = ROOT
) -> Path:
    """Judge again, by its current rule, each named sentence whose rule changed since class `into`
    was recorded, from the figures that class's own run stored: for a class no machine at hand can
    run again (the Zen 4), when a rule changed how it judges a figure but not the figure.

    Only for a sentence whose figures are computed as they were at the class's run (check the
    figure function's history first: a fingerprint covers the rule, not the figures), and only on a
    class measured natively: a masked run's speed figures are another CPU's, an emulated class is
    recorded with `python -m course_lib emulated record`. The verdict's evidence says when and from
    which run's figures it was judged."""
    from course_machinery.claims import MissingFigure, book_of, lessons_with_claims

    directory = Path(directory or (root / "course_machinery" / "reference_runs"))
    path = directory / f"{into}.json"
    if not path.is_file():
        known = ", ".join(p.stem for p in sorted(directory.glob("*.json"))) or "none"
        raise ReferenceRunError(
            f"Expected a stored class named --into; found no {path.name} (stored: {known})."
        )
    run = next(r for r in reference_runs(directory) if r.cpu_class == into)
    if run.claims_source != "this run":
        raise ReferenceRunError(
            f"Expected a class measured natively; {run.label}'s verdicts come from '{run.claims_source}'. "
            "Record it again instead (`reference record`, or `emulated record` for ARM)."
        )
    if not ids:
        raise ReferenceRunError("Name each sentence to judge again, e.g. --sentence 02b.rr-about-same-speed.")
    commit = commit or git_label(root)
    sentences = {s.id: s for lesson in lessons_with_claims() for s in book_of(lesson).sentences.values()}
    judged = {lesson: dict(records) for lesson, records in run.sentences.items()}
    for sid in ids:
        sentence = sentences.get(sid)
        if sentence is None:
            raise ReferenceRunError(f"Expected a sentence id like 02b.rr-about-same-speed; found no {sid!r}.")
        stored = run.sentences.get(sentence.lesson, {}).get(sentence.name, {})
        if stored.get("fingerprint") == sentence.fingerprint:
            raise ReferenceRunError(
                f"{sid} has not changed since {run.label} was recorded: its stored verdict stands."
            )
        raw = run.figures.get(sentence.lesson, {})
        figures = {
            k: v["value"] if isinstance(v, dict) and "commit" in v and "low" not in v else v
            for k, v in raw.items()
        }
        facts = figures.get("cpu_facts")
        if not isinstance(facts, dict):
            raise ReferenceRunError(f"{run.label} stored no cpu_facts for lesson {sentence.lesson}.")
        try:
            claim = sentence.check(figures, facts)
        except MissingFigure as missing:
            raise ReferenceRunError(
                f"{run.label}'s run stored no figure {missing} for {sid}: record the class again."
            ) from None
        (record,) = sentences_of({sentence.lesson: [claim.to_record()]})[sentence.lesson].values()
        record["evidence"] = (
            f"{record.get('evidence', '')} (judged again at {commit} "
            f"from the figures of the run at {run.commit})"
        ).strip()
        judged.setdefault(sentence.lesson, {})[sentence.name] = record
    updated = replace(run, sentences=judged)
    text = json.dumps(updated.to_dict(), indent=1, ensure_ascii=False) + "\n"
    atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    return path


def sentences_of(claims: dict[str, list[dict]]) -> dict[str, dict[str, dict]]:
    """The verdicts of the lessons' bound sentences (those with an id), by lesson and name."""
    out: dict[str, dict[str, dict]] = {}
    for lesson, records in claims.items():
        for record in records:
            if record.get("id"):
                name = record["id"].split(".", 1)[1]
                keep = ("verdict", "fingerprint", "evidence", "scope", "reason", "statement")
                out.setdefault(lesson, {})[name] = {k: record[k] for k in keep if k in record}
    return out


def reference_short_name(cpu: str) -> str:
    from course_machinery.reference import short_cpu_name

    return short_cpu_name(cpu)


# --------------------------------------------------------------------------------------------
# The claims ledger: every stored run's verdicts, and the checks across them
# --------------------------------------------------------------------------------------------
LEDGER_DIR = "ledgers"


@dataclass
class Ledger:
    """The verdicts of one run's claims, lesson by lesson, and what that run was: a reference run
    of a CPU class, or another run kept for its verdicts (the same CPU with weights trained from
    another seed, say)."""

    name: str  # e.g. "AMD EPYC Zen 4, AVX-512 VNNI" or "Intel Xeon, AVX-512 VNNI, AMX, seed 2"
    commit: str
    source: str
    claims: dict[str, list[dict[str, Any]]]

    def verdicts(self) -> dict[tuple[str, str], dict]:
        return {(lesson, c["statement"]): c for lesson, cs in self.claims.items() for c in cs}

    def counts(self) -> dict[str, int]:
        """How many claims got each verdict."""
        found: dict[str, int] = {}
        for c in self.verdicts().values():
            found[c["verdict"]] = found.get(c["verdict"], 0) + 1
        return found

    def to_dict(self) -> dict:
        return {"name": self.name, "commit": self.commit, "source": self.source, "claims": self.claims}


def extra_ledgers(directory: Path = REFERENCE_DIR) -> list[Ledger]:
    """The extra runs' ledgers, under `ledgers/` (the weights of other seeds)."""
    return [
        Ledger(**json.loads(path.read_text(encoding="utf-8")))
        for path in sorted((Path(directory) / LEDGER_DIR).glob("*.json"))
    ]


def ledgers(directory: Path = REFERENCE_DIR) -> list[Ledger]:
    """Every stored ledger: each reference run's, then the extra runs' under `ledgers/`."""
    found = [
        Ledger(run.label, run.claims_commit or run.commit, run.claims_source or run.source, run.claims)
        for run in reference_runs(directory)
        if run.claims
    ]
    return found + extra_ledgers(directory)


def record_ledger(
    name: str, root: Path = ROOT, directory: Path | None = None, commit: str | None = None
) -> Path:
    """Store the last full run's claims as an extra ledger named `name` (e.g. a run on weights
    trained from another seed), for the checks across ledgers."""
    environment, saved = saved_run(root)
    claims = {lesson: found["claims"] for lesson, found in saved.items() if found.get("claims")}
    if not claims:
        raise ReferenceRunError(
            "Cannot record a ledger: no lesson saved its claims. Run the lessons first (`python -m course_lib run`)."
        )
    slug = "-".join("".join(c if c.isalnum() else " " for c in name.lower()).split())
    source = f"python -m course_lib run on an {reference_short_name(environment['cpu'])}"
    ledger = Ledger(name, commit or git_label(root), source, claims)
    target = (directory or (root / "course_machinery" / "reference_runs")) / LEDGER_DIR / f"{slug}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(ledger.to_dict(), indent=1, ensure_ascii=False) + "\n")
    return target


@dataclass(frozen=True)
class Conflict:
    """A sentence that held on one ledger and was contradicted on another, where its scope did not
    set them apart (a claim whose scope excludes a CPU is "not for this CPU" there, never both)."""

    lesson: str
    statement: str
    held: tuple[str, ...]
    contradicted: tuple[str, ...]
    depends: tuple[str, ...]

    def __str__(self) -> str:
        return (
            f"lesson {self.lesson}: {self.statement!r} held on {', '.join(self.held)} and was contradicted "
            f"on {', '.join(self.contradicted)}; it depends on {', '.join(self.depends) or 'nothing named'}: "
            "reword it to what holds on all of them, or scope it (applies=, scope=) so that it says where."
        )


def conflicts(found: list[Ledger]) -> list[Conflict]:
    """Every sentence some ledger held and another contradicted."""
    verdicts: dict[tuple[str, str], list[tuple[str, dict]]] = {}
    for ledger in found:
        for key, record in ledger.verdicts().items():
            verdicts.setdefault(key, []).append((ledger.name, record))
    out = []
    for (lesson, statement), entries in sorted(verdicts.items()):
        held = tuple(name for name, r in entries if r["verdict"] == "held")
        against = tuple(name for name, r in entries if r["verdict"] == "contradicted")
        if held and against:
            depends = tuple(sorted({d for _, r in entries for d in r.get("depends", [])}))
            out.append(Conflict(lesson, statement, held, against, depends))
    return out


def contradictions(found: list[Ledger]) -> list[str]:
    """Every contradicted claim of every ledger, one line each."""
    return [
        f"{ledger.name} (commit {ledger.commit}), lesson {lesson}: {statement}"
        for ledger in found
        for (lesson, statement), record in sorted(ledger.verdicts().items())
        if record["verdict"] == "contradicted"
    ]


__all__ = [
    "REFERENCE_DIR",
    "Conflict",
    "Ledger",
    "ReferenceRunError",
    "conflicts",
    "contradictions",
    "ledgers",
    "record_ledger",
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


# --------------------------------------------------------------------------------------------
# The sentences' ledger: each stored run's verdicts on the lessons' current sentences
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SentenceLedger:
    """One stored run's verdicts on the sentences the lessons carry now: a verdict counts only where
    the run checked the sentence as it is written now (the same fingerprint); the others are stale."""

    label: str
    commit: str
    verdicts: dict[str, dict]  # "03.u8s8-faster" -> the stored record, for current sentences
    stale: tuple[str, ...]  # sentences the run checked in an earlier version, or never

    def counts(self) -> dict[str, int]:
        found: dict[str, int] = {}
        for record in self.verdicts.values():
            found[record["verdict"]] = found.get(record["verdict"], 0) + 1
        return found

    def contradicted(self) -> list[str]:
        return [key for key, record in self.verdicts.items() if record["verdict"] == "contradicted"]


def sentence_ledgers(runs: list[ReferenceRun] | None = None) -> list[SentenceLedger]:
    """Every stored run's ledger over the lessons' current sentences."""
    from course_machinery.claims import book_of, lessons_with_claims

    runs = reference_runs() if runs is None else runs
    current = {s.id: s for lesson in lessons_with_claims() for s in book_of(lesson).sentences.values()}
    out = []
    for run in runs:
        verdicts, stale = {}, []
        for key, sentence in current.items():
            record = run.sentences.get(sentence.lesson, {}).get(sentence.name)
            if record and record.get("fingerprint") == sentence.fingerprint:
                verdicts[key] = record
            else:
                stale.append(key)
        out.append(SentenceLedger(run.label, run.sentences_commit or run.commit, verdicts, tuple(stale)))
    return out


def sentence_conflicts(found: list[SentenceLedger]) -> list[str]:
    """Every current sentence one run held and another contradicted."""
    lines = []
    for key in sorted({k for ledger in found for k in ledger.verdicts}):
        held = [x.label for x in found if x.verdicts.get(key, {}).get("verdict") == "held"]
        against = [x.label for x in found if x.verdicts.get(key, {}).get("verdict") == "contradicted"]
        if held and against:
            lines.append(f"{key} held on {', '.join(held)} and was contradicted on {', '.join(against)}")
    return lines
