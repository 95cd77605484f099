"""Tables: results as Markdown, so a notebook prints a table without pandas.

markdown_table   a list of dicts -> a Markdown table, the first row's keys as columns
(Markdown as one HTML page, for the audit's and the report's pages: course_machinery.html_page.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def markdown_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """A Markdown table from a list of dicts: the keys of the first row are the columns."""
    if not rows:
        return "(no rows)"
    cols = list(rows[0])

    def cell(value: Any) -> str:  # a "|" inside a cell (e.g. "max |drift|") would end it
        return str(value).replace("|", "\\|")

    lines = ["| " + " | ".join(map(cell, cols)) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(cell(r.get(c, "")) for c in cols) + " |" for r in rows]
    return "\n".join(lines)
