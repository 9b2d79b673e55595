"""`gpuplay serve` in a real browser: Debian's Chromium driven by Playwright.

Playwright's own browser download is not reachable from our machines, so the test launches the
system `chromium` (`apt-get install chromium`; .ci/run installs it). It loads the page, presses
Start, waits for the app to measure, presses `b` (backend NumPy → PyTorch), and checks both that
the controls on screen changed and that the app measured PyTorch. The page is saved as a PNG
(in the test's folder; also in $GPUPLAY_SCREENSHOTS_DIR when set, e.g. screenshots/).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from tests.e2e.serve_helpers import free_port, start_server

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

REQUIRED = os.environ.get("GPUPLAY_REQUIRE_BROWSER") == "1"  # CI: a missing browser is a failure

pytestmark = pytest.mark.slow


def _missing(reason: str) -> None:
    (pytest.fail if REQUIRED else pytest.skip)(reason)


def _backends_measured(state_dir: Path) -> list[str]:
    out = []
    for log in sorted((state_dir / "sessions").glob("session-*.jsonl")):
        for line in log.read_text(encoding="utf-8").splitlines():
            try:
                out.append(json.loads(line)["spec"]["backend"])
            except (ValueError, KeyError):
                continue
    return out


def _wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not seen within {timeout:.0f} s")
        time.sleep(0.25)


def test_browser_start_and_change_backend(tmp_path):
    if CHROMIUM is None:
        _missing("no system Chromium (Debian: apt-get install chromium; .ci/run does it)")
    try:
        from playwright import sync_api
    except ImportError:
        _missing("playwright is not installed (pip install -e '.[test]')")
    state = Path(os.environ["GPUPLAY_STATE_DIR"])  # the conftest's; inherited by the app process
    port = free_port()
    server = start_server(port)
    try:
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1400, "height": 800})
            page.goto(f"http://127.0.0.1:{port}/?delay=1")
            page.locator("#start").click()  # the page's own Start button opens the app
            page.wait_for_selector(
                "#terminal canvas, #terminal .textual-terminal, #terminal *", timeout=30_000
            )
            _wait(lambda: "numpy" in _backends_measured(state), 90, "the app's first NumPy measurement")
            # the sidebar's controls, where the backend row highlights the current value
            controls = {"x": 0, "y": 270, "width": 390, "height": 250}
            before = page.screenshot(clip=controls)
            page.locator("#terminal").click(position={"x": 700, "y": 400})  # focus the terminal
            page.keyboard.press("b")
            _wait(lambda: "torch" in _backends_measured(state), 90, "a PyTorch measurement after pressing b")
            assert page.screenshot(clip=controls) != before, "the controls on screen did not change"
            after = page.screenshot()
            (tmp_path / "browser.png").write_bytes(after)
            if os.environ.get("GPUPLAY_SCREENSHOTS_DIR"):
                target = Path(os.environ["GPUPLAY_SCREENSHOTS_DIR"]) / "browser.png"
                target.write_bytes(after)
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=20)


def test_browser_presenter_next_step(tmp_path):
    """`gpuplay serve --demo DECK --theme projector`: the presenter in the browser; → measures the next step."""
    if CHROMIUM is None:
        _missing("no system Chromium (Debian: apt-get install chromium; .ci/run does it)")
    try:
        from playwright import sync_api
    except ImportError:
        _missing("playwright is not installed (pip install -e '.[test]')")
    deck = tmp_path / "tiny.toml"
    deck.write_text(
        'title = "tiny deck"\n[defaults]\nbudget_s = 0.2\n'
        '[[steps]]\ntitle = "NumPy"\nscenario = "matmul"\nparams = { n = 256 }\ncaption = "the baseline"\n'
        '[[steps]]\ntitle = "PyTorch"\nscenario = "matmul"\nbackend = "torch"\nparams = { n = 256 }\n'
        'caption = "same CPU, another library"\n'
    )
    state = Path(os.environ["GPUPLAY_STATE_DIR"])
    port = free_port()
    server = start_server(port, "--demo", str(deck), "--theme", "projector")
    try:
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1200, "height": 700})
            page.goto(f"http://127.0.0.1:{port}/")
            _wait(lambda: "numpy" in _backends_measured(state), 90, "the presenter's first step measured")
            top = {"x": 0, "y": 0, "width": 1200, "height": 300}
            before = page.screenshot(clip=top)
            page.locator("#terminal").click(position={"x": 600, "y": 350})
            page.keyboard.press("ArrowRight")
            _wait(lambda: "torch" in _backends_measured(state), 90, "step 2 (PyTorch) measured after →")
            time.sleep(0.5)
            assert page.screenshot(clip=top) != before, "the presenter did not move to the next step"
            after = page.screenshot()
            (tmp_path / "browser-presenter.png").write_bytes(after)
            if os.environ.get("GPUPLAY_SCREENSHOTS_DIR"):
                (Path(os.environ["GPUPLAY_SCREENSHOTS_DIR"]) / "browser-presenter.png").write_bytes(after)
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=20)
