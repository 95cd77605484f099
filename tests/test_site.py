"""The static site (`python -m course_lib site`): a page per lesson and for the report, linked in course
order, nothing fetched from the network, explorers shown as snapshots; then the site in headless Chromium."""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

import nbformat
import pytest

from conftest import ROOT
from course_machinery.runner import execute_notebook, lesson_notebooks
from course_machinery.site import (
    NOTE_CLASS,
    STATE_MIME,
    VIEW_MIME,
    SiteError,
    build_site,
    executed_problems,
    offline_markdown,
    static_notebook,
    widget_outputs,
)
from test_browser import chromium_context, wait_until  # Chromium as the lab tests run it

LESSONS = lesson_notebooks(ROOT / "notebooks")
PAGES = ["index", *(p.stem for p in LESSONS), "report"]  # in reading order


# --------------------------------------------------------------------------------------------
# Fixtures: executed lessons (reused when fresh) and one site built through the command line
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def executed(tmp_path_factory) -> Path:
    """The executed lessons: tests/test_notebooks.py's copies (or else `python -m course_lib run`'s) when
    all are there, ran without error and are newer than their notebooks; otherwise every lesson is
    executed here (about 6.5 min on 2 cores)."""
    for reuse in (ROOT / "build" / "test-notebooks", ROOT / "build" / "notebooks"):
        if reuse.is_dir() and not executed_problems(reuse):
            return reuse
    out = tmp_path_factory.mktemp("executed")
    for notebook in LESSONS:
        run = execute_notebook(notebook, out, timeout=600)
        assert run.ok, f"{notebook.name} failed: {run.error}"
    return out


@pytest.fixture(scope="module")
def site(executed, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site") / "site"
    done = subprocess.run(
        [sys.executable, "-m", "course_lib", "site", "--executed", str(executed), "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"Site: {out / 'index.html'}" in done.stdout
    assert "WARNING" not in done.stderr and "ERROR" not in done.stderr, done.stderr  # quiet and clean
    return out


class Page(HTMLParser):
    """What a test needs from a built page: title, text, links, assets, output images, widget notes."""

    def __init__(self, path: Path):
        super().__init__()
        self.title, self.text, self.links, self.assets, self.output_images = "", [], [], [], 0
        self.output_tables = 0
        self.notes, self.prev, self.next, self._in_title, self._output_depth = 0, None, None, False, []
        self.feed(path.read_text())

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if self._output_depth and tag == "div":
            self._output_depth[-1] += 1
        if tag == "div" and "cell_output" in classes:
            self._output_depth.append(1)
        if tag == "title":
            self._in_title = True
        if tag == "a" and a.get("href"):
            self.links.append(a["href"])
            if "left-prev" in classes:
                self.prev = a["href"]
            if "right-next" in classes:
                self.next = a["href"]
        if tag in ("script", "img", "iframe", "source", "audio", "video", "embed") and a.get("src"):
            self.assets.append(a["src"])
        if (
            tag == "link"
            and a.get("href")
            and {"stylesheet", "preload", "icon", "modulepreload"} & set((a.get("rel") or "").split())
        ):
            self.assets.append(a["href"])
        if tag == "img" and self._output_depth:
            self.output_images += 1
        if tag == "table" and self._output_depth:
            self.output_tables += 1
        if NOTE_CLASS in classes:
            self.notes += 1

    def handle_endtag(self, tag):
        if tag == "title":
            self._in_title = False
        if tag == "div" and self._output_depth:
            self._output_depth[-1] -= 1
            if not self._output_depth[-1]:
                self._output_depth.pop()

    @property
    def plain(self) -> str:
        """The page's text, whitespace collapsed."""
        return " ".join("".join(self.text).split())

    def handle_data(self, data):
        if self._in_title:
            self.title += data
        self.text.append(data)


def lesson_title(notebook: Path) -> str:
    """The lesson's first heading, e.g. '01 · Affine encoding'."""
    for cell in nbformat.read(notebook, as_version=4).cells:
        if cell.cell_type == "markdown" and (heading := re.search(r"^# (.+)$", cell.source, re.M)):
            return heading.group(1).strip()
    raise AssertionError(f"{notebook.name} has no '# ' heading")


def expected_plots(executed_notebook: Path) -> tuple[int, int]:
    """(image/png outputs of the notebook, PNGs its displayed widgets hold in their saved state)."""
    nb = json.loads(executed_notebook.read_text())
    state = nb["metadata"].get("widgets", {}).get(STATE_MIME, {}).get("state", {})

    def pngs_in(model_id: str, seen: set) -> int:
        if model_id in seen or model_id not in state:
            return 0
        seen.add(model_id)
        s = state[model_id]["state"]
        found = sum("image/png" in o.get("data", {}) for o in s.get("outputs", []))
        return found + sum(pngs_in(str(c).removeprefix("IPY_MODEL_"), seen) for c in s.get("children", []))

    top = widget = 0
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if VIEW_MIME in data:
                widget += pngs_in(data[VIEW_MIME]["model_id"], set())
            elif "image/png" in data:
                top += 1
    return top, widget


def interactive_views(executed_notebook: Path) -> int:
    """How many widget views in the notebook have a control (a Dropdown, slider, checkbox ...)."""
    nb = json.loads(executed_notebook.read_text())
    state = nb["metadata"].get("widgets", {}).get(STATE_MIME, {}).get("state", {})

    def has_control(model_id: str) -> bool:
        model = state.get(model_id, {})
        name, s = model.get("model_name", ""), model.get("state", {})
        if (
            any(w in name for w in ("Dropdown", "Slider", "Checkbox", "Select", "Text"))
            and "HTML" not in name
        ):
            return True
        return any(has_control(str(c).removeprefix("IPY_MODEL_")) for c in s.get("children", []))

    return sum(
        has_control(o["data"][VIEW_MIME]["model_id"])
        for c in nb["cells"]
        for o in c.get("outputs", [])
        if VIEW_MIME in o.get("data", {})
    )


# --------------------------------------------------------------------------------------------
# The built site, read as files
# --------------------------------------------------------------------------------------------
def test_every_lesson_and_the_report_has_a_page(site, executed):
    for notebook in LESSONS:
        page = Page(site / f"{notebook.stem}.html")
        title = lesson_title(notebook)
        assert title in page.title, (notebook.stem, page.title)
        text = page.plain
        assert title in text
        # The executed outputs are on the page: the lesson's self-checks passed there and show it.
        assert "✅" in text, f"{notebook.stem}: no passed self-check on the page"
    report = Page(site / "report.html").plain
    assert "what this machine measured" in report and "Environment" in report
    assert "quoted claim" in report and "measured here" in report
    index = Page(site / "index.html")
    assert "onnx-quant-course" in index.title and "Interactive explorer" not in index.title
    # The pages show solutions; the home page sends learners to the student edition, and each
    # lesson page's badges open that lesson's student edition.
    assert "student edition" in index.plain
    for notebook in LESSONS:
        student = f"notebooks/student/{notebook.name}"
        links = Page(site / f"{notebook.stem}.html").links
        assert any("colab.research.google.com" in h and h.endswith(student) for h in links), notebook.stem


def test_navigation_leads_through_the_lessons_in_order_then_the_report(site):
    for here, there in zip(PAGES, PAGES[1:], strict=False):
        assert Page(site / f"{here}.html").next == f"{there}.html", f"{here} -> {there}"
        assert Page(site / f"{there}.html").prev == f"{here}.html", f"{there} <- {here}"
    # The table of contents (sidebar) lists every page in course order; on the home page, all are links.
    links = [h for h in Page(site / "index.html").links if h.removesuffix(".html") in PAGES]
    order = list(dict.fromkeys(h.removesuffix(".html") for h in links if "#" not in h))
    assert [p for p in order if p != "index"] == PAGES[1:], order
    # Every local link on every page leads to a page that exists.
    for name in PAGES:
        for href in Page(site / f"{name}.html").links:
            if not urlsplit(href).scheme and not href.startswith("#"):
                assert (site / urlsplit(href).path).exists(), f"{name}.html links to missing {href}"


def test_no_page_needs_the_network(site):
    for path in sorted(site.glob("*.html")):
        page = Page(path)
        for asset in page.assets:
            assert not re.match(r"(https?:)?//", asset), f"{path.name} loads {asset} from the network"
            assert (site / urlsplit(asset).path).exists(), f"{path.name}: {asset} is not in the site"
        text = path.read_text()
        for cdn in ("require.min.js", "embed-amd.js", "cdn.jsdelivr.net", "mathjax@", "cdnjs"):
            assert cdn not in text, f"{path.name} mentions {cdn}"
    for css in site.rglob("*.css"):
        assert not re.search(r"url\(\s*['\"]?(https?:)?//", css.read_text()), f"{css} loads from the network"
    # Lesson 01's formulas are typeset by the MathJax shipped inside the site.
    assert "_static/mathjax/tex-chtml.js" in Page(site / "01_affine_encoding.html").assets


def test_widgets_become_snapshots_with_a_note(site, executed):
    total_notes = 0
    for notebook in LESSONS:
        page = Page(site / f"{notebook.stem}.html")
        top, in_widgets = expected_plots(executed / notebook.name)
        assert page.output_images == top + in_widgets, (notebook.stem, page.output_images, top, in_widgets)
        assert page.notes == interactive_views(executed / notebook.name), notebook.stem
        total_notes += page.notes
        text = (site / f"{notebook.stem}.html").read_text()
        assert VIEW_MIME not in text and "widget-state" not in text
    assert total_notes >= 5  # the sample browser, two affine explorers, calibration, disagreements
    start = Page(site / "00_start_here.html").plain
    assert "run this notebook live (Colab, Binder or make lab) to use it" in start
    assert "split = test" in start and "images 1–24 of 10,000" in start  # its controls and status line
    # tqdm's progress bars (ipywidgets too) are shown as they ended, with no explorer note; every bar in
    # the lessons ended finished (a red one would tell a reader something failed).
    bars = 0
    for notebook in LESSONS:
        text = (site / f"{notebook.stem}.html").read_text()
        for value, high, style in progress_bars(executed / notebook.name):
            assert style == "success" and value == high, (notebook.stem, value, high, style)
            assert f'<progress value="{value}" max="{high}">' in text, notebook.stem
            bars += 1
    assert bars >= 1  # lesson 07's audit (and lesson 02's weight loading, with transformers >= 5)


def progress_bars(executed_notebook: Path) -> list[tuple[float, float, str]]:
    """(value, length, bar_style) of each progress bar saved in the notebook's widget state."""
    nb = json.loads(executed_notebook.read_text())
    state = nb["metadata"].get("widgets", {}).get(STATE_MIME, {}).get("state", {})
    return [
        (
            m["state"]["value"] - m["state"]["min"],
            m["state"]["max"] - m["state"]["min"],
            m["state"]["bar_style"],
        )
        for m in state.values()
        if m.get("model_name") in ("FloatProgressModel", "IntProgressModel")
    ]


def markdown_tables(text: str) -> int:
    """GFM tables in Markdown text: a header row followed by a delimiter row with as many cells."""
    lines = text.splitlines()

    def cells(line: str) -> int:
        return len(re.split(r"(?<!\\)\|", line.strip().strip("|")))

    return sum(
        1
        for head, rule in zip(lines, lines[1:], strict=False)
        if head.lstrip().startswith("|")
        and re.fullmatch(r"\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*", rule)
        and cells(head) == cells(rule)
    )


def test_markdown_outputs_render_their_tables(site, executed):
    """The lessons print their result tables as Markdown (display(Markdown(...))): on the site they are tables."""
    total = 0
    for notebook in LESSONS:
        nb = nbformat.read(executed / notebook.name, as_version=4)
        expected = sum(
            markdown_tables(o.data["text/markdown"])
            for c in nb.cells
            for o in c.get("outputs", [])
            if "text/markdown" in o.get("data", {})
        )
        assert Page(site / f"{notebook.stem}.html").output_tables == expected, notebook.stem
        total += expected
    assert total >= 10


def test_the_build_is_deterministic(site, executed, tmp_path):
    again = build_site(executed, tmp_path / "again", ROOT / "build" / "report.md").parent
    for path in sorted(p for p in site.rglob("*") if p.is_file()):
        rel = path.relative_to(site)
        assert (again / rel).read_bytes() == path.read_bytes(), f"{rel} differs between two builds"
    assert sum(1 for p in again.rglob("*") if p.is_file()) == sum(1 for p in site.rglob("*") if p.is_file())


TINY_LESSON = [
    nbformat.v4.new_markdown_cell("# 00 · Tiny lesson\n\nOne slider and a plot in an Output widget."),
    nbformat.v4.new_code_cell(
        "import ipywidgets as w\nimport matplotlib.pyplot as plt\n\nout = w.Output()\nwith out:\n"
        "    plt.plot([1, 3, 2])\n    plt.show()\nw.VBox([w.IntSlider(description='n', value=3), out])"
    ),
]


def test_site_command_runs_stale_lessons_first_and_reuses_fresh_ones(tmp_path):
    """`python -m course_lib site` without --executed, on a one-lesson course: the first call runs the
    lesson (nothing executed yet), the second reuses it; the explorer shows its plot from saved state."""
    sources, build, out = tmp_path / "notebooks", tmp_path / "build", tmp_path / "site"
    sources.mkdir()
    nbformat.write(nbformat.v4.new_notebook(cells=TINY_LESSON), sources / "00_tiny.ipynb")
    code = "import sys; from course_machinery.cli import site; sys.exit(site(None, *map(Path, sys.argv[1:])))"

    def site_command():
        return subprocess.run(
            [sys.executable, "-c", f"from pathlib import Path; {code}", str(out), str(sources), str(build)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
        )

    first = site_command()
    assert first.returncode == 0, first.stdout + first.stderr
    assert "00_tiny.ipynb: missing from" in first.stdout and "running the lessons first" in first.stdout
    assert (build / "notebooks" / "00_tiny.ipynb").exists() and (build / "report.md").exists()
    assert f"Site: {out / 'index.html'}" in first.stdout
    page = Page(out / "00_tiny.html")
    assert "00 · Tiny lesson" in page.title and page.notes == 1 and page.output_images == 1
    assert "n = 3" in page.plain

    second = site_command()
    assert second.returncode == 0, second.stdout + second.stderr
    assert "running the lessons first" not in second.stdout and "Executing" not in second.stdout
    assert f"Site: {out / 'index.html'}" in second.stdout


# --------------------------------------------------------------------------------------------
# Errors and the widget rendering, without a build
# --------------------------------------------------------------------------------------------
def test_missing_or_unexecuted_lessons_name_the_fix(tmp_path):
    with pytest.raises(
        SiteError, match=r"no executed copy of 00_start_here\.ipynb.*python -m course_lib run"
    ):
        build_site(tmp_path / "nothing", tmp_path / "site")
    for notebook in LESSONS:  # the committed notebooks: no outputs
        shutil.copy(notebook, tmp_path / notebook.name)
    with pytest.raises(SiteError, match=r"has no outputs.*python -m course_lib run"):
        build_site(tmp_path, tmp_path / "site")
    assert not (tmp_path / "site").exists()
    problems = executed_problems(tmp_path / "nothing")
    assert set(problems) == {p.name for p in LESSONS} and "missing" in problems[LESSONS[0].name]


def test_a_stale_or_failed_copy_is_not_reused(tmp_path, executed):
    source = LESSONS[0]
    nb = nbformat.read(executed / source.name, as_version=4)
    nbformat.write(nb, tmp_path / source.name)
    assert source.name not in executed_problems(tmp_path)
    code = next(c for c in nb.cells if c.cell_type == "code")
    code.outputs.append(nbformat.v4.new_output("error", ename="ValueError", evalue="boom", traceback=[]))
    nbformat.write(nb, tmp_path / source.name)
    assert "stopped with an error" in executed_problems(tmp_path)[source.name]
    old = source.stat().st_mtime - 60
    os.utime(tmp_path / source.name, (old, old))
    assert executed_problems(tmp_path)[source.name] == "older than its source notebook"


def test_images_from_the_network_become_links():
    badges = "[![Open In Colab](https://c.example/badge.svg)](https://c.example/nb) [![B](//b.example/b.svg)](https://b.example)"
    assert offline_markdown(badges) == "[Open In Colab](https://c.example/nb) [B](https://b.example)"
    assert offline_markdown("![plot](https://x.example/a.png)") == "[plot](https://x.example/a.png)"
    assert (
        offline_markdown("![kept](img/a.png) [a link](https://x.example)")
        == "![kept](img/a.png) [a link](https://x.example)"
    )
    assert (
        offline_markdown('<img alt="z" src="https://x.example/y.svg">')
        == '<a href="https://x.example/y.svg">image</a>'
    )


def _model(name: str, **state) -> dict:
    return {"model_name": name, "model_module": "@jupyter-widgets/controls", "state": state}


def test_an_explorer_becomes_note_status_and_plot():
    png = "iVBORw0KGgo="
    state = {
        "box": _model("VBoxModel", children=["IPY_MODEL_row", "IPY_MODEL_status", "IPY_MODEL_out"]),
        "row": _model("HBoxModel", children=["IPY_MODEL_dd", "IPY_MODEL_slider"]),
        "dd": _model("DropdownModel", description="split", _options_labels=["test", "train"], index=1),
        "slider": _model("IntSliderModel", description="page", value=3),
        "status": _model("HTMLModel", value="<b>train, page 3</b>"),
        "out": _model(
            "OutputModel",
            outputs=[
                {
                    "output_type": "display_data",
                    "data": {"image/png": png, "text/plain": "<Figure>"},
                    "metadata": {},
                }
            ],
        ),
    }
    outs = widget_outputs("box", state)
    assert [list(o.data) for o in outs] == [["text/html", "text/plain"]] * 2 + [["image/png", "text/plain"]]
    note, status, plot = outs
    assert NOTE_CLASS in note.data["text/html"] and "split = train; page = 3" in note.data["text/html"]
    assert "make lab" in note.data["text/plain"]
    assert status.data["text/html"] == "<div><b>train, page 3</b></div>" and plot.data["image/png"] == png

    missing = widget_outputs("gone", state)  # no saved state: the note alone, saying so
    assert len(missing) == 1 and "No snapshot" in missing[0].data["text/html"]

    nb = nbformat.v4.new_notebook(metadata={"widgets": {STATE_MIME: {"state": state, "version_major": 2}}})
    view = {VIEW_MIME: {"model_id": "box", "version_major": 2}, "text/plain": "VBox(...)"}
    nb.cells = [
        nbformat.v4.new_code_cell("explorer()", outputs=[nbformat.v4.new_output("display_data", data=view)])
    ]
    static = static_notebook(nb)
    assert "widgets" not in static.metadata and "widgets" in nb.metadata  # a copy; the original is kept
    assert len(static.cells[0].outputs) == 3
    assert all(VIEW_MIME not in o.data for o in static.cells[0].outputs)
    nbformat.validate(static)


# --------------------------------------------------------------------------------------------
# In headless Chromium
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def served(site):
    """The site over http on 127.0.0.1 (a thread of this process), quietly."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def chromium(tmp_path_factory):
    with chromium_context(tmp_path_factory.mktemp("chromium-profile-site")) as context:
        yield context


@pytest.mark.browser
def test_the_site_renders_in_chromium_offline(chromium, served, site, executed):
    page = chromium.new_page()
    problems: list[str] = []
    local = urlsplit(served).netloc

    def route(r):  # nothing may leave 127.0.0.1; what tries is recorded, and fails
        if urlsplit(r.request.url).netloc == local or r.request.url.startswith("data:"):
            r.continue_()
        else:
            problems.append(f"network request to {r.request.url}")
            r.abort()

    page.route("**/*", route)
    page.on(
        "console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None
    )
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("requestfailed", lambda r: problems.append(f"failed: {r.url} {r.failure}"))
    page.on("response", lambda r: problems.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)

    # Next, next, next from the home page: every lesson in order, then the report.
    page.goto(f"{served}/index.html", wait_until="load")
    visited = []
    for _ in PAGES[1:]:
        page.locator("a.right-next").click()
        page.wait_for_load_state("load")
        visited.append(urlsplit(page.url).path.strip("/").removesuffix(".html"))
    assert visited == PAGES[1:]
    assert "what this machine measured" in page.locator("h1").first.inner_text()

    for notebook in LESSONS:
        page.goto(f"{served}/{notebook.stem}.html", wait_until="load")
        title = lesson_title(notebook)
        assert title in page.title()
        assert title in page.locator("h1").first.inner_text()
        assert page.locator("nav.bd-docs-nav a", has_text="Affine encoding").count() == 1  # the sidebar
        plots = page.locator(".cell_output img")
        top, in_widgets = expected_plots(executed / notebook.name)
        assert plots.count() == top + in_widgets, notebook.stem
        widths = plots.evaluate_all("imgs => imgs.map(i => i.complete ? i.naturalWidth : 0)")
        assert all(w > 0 for w in widths), f"{notebook.stem}: an image did not load: {widths}"
        notes = page.locator(f".{NOTE_CLASS}")
        for k in range(notes.count()):
            assert notes.nth(k).is_visible()
            assert "Interactive explorer" in notes.nth(k).inner_text()
        if notebook.stem == "01_affine_encoding":  # the lesson that writes the formulas
            formulas = page.locator(".math").count()  # MathJax, served by the site, typesets them all
            assert formulas >= 4
            wait_until(
                lambda n=formulas: page.locator("mjx-container").count() == n, "MathJax to typeset", 30
            )
            assert "\\mathrm" not in page.locator("article").inner_text()

    shots = ROOT / "build" / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    page.goto(f"{served}/00_start_here.html", wait_until="load")
    note = page.locator(f".{NOTE_CLASS}").first
    note.scroll_into_view_if_needed()
    page.evaluate("window.scrollBy(0, -120)")
    page.screenshot(path=str(shots / "site_00_start_here.png"))
    page.close()
    assert not problems, "\n".join(problems)
