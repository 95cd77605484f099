"""Markdown as one small HTML page: the audit's audit.html and the course's report.html."""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body{{font-family:system-ui,sans-serif;max-width:1300px;margin:2em auto;padding:0 1em;line-height:1.4}}
table{{border-collapse:collapse;margin:.5em 0 1em;font-size:.85em}}
td,th{{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top}}
th{{background:#f3f3f3}} td:not(:first-child){{font-variant-numeric:tabular-nums}}
img{{max-width:100%}} h2{{margin-top:2em;border-bottom:1px solid #ddd}}
</style></head><body>
{body}
</body></html>
"""


def markdown_page(
    markdown: str, title: str | None = None, images: Mapping[str, bytes] | None = None
) -> str | None:
    """`markdown` rendered by markdown-it-py (tables on, raw HTML off: a "<" in a CPU or model name
    is text) into one small page; None when markdown-it-py is not installed.

    `title` defaults to the first heading's text. Each image whose file name is a key of `images`
    is embedded as a base64 PNG, so the page travels as one file."""
    try:
        from markdown_it import MarkdownIt
    except ImportError:
        return None
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    tokens = md.parse(markdown)
    for token in tokens:
        for child in token.children or ():
            src = child.attrGet("src") if child.type == "image" else None
            if src in (images or {}):
                child.attrSet("src", "data:image/png;base64," + base64.b64encode(images[src]).decode())
    if title is None:
        heading = next((i for i, t in enumerate(tokens) if t.type == "heading_open"), None)
        title = "" if heading is None else tokens[heading + 1].content
    return PAGE.format(title=html.escape(title), body=md.renderer.render(tokens, md.options, {}))
