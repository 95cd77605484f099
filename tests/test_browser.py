"""JupyterLab in headless Chromium: open 00_start_here, run all cells, operate the sample browser."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import ROOT
from course_lib import u8s8_can_saturate

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = pytest.mark.browser


def _require_chromium():
    if not CHROMIUM.exists():
        if os.environ.get("CI"):
            pytest.fail("Debian's chromium is not installed: apt-get install -y chromium chromium-driver")
        pytest.skip("Debian's chromium is not installed (apt-get install -y chromium chromium-driver)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab on 127.0.0.1 with a token, serving a copy of the notebooks (autosave stays there)."""
    _require_chromium()
    root = tmp_path_factory.mktemp("lab")
    for nb in (ROOT / "notebooks").glob("*.ipynb"):
        shutil.copy(nb, root / nb.name)
    # Settings and workspaces of this lab alone: no news prompt over the plots, no tabs from other labs.
    notification = (
        root / "settings" / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    )
    notification.parent.mkdir(parents=True)
    notification.write_text('{"fetchNews": "false", "checkForUpdates": false}')
    port, token = _free_port(), secrets.token_hex(16)
    log = open(root / "jupyterlab.log", "w")  # noqa: SIM115 (open for the server's lifetime)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            "--allow-root",
            "--ip=127.0.0.1",
            f"--port={port}",
            f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={root}",
            f"--LabApp.user_settings_dir={root / 'settings'}",
            f"--LabApp.workspaces_dir={root / 'workspaces'}",
            "--LabApp.news_url=",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=root,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 90
    while time.time() < deadline:
        try:
            urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2)
            break
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError((root / "jupyterlab.log").read_text()) from None
            time.sleep(0.5)
    else:
        proc.kill()
        raise RuntimeError("JupyterLab did not start in 90 s:\n" + (root / "jupyterlab.log").read_text())
    yield url, token
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


@contextlib.contextmanager
def chromium_context(profile: Path):
    """Debian's headless Chromium driven by Playwright (never `playwright install`)."""
    _require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(profile),
            executable_path=str(CHROMIUM),
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1400, "height": 1000},
        )
        yield context
        context.close()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    with chromium_context(tmp_path_factory.mktemp("chromium-profile")) as context:
        yield context


def wait_until(condition, what: str, timeout_s: float = 60) -> None:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if condition():
            return
        time.sleep(0.25)
    pytest.fail(f"timed out after {timeout_s} s waiting for {what}")


def shown_widget(page, selector: str):
    """The widget `selector` scrolled into view, its status line and plot: (widget, status, plot, text, src).

    JupyterLab skips rendering cells far outside the viewport (their text reads empty), so the widget is
    scrolled into view and its status line waited for before anything is read.
    """
    widget = page.locator(selector)
    widget.wait_for(timeout=60_000)
    widget.scroll_into_view_if_needed()
    status = widget.locator(".widget-html").first
    plot = widget.locator(".jp-OutputArea-output img").last
    plot.wait_for(timeout=60_000)
    wait_until(lambda: status.inner_text().strip(), f"the status line of {selector} to render")
    return widget, status, plot, status.inner_text(), plot.get_attribute("src")


def open_and_run_all(browser, lab, notebook: str, timeout_s: int = 300):
    url, token = lab
    page = browser.new_page()
    # ?reset: start from an empty workspace. JupyterLab saves the open tabs in ~/.jupyter, shared by every
    # lab, and would otherwise reopen the previous test's notebook beside this one (two kernels, two panels).
    page.goto(f"{url}/lab/tree/{notebook}?reset&token={token}", wait_until="domcontentloaded")
    page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=90_000)
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=90_000)
    # On a fresh server the notebook can open before the kernel specs have loaded; JupyterLab then asks
    # which kernel to start, with the notebook's own (python3) preselected. Accept it if asked.
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

    with contextlib.suppress(PlaywrightTimeoutError):
        page.locator(".jp-Dialog:has-text('Select Kernel') .jp-mod-accept").click(timeout=10_000)
    # Run ▸ Run All Cells (the command runmenu:run-all).
    page.click(".lm-MenuBar-itemLabel:text-is('Run')")
    page.click(".lm-Menu-itemLabel:text-is('Run All Cells')")
    # Done when the last code cell shows its execution count, not "[*]".
    last_prompt = page.locator(".jp-CodeCell .jp-InputPrompt").last
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        text = last_prompt.inner_text().strip()
        if text.startswith("[") and text not in ("[ ]:", "[*]:") and text[1:-2].isdigit():
            break
        time.sleep(1)
    else:
        pytest.fail(f"{notebook}: cells still running after {timeout_s} s")
    errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
    tracebacks = [e for e in errors.all_inner_texts() if "Traceback" in e or "Error" in e.split("\n")[0]]
    assert not tracebacks, tracebacks[0][:2000]
    return page


def test_start_here_runs_and_the_sample_browser_responds(browser, lab):
    page = open_and_run_all(browser, lab, "00_start_here.ipynb")
    widget = page.locator(".widget-vbox").filter(has=page.locator(".widget-dropdown")).last
    widget.wait_for(timeout=60_000)
    status = widget.locator(".widget-html").first
    image = widget.locator(".jp-OutputArea-output img").last
    image.wait_for(timeout=60_000)
    assert "test: all classes, images 1–24 of 10,000" in status.inner_text()
    before = image.get_attribute("src")

    widget.locator(".widget-dropdown select").nth(1).select_option(label="Coat")
    wait_until(lambda: "Coat" in status.inner_text(), "the status line to name the class")
    assert "of 1,000" in status.inner_text()  # 1,000 coats in the test set
    plot = widget.locator(".jp-OutputArea-output img").last
    wait_until(lambda: plot.count() and plot.get_attribute("src") != before, "the plot to be redrawn")

    widget.scroll_into_view_if_needed()
    out = ROOT / "build" / "screenshots"
    out.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(out / "00_start_here.png"))
    widget.screenshot(path=str(out / "00_sample_browser.png"))
    page.close()


def test_affine_explorers_respond(browser, lab):
    page = open_and_run_all(browser, lab, "01_affine_encoding.ipynb")
    with contextlib.suppress(Exception):  # JupyterLab's "get notified about news?" toast covers the plots
        page.locator(".jp-toast-button", has_text="No").first.click(timeout=2_000)
    out = ROOT / "build" / "screenshots"
    out.mkdir(parents=True, exist_ok=True)

    def changed(status, widget, text_before, src_before, what):
        wait_until(lambda: status.inner_text() != text_before, f"the {what} status line to change")
        plot = widget.locator(".jp-OutputArea-output img").last
        wait_until(
            lambda: plot.count() and plot.get_attribute("src") != src_before, f"the {what} plot to change"
        )
        return status.inner_text(), plot.get_attribute("src")

    # Quantization error explorer: a dropdown, then the bits slider through its readout.
    explorer, status, _, text, src = shown_widget(page, ".quantization-error-explorer")
    assert "int8 asymmetric, 256 levels" in text and "SQNR" in text

    explorer.locator(".widget-dropdown select").first.select_option(label="ReLU activations")
    text, src = changed(status, explorer, text, src, "error explorer")
    assert "int8 asymmetric" in text and "range [0," in text  # ReLU outputs are never negative

    readout = explorer.locator(".widget-slider").filter(has_text="bits").locator(".widget-readout")
    readout.click()
    page.keyboard.press("Control+A")
    page.keyboard.type("4")
    page.keyboard.press("Enter")
    text, src = changed(status, explorer, text, src, "error explorer")
    assert "int4 asymmetric, 16 levels" in text
    explorer.scroll_into_view_if_needed()
    explorer.screenshot(path=str(out / "01_quantization_error_explorer.png"))

    # Granularity explorer: per-channel -> block-wise.
    gran, g_status, _, g_text, g_src = shown_widget(page, ".granularity-explorer")
    assert "int8 symmetric per-channel" in g_text and " scales + 0 zero points" in g_text
    gran.locator(".widget-dropdown select").nth(1).select_option(label="block-wise")
    g_text, g_src = changed(g_status, gran, g_text, g_src, "granularity explorer")
    assert "block-wise (block 32)" in g_text
    gran.scroll_into_view_if_needed()
    gran.screenshot(path=str(out / "01_granularity_explorer.png"))
    page.screenshot(path=str(out / "01_affine_encoding.png"))
    page.close()


def test_calibration_explorer_responds(browser, lab):
    page = open_and_run_all(browser, lab, "03b_calibration_deep_dive.ipynb", timeout_s=600)
    explorer, status, plot, text, src = shown_widget(page, ".calibration-explorer")
    assert "MinMax [" in text and "Percentile [" in text and "clips" in text
    dropdown = explorer.locator(".widget-dropdown select").first
    first_tensor = dropdown.locator("option").first.inner_text()
    assert text.split(":")[0] != first_tensor  # the notebook opens it on another tensor
    dropdown.select_option(index=0)
    wait_until(
        lambda: status.inner_text().startswith(first_tensor + ":"), "the status line to name the tensor"
    )
    wait_until(lambda: plot.get_attribute("src") != src, "the histogram to be redrawn")
    explorer.scroll_into_view_if_needed()
    out = ROOT / "build" / "screenshots"
    out.mkdir(parents=True, exist_ok=True)
    explorer.screenshot(path=str(out / "03_calibration_explorer.png"))
    page.close()


def test_disagreement_browser_responds(browser, lab):
    page = open_and_run_all(browser, lab, "04b_where_errors_gather.ipynb", timeout_s=600)
    widget, status, plot, text, src = shown_widget(page, ".disagreement-browser")
    main = (
        "per-channel, reduce_range" if u8s8_can_saturate() else "per-channel"
    )  # lesson 04's production choice, the browser's first variant in lesson 04b
    assert text.startswith(f"{main}:") and "disagreements with fp32 in 10,000 images" in text
    widget.locator(".widget-dropdown select").first.select_option(label="weak calibration")
    wait_until(
        lambda: status.inner_text().startswith("weak calibration:"), "the status line to name the variant"
    )
    assert int(status.inner_text().split(": ")[1].split()[0].replace(",", "")) > int(
        text.split(": ")[1].split()[0].replace(",", "")
    )  # the badly calibrated model disagrees more often
    wait_until(lambda: plot.get_attribute("src") != src, "the images to be redrawn")
    widget.scroll_into_view_if_needed()
    out = ROOT / "build" / "screenshots"
    out.mkdir(parents=True, exist_ok=True)
    widget.screenshot(path=str(out / "04_disagreement_browser.png"))
    page.close()
