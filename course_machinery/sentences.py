"""Every sentence of a lesson that states a result is bound to the claim that checks it.

A markdown sentence that states a measured result, a comparison or a generalisation (it has one of
TRIGGERS: faster, slower, more, fewer, as ... as, every, all, none, never, always, both, several,
far, a few, or a number with x, %, ms, MB, dB) must be one of:

- bound to a claim: `<!-- claim: name -->` (a sentence of the lesson's claims module,
  course_machinery/checks/claimsNN.py) or `<!-- claim: 05.name -->` (another lesson's), placed inside the
  sentence or right after it;
- a labelled quote: a "> " quote line, or a sentence marked `<!-- quote -->` that names its source;
- a definition or a setting: a "*Jargon:*" paragraph, or a sentence marked `<!-- setting -->` (a
  choice the lesson makes, a fact of a format, a platform or a library's documented behaviour) or
  `<!-- definition -->`;
- a question.

The generated reference blocks (figures of the stored runs, labelled with CPU and commit), code
spans, formulas and link targets are not sentences of the lesson.

    python -m course_lib sentences [LESSON ...]    lists the unbound sentences (exit 1 if any)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

TRIGGERS = re.compile(
    r"\b(faster|slower|more|fewer|as (?:\w+ ){0,2}\w+ as|every|all|none|never|always|both|several|far|a few)\b"
    r"|(?<![\w.])\d[\d,]*(?:\.\d+)?(?:[–-]\d[\d,]*(?:\.\d+)?)?\s?(?:x|%|ms|MB|dB)(?!\w)",
    re.IGNORECASE,
)
MARKER = re.compile(r"<!--\s*(claim|quote|setting|definition):?\s*([\w.\-]*)\s*-->")
REFERENCE_BLOCK = re.compile(r"<!-- reference(?:-table|-order)?:.*?<!-- /reference -->", re.S)
QUOTE_LABEL = re.compile(r"seed|quote|documentation|docs|says|writes|according to|paper|table|source", re.I)


@dataclass(frozen=True)
class Found:
    """One sentence of a lesson's markdown, with the markers that bind it."""

    lesson: str
    text: str  # as the learner reads it (markers, code spans and formulas removed)
    markers: tuple[tuple[str, str], ...]  # (kind, name)

    @property
    def triggers(self) -> list[str]:
        return [m.group() for m in TRIGGERS.finditer(self.text)]

    def problem(self) -> str:
        """Why the sentence is not acceptable as it stands ('' when it is)."""
        kinds = {k for k, _ in self.markers}
        if "quote" in kinds and not QUOTE_LABEL.search(self.text):
            return "marked as a quote, but names no source (seed, documentation, paper ...)"
        if kinds or self.text.rstrip().endswith("?") or not self.triggers:
            return ""
        return f"states a result ({', '.join(dict.fromkeys(t.lower() for t in self.triggers))}) and is bound to no claim"


def _clean(text: str) -> str:
    text = REFERENCE_BLOCK.sub("", text)
    text = re.sub(r"<!-- (?!claim|quote|setting|definition)[^>]*-->", "", text, flags=re.S)
    text = re.sub(r"`[^`]*`", "`…`", text)
    text = re.sub(r"\$\$.*?\$\$|\$[^$\n]*\$", "$…$", text, flags=re.S)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    text = re.sub(r'"[^"\n]{1,200}"|“[^”]{1,200}”', '"…"', text)  # words mentioned, or quoted, not used
    return text


def _units(markdown: str) -> list[str]:
    """Paragraphs and list items of one markdown cell, quote lines and Jargon paragraphs left out."""
    units: list[str] = []
    for paragraph in re.split(r"\n\s*\n", markdown):
        lines = [line for line in paragraph.splitlines() if not line.lstrip().startswith(">")]
        if not lines or lines[0].lstrip().startswith("*Jargon:*"):
            continue
        if lines[0].lstrip().startswith("|"):  # a table: each row is one unit
            units += [line for line in lines if not re.match(r"^\s*\|[\s|:-]*\|\s*$", line)]
            continue
        current: list[str] = []
        for line in lines:
            if re.match(r"^\s*(?:[-*]|\d+\.)\s", line) or line.lstrip().startswith("#"):
                if current:
                    units.append(" ".join(current))
                current = [line.strip()]
            else:
                current.append(line.strip())
        if current:
            units.append(" ".join(current))
    return units


def sentences_of_markdown(markdown: str, lesson: str) -> list[Found]:
    """The sentences of one markdown cell, each with its markers (a marker that opens a sentence
    belongs to the one before it)."""
    out: list[Found] = []
    for unit in _units(_clean(markdown)):
        pieces = re.split(r"(?<=[.!?])\s+(?=[A-Z*(`\"“<])", unit)
        merged: list[str] = []
        for piece in pieces:
            lead = re.match(r"^((?:\s*<!--[^>]*-->)+)\s*", piece)
            if lead and merged:
                merged[-1] += " " + lead.group(1).strip()
                piece = piece[lead.end() :]
            if piece.strip():
                merged.append(piece)
        for sentence in merged:
            markers = tuple((m.group(1), m.group(2)) for m in MARKER.finditer(sentence))
            text = " ".join(MARKER.sub("", sentence).split())
            if text:
                out.append(Found(lesson, text, markers))
    return out


def sentences_of(source: Path) -> list[Found]:
    """Every sentence of a lesson source's markdown cells."""
    import jupytext

    lesson = source.name.split("_", 1)[0]
    found: list[Found] = []
    for cell in jupytext.read(source).cells:
        if cell.cell_type == "markdown":
            found += sentences_of_markdown(cell.source, lesson)
    return found


def unbound(source: Path) -> list[tuple[Found, str]]:
    """The sentences of a lesson that state a result and are bound to nothing, with why."""
    return [(s, s.problem()) for s in sentences_of(source) if s.problem()]


def bound_claims(source: Path) -> dict[str, int]:
    """'03.name' -> how many sentences of this lesson source are bound to it."""
    out: dict[str, int] = {}
    for s in sentences_of(source):
        for kind, name in s.markers:
            if kind == "claim":
                key = name if re.match(r"^\d\d[a-z]?\.", name) else f"{s.lesson}.{name}"
                out[key] = out.get(key, 0) + 1
    return out


def main(lessons: list[str], root: Path) -> int:
    """List the unbound sentences of the named lessons (all by default); 1 when there are any."""
    sources = sorted((root / "notebooks" / "src").glob("[0-9][0-9]*_*.py"))
    if lessons:
        sources = [s for s in sources if s.name.split("_", 1)[0] in lessons]
    total = 0
    for source in sources:
        found = unbound(source)
        total += len(found)
        for sentence, why in found:
            print(f"{sentence.lesson}: {why}: {sentence.text[:160]}")
    print(f"{total} unbound sentences in {len(sources)} lessons.")
    return 1 if total else 0


# --------------------------------------------------------------------------------------------
# A claim can fail
# --------------------------------------------------------------------------------------------
def constant_verdicts(rule) -> list[str]:
    """The places where a rule's verdict is written as a constant: `return True`, `return None`,
    or a conditional whose branches are both constants (`True if x else None`)."""
    import ast
    import inspect
    import textwrap

    tree = ast.parse(textwrap.dedent(inspect.getsource(rule)))
    found = []
    for node in ast.walk(tree):
        value = node.value if isinstance(node, ast.Return) else None
        if value is None and isinstance(node, ast.Lambda):
            value = node.body
        if value is None:
            continue
        if isinstance(value, ast.Constant):
            found.append(f"returns the constant {value.value!r}")
        for sub in ast.walk(value):
            if (
                isinstance(sub, ast.IfExp)
                and isinstance(sub.body, ast.Constant)
                and isinstance(sub.orelse, ast.Constant)
            ):
                found.append(f"chooses between two constants ({ast.unparse(sub)})")
    return found


def _variants(value):
    """Other values a figure could have taken: the search space of `can_fail`."""
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int | float):
        x = float(value)
        out = [0.0, -x, x / 10, x * 10, x + 1, x - 1, 1 - x, 0.5, 2.0, 1e-6, 1e6, -1.0, 0.05, 0.25, 0.95]
        return [type(value)(v) if isinstance(value, int) else v for v in out]
    if isinstance(value, str):
        return ["", "another " + value, value.upper() + "?"]
    if isinstance(value, list):
        return [
            [],
            value[::-1],
            [v for x in value for v in _variants(x)[:1]],
            [v for x in value for v in _variants(x)[3:4]],
        ]
    if isinstance(value, dict) and {"value", "low", "high"} <= set(value):
        v = float(value["value"])
        unit = value.get("unit", "x")
        shapes = [
            (0.1, 0.05, 0.15),
            (10, 9, 11),
            (1, 0.5, 1.5),
            (-1, -1.5, -0.5),
            (1, 0.5, 1.5),
            (0, -0.2, 0.2),
            (5, 4, 6),
            (0.5, 0.4, 0.6),
            (2.5, 2.4, 2.6),
            (0.999, 0.99, 1.0),
        ]
        shapes += [(v * k, v * k * 0.95, v * k * 1.05) for k in (0.1, 0.5, 2, 10, -1)]
        return [{"value": a, "low": lo, "high": hi, "unit": unit} for a, lo, hi in shapes]
    if isinstance(value, dict):
        out = []
        for key, inner in value.items():
            out += [{**value, key: v} for v in _variants(inner)[:6]]
        return out
    return []


def can_fail(sentence, figures: dict, cpu: dict | None = None) -> bool:
    """Whether some other value of the figures its rule reads makes the sentence's rule say False.

    Tries each figure's variants alone, then pairs of figures; `figures` is one run's (stored or
    live) that the rule reads without a missing figure."""
    from itertools import combinations, product

    from course_machinery.claims import Figures, MissingFigure, NotMeasured

    probe = Figures(figures)
    try:
        sentence.rule(probe)
    except (MissingFigure, NotMeasured):
        raise
    except Exception:
        pass
    keys = list(dict.fromkeys(probe.read))

    def says_false(values: dict) -> bool:
        try:
            return sentence.rule(Figures(values)) is False
        except (ZeroDivisionError, ValueError, TypeError, KeyError, IndexError, NotMeasured, OverflowError):
            return False

    for key in keys:
        if any(says_false({**figures, key: v}) for v in _variants(figures[key])):
            return True
    for a, b in combinations(keys, 2):
        for va, vb in product(_variants(figures[a])[:8], _variants(figures[b])[:8]):
            if says_false({**figures, a: va, b: vb}):
                return True
    return False


def size_words_unchecked(sentence) -> list[str]:
    """The size words a sentence uses whose function (claims.SIZE_WORDS) its rule does not call."""
    import inspect

    from course_machinery.claims import SIZE_WORDS

    source = inspect.getsource(sentence.rule)
    body = source[source.index("def ") :]
    text = sentence.text.lower()
    missing = []
    for phrase, function in SIZE_WORDS.items():
        used = re.search(rf"\b{re.escape(phrase)}\b", text) and f"{function}(" not in body
        # "about a quarter" is decided by a_quarter alone, not by about() as well
        longer = any(
            p != phrase and phrase in p and re.search(rf"\b{re.escape(p)}\b", text) for p in SIZE_WORDS
        )
        if used and not longer:
            missing.append(f"{phrase!r} (decide it with claims.{function})")
    return missing
