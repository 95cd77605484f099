"""The course as a static HTML site: the executed lessons and the report, built with jupyter-book 1.

`python -m course_lib site` (and `make site`) calls `build_site`. Nothing is executed here: the pages
show the outputs that `python -m course_lib run` (or the notebook test) stored in the executed
notebooks, so every number on the site is what that machine measured. The build is offline: the
theme ships its assets, MathJax comes from the `sphinx-mathjax-offline` package, and no widget
JavaScript is loaded, because ipywidgets cannot run on a static page. Each explorer is shown instead
as it stood when the notebook finished (its status line and plot, taken from the widget state that
nbclient saves in the notebook), under a note that says how to use it live.
"""

from __future__ import annotations

import copy
import html
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import nbformat

from .paths import BUILD, ROOT
from .runner import lesson_notebooks

if TYPE_CHECKING:
    from sphinx.application import Sphinx

DEFAULT_OUT = BUILD / "site"
VIEW_MIME = "application/vnd.jupyter.widget-view+json"
STATE_MIME = "application/vnd.jupyter.widget-state+json"
NOTE_CLASS = "course-widget-note"
LIVE = "run this notebook live (Colab, Binder or <code>make lab</code>) to use it"
RUN_FIRST = "run `python -m course_lib run` first (it executes every lesson into build/notebooks/)"

# Widgets that only lay out, style or show things; anything else with a value is a control.
_PASSIVE = {
    "HTMLModel",
    "HTMLMathModel",
    "LabelModel",
    "OutputModel",
    "ImageModel",
    "FloatProgressModel",
    "IntProgressModel",
    "LayoutModel",
}


class SiteError(RuntimeError):
    """The site cannot be built as asked; the message says how to fix it."""


# --------------------------------------------------------------------------------------------
# Which executed lessons can be used
# --------------------------------------------------------------------------------------------
def notebook_problem(nb: nbformat.NotebookNode) -> str | None:
    """Why an executed notebook cannot go on the site (not executed, stopped early, failed), or None."""
    code = [(i, c) for i, c in enumerate(nb.cells, 1) if c.cell_type == "code" and c.source.strip()]
    if not code:
        return None
    if not any(c.get("outputs") for _, c in code):
        return "has no outputs: it was never executed"
    for i, cell in code:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                return f"stopped with an error in cell {i} ({out.get('ename')}: {out.get('evalue')})"
        if cell.get("execution_count") is None:
            return f"was not executed to the end (cell {i} never ran)"
    return None


def executed_problems(executed: Path, sources: Path = ROOT / "notebooks") -> dict[str, str]:
    """Lesson name -> why its executed copy in `executed` cannot be reused as is; empty when all can.

    A copy is reusable when it is there, ran to the end without an error and is newer than its
    source in `sources` (an edited lesson must be run again).
    """
    problems: dict[str, str] = {}
    lessons = lesson_notebooks(sources)
    if not lessons:
        raise SiteError(f"no lesson notebooks (NN_*.ipynb) in {sources}")
    for source in lessons:
        done = Path(executed) / source.name
        if not done.exists():
            problems[source.name] = f"missing from {executed}"
        elif done.stat().st_mtime < source.stat().st_mtime:
            problems[source.name] = "older than its source notebook"
        elif problem := notebook_problem(nbformat.read(done, as_version=4)):
            problems[source.name] = problem
    return problems


# --------------------------------------------------------------------------------------------
# Widgets as static outputs
# --------------------------------------------------------------------------------------------
def _html_output(fragment: str) -> nbformat.NotebookNode:
    text = re.sub(r"<[^>]+>", " ", fragment)
    text = " ".join(html.unescape(text).split())
    return nbformat.v4.new_output("display_data", data={"text/html": fragment, "text/plain": text})


def _control_value(state: dict) -> str | None:
    """The value a control showed when the notebook finished, as text (None for non-controls)."""
    labels = state.get("_options_labels")
    if labels is not None and "index" in state:
        index = state["index"]
        if isinstance(index, list):
            return ", ".join(labels[i] for i in index) or "none"
        return "none" if index is None else str(labels[index])
    if "value" in state and not isinstance(state["value"], dict | list):
        return str(state["value"])
    return None


def widget_outputs(model_id: str, widget_state: dict) -> list[nbformat.NotebookNode]:
    """Static outputs that stand for the widget `model_id`: a note when it is interactive, its
    text (status lines, progress) as HTML, and the outputs its Output widgets hold (the plots).

    `widget_state` is the notebook's saved state, model id -> {"model_name", "state"}. A model
    missing from it still gets the note, so the reader knows something interactive was there.
    """
    outputs: list[nbformat.NotebookNode] = []
    parts: list[str] = []
    controls: list[str] = []
    seen: set[str] = set()
    flushes = [0]
    found = [False]

    def flush() -> None:
        if parts:
            outputs.append(_html_output("".join(parts)))
            parts.clear()
        flushes[0] += 1

    def walk(mid: str) -> None:
        if mid in seen or mid not in widget_state:
            return
        seen.add(mid)
        found[0] = True
        name = widget_state[mid].get("model_name", "")
        state = widget_state[mid].get("state", {})
        if name == "OutputModel":
            flush()
            for out in state.get("outputs", []):
                view = out.get("data", {}).get(VIEW_MIME)
                if view:
                    walk(view["model_id"])
                else:
                    outputs.append(nbformat.from_dict(copy.deepcopy(out)))
        elif isinstance(state.get("children"), list):
            start, before = len(parts), flushes[0]
            for ref in state["children"]:
                walk(str(ref).removeprefix("IPY_MODEL_"))
            if name == "HBoxModel" and flushes[0] == before and len(parts) - start > 1:
                row = "".join(parts[start:])
                parts[start:] = [f'<div style="display:flex;gap:.6em;align-items:center">{row}</div>']
        elif name in ("HTMLModel", "HTMLMathModel"):
            parts.append(f"<div>{state.get('value', '')}</div>")
        elif name == "LabelModel":
            parts.append(f"<div>{html.escape(str(state.get('value', '')))}</div>")
        elif name in ("FloatProgressModel", "IntProgressModel"):
            low, high, value = state.get("min", 0), state.get("max", 100), state.get("value", 0)
            parts.append(f'<progress value="{value - low}" max="{high - low}"></progress>')
        elif name not in _PASSIVE and not name.endswith("StyleModel"):
            value = _control_value(state)
            if value is not None:
                label = state.get("description") or name.removesuffix("Model").lower()
                controls.append(f"{html.escape(str(label))} = {html.escape(value)}")

    walk(model_id)
    flush()
    if controls or not found[0]:
        shown = (
            f" Shown here as it was when the notebook finished ({'; '.join(controls)})."
            if controls
            else " No snapshot of it was saved with this notebook."
        )
        note = (
            f'<div class="{NOTE_CLASS}" style="border-left:4px solid #d9a400;background:#fff8e1;'
            f'padding:.4em .8em;margin:.3em 0"><b>Interactive explorer</b>: {LIVE}.{shown}</div>'
        )
        outputs.insert(0, _html_output(note))
    return outputs


_LINKED_REMOTE_IMAGE = re.compile(r"\[!\[([^\]]*)\]\((?:https?:)?//[^)\s]+\)\]\(([^)\s]+)\)")
_REMOTE_IMAGE = re.compile(r"!\[([^\]]*)\]\(((?:https?:)?//[^)\s]+)\)")
_REMOTE_IMG_TAG = re.compile(r"<img\b[^>]*\bsrc=[\"']((?:https?:)?//[^\"']+)[\"'][^>]*>", re.I)


def offline_markdown(text: str) -> str:
    """Markdown without images from the network: a linked badge becomes its link, with the badge's alt
    text (`[![Open In Colab](badge.svg)](url)` -> `[Open In Colab](url)`), any other remote image a link."""
    text = _LINKED_REMOTE_IMAGE.sub(lambda m: f"[{m[1] or 'link'}]({m[2]})", text)
    text = _REMOTE_IMAGE.sub(lambda m: f"[{m[1] or 'image'}]({m[2]})", text)
    return _REMOTE_IMG_TAG.sub(lambda m: f'<a href="{m[1]}">image</a>', text)


def static_notebook(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A copy of an executed notebook fit for a static, offline page: widget views replaced by
    `widget_outputs`, the saved widget state dropped (so no widget JavaScript from a CDN is asked for)
    and images from the network in Markdown replaced by links (`offline_markdown`)."""
    nb = copy.deepcopy(nb)
    widgets = nb.metadata.pop("widgets", None) or {}
    state = (widgets.get(STATE_MIME) or {}).get("state", {})
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = offline_markdown(cell.source)
        if cell.cell_type != "code":
            continue
        new = []
        for out in cell.get("outputs", []):
            view = out.get("data", {}).get(VIEW_MIME)
            if view is None:
                new.append(out)
            else:
                new.extend(widget_outputs(view.get("model_id", ""), state))
        cell.outputs = new
    return nb


# --------------------------------------------------------------------------------------------
# The book
# --------------------------------------------------------------------------------------------
CONFIG = """\
# Written by course_machinery/site.py for one build; edit that file, not this one.
title: onnx-quant-course
author: the onnx-quant-course authors
only_build_toc_files: true
exclude_patterns: [_build, "**.ipynb_checkpoints", .doctrees]
execute:
  execute_notebooks: "off"
parse:
  myst_enable_extensions: [colon_fence, dollarmath]
html:
  home_page_in_navbar: false
  use_repository_button: false
  use_issues_button: false
  use_edit_page_button: false
  use_multitoc_numbering: false
launch_buttons:
  notebook_interface: jupyterlab
  thebe: false
sphinx:
  extra_extensions: [sphinx-mathjax-offline, course_machinery.site]
  recursive_update: true  # merge html_theme_options below into jupyter-book's own
  config:
    html_show_copyright: false
    html_show_sphinx: false
    nb_ipywidgets_js: {}
    nb_merge_streams: true
    nb_render_markdown_format: myst  # Markdown outputs (the lessons' tables) as the cells are parsed
    html_context:
      default_mode: light
    html_theme_options:
      use_download_button: true
      use_fullscreen_button: false
      repository_url: ""
"""

INDEX = """\
# onnx-quant-course

A Jupyter-native course on **post-training INT8 quantization with ONNX Runtime**. These pages are
the lessons as they ran, top to bottom, in a fresh kernel: every number and every plot is what the
machine that ran them measured, and [the course report](report.md) sets those measurements beside the
figures the course quotes.

The interactive explorers cannot run on a static page; each is shown as it stood when its notebook
finished. To use them, run the notebooks live (Colab, Binder or `make lab`).

These pages show the exercises with their solutions, as they ran. To work through a lesson
yourself, use the Colab or Binder badge at the top of its page: it opens the **student edition**,
the same notebook with each solution left for you to write and its self-check kept.

```{tableofcontents}
```
"""


def _toc(lessons: list[str]) -> str:
    """The table of contents: the home page, the lessons in order, then the report."""
    chapters = "\n".join(f"      - file: {name}" for name in lessons)
    return textwrap.dedent("""\
        format: jb-book
        root: index
        parts:
          - caption: Lessons
            chapters:
        {chapters}
          - caption: Results
            chapters:
              - file: report
        """).format(chapters=chapters)


def _unique_scripts(app, pagename, templatename, context, doctree) -> None:
    """Drop the second copy of an inline script. Sphinx 7.4 lists an inline script that an extension adds
    after the builder started twice (once as filename None, once as ''); sphinx-thebe's `const` declared
    twice stops that script with an error in the browser."""
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, unique = set(), []
    for script in scripts:
        key = (
            getattr(script, "filename", script) or "",
            sorted((getattr(script, "attributes", None) or {}).items()),
        )
        if repr(key) not in seen:
            seen.add(repr(key))
            unique.append(script)
    scripts[:] = unique


def setup(app: Sphinx) -> dict:
    """This module is also a Sphinx extension of the site's build (see CONFIG): it mends the page scripts."""
    app.connect("html-page-context", _unique_scripts)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


def _run_sphinx(source: str, out: str) -> int:
    """The Sphinx build itself (run in a child process by `build_site`): warnings to stderr, no status."""
    from jupyter_book.sphinx import build_sphinx
    from sphinx.util.console import nocolor

    nocolor()  # plain warnings: they are captured and printed by build_site

    src = Path(source)
    result = build_sphinx(
        src,
        Path(out),
        noconfig=True,
        path_config=str(src / "_config.yml"),
        confoverrides={"external_toc_path": str(src / "_toc.yml"), "latex_individualpages": False},
        doctreedir=str(src / ".doctrees"),
        freshenv=True,
        quiet=True,
    )
    return result if isinstance(result, int) else 1


def _replace_site(built: Path, out: Path) -> None:
    """Put the freshly built site at `out`, replacing an earlier site (and nothing else)."""
    if out.exists():
        if any(out.iterdir()) and not (out / "index.html").exists():
            raise SiteError(f"{out} exists and is not a site built here; choose another --out or remove it")
        shutil.rmtree(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(built), str(out))


def build_site(
    executed_dir: Path,
    out: Path = DEFAULT_OUT,
    report: Path | None = None,
    sources: Path = ROOT / "notebooks",
) -> Path:
    """Build the static site from the executed lessons in `executed_dir`; return its index.html.

    The lessons are those in `sources` (their executed copies must all be in `executed_dir`, with
    their outputs); `report` is a report.md to show (None: made now from the results store).
    Warnings from the build are printed; a failed build raises SiteError with Sphinx's output.
    """
    executed_dir, out = Path(executed_dir), Path(out)
    lessons = lesson_notebooks(sources)
    if not lessons:
        raise SiteError(f"no lesson notebooks (NN_*.ipynb) in {sources}")
    missing = [p.name for p in lessons if not (executed_dir / p.name).exists()]
    if missing:
        raise SiteError(f"no executed copy of {', '.join(missing)} in {executed_dir}: {RUN_FIRST}")
    notebooks = {}
    for p in lessons:
        nb = nbformat.read(executed_dir / p.name, as_version=4)
        if problem := notebook_problem(nb):
            raise SiteError(f"{executed_dir / p.name} {problem}: {RUN_FIRST}")
        notebooks[p.stem] = static_notebook(nb)
    if report is None:
        from . import report as course_report

        report_md = course_report.to_markdown(course_report.build())
    elif Path(report).exists():
        report_md = Path(report).read_text()
    else:
        raise SiteError(f"no report at {report}: run `python -m course_lib report` first")

    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".site-", dir=out.parent) as tmp:
        src = Path(tmp) / "src"
        src.mkdir()
        (src / "_config.yml").write_text(CONFIG)
        (src / "_toc.yml").write_text(_toc(list(notebooks)))
        (src / "index.md").write_text(INDEX)
        (src / "report.md").write_text(report_md)
        if report is not None and (figure := Path(report).with_name("report-speedups.png")).exists():
            shutil.copy(figure, src / figure.name)  # the plot report.md shows, from beside it
        for stem, nb in notebooks.items():
            nbformat.write(nb, src / f"{stem}.ipynb")
        html_dir = Path(tmp) / "html"
        code = "import sys; from course_machinery.site import _run_sphinx; sys.exit(_run_sphinx(sys.argv[1], sys.argv[2]))"
        env = {**os.environ, "PYTHONWARNINGS": "ignore"}
        done = subprocess.run(
            [sys.executable, "-c", code, str(src), str(html_dir)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
        )
        log = (done.stdout + done.stderr).strip()
        if done.returncode != 0 or not (html_dir / "index.html").exists():
            raise SiteError(f"the jupyter-book build failed (exit {done.returncode}):\n{log[-5000:]}")
        warnings = [line for line in log.splitlines() if "WARNING" in line or "ERROR" in line]
        for line in warnings:
            print(line.replace(str(src) + os.sep, ""), file=sys.stderr)
        _replace_site(html_dir, out)
    return out / "index.html"
