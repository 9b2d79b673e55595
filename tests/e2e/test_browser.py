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


CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _open_browser(pw, tmp_path: Path, width: int, height: int):
    """Debian's Chromium with a fresh profile: no cookies or storage from another run."""
    return pw.chromium.launch_persistent_context(
        str(tmp_path / "chromium-profile"),
        executable_path=CHROMIUM,
        args=CHROMIUM_ARGS,
        viewport={"width": width, "height": height},
    )


def _screen_text(page) -> str:
    """What the terminal shows, read from xterm's buffer (the page exposes its terminal)."""
    return page.evaluate(
        """() => {
            const t = window.gpuplay && window.gpuplay.term && window.gpuplay.term.terminal;
            if (!t) return "";
            const b = t.buffer.active, out = [];
            for (let i = 0; i < t.rows; i++) { const l = b.getLine(i); out.push(l ? l.translateToString(true) : ""); }
            return out.join("\\n");
        }"""
    )


def _step_shown(page) -> int | None:
    import re

    m = re.search(r"step (\d+) of (\d+)", _screen_text(page))
    return int(m.group(1)) if m else None


def _wait_step(page, want, timeout: float = 90) -> int:
    """Wait until the presenter's top bar says `step N of M` with N in `want`; return N."""
    want = set(want)
    _wait(lambda: _step_shown(page) in want, timeout, f"step {sorted(want)} on screen")
    step = _step_shown(page)
    assert step is not None
    return step


def _save_png(page, tmp_path: Path, name: str) -> Path:
    png = page.screenshot()
    out = tmp_path / name
    out.write_bytes(png)
    if os.environ.get("GPUPLAY_SCREENSHOTS_DIR"):
        (Path(os.environ["GPUPLAY_SCREENSHOTS_DIR"]) / name).write_bytes(png)
    return out


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
            browser = _open_browser(pw, tmp_path, 1400, 800)
            page = browser.new_page()
            page.goto(server.url)  # the URL it printed, with its token
            page.wait_for_selector("body.-first-byte", timeout=60_000)
            _wait(lambda: "numpy" in _backends_measured(state), 90, "the app's first NumPy measurement")
            # the sidebar's controls, where the backend row highlights the current value
            controls = {"x": 0, "y": 270, "width": 390, "height": 250}
            before = page.screenshot(clip=controls)
            page.keyboard.press("b")  # no click first: the page gave the terminal the focus
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
            browser = _open_browser(pw, tmp_path, 1200, 700)
            page = browser.new_page()
            page.goto(server.url)
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


SPEAKER_DECK = (
    'title = "speaker deck"\n[defaults]\nbudget_s = 0.2\n'
    '[[steps]]\ntitle = "NumPy"\nscenario = "matmul"\nparams = { n = 64 }\ncaption = "one"\n'
    '[[steps]]\ntitle = "PyTorch"\nscenario = "matmul"\nbackend = "torch"\nparams = { n = 64 }\ncaption = "two"\n'
    '[[steps]]\ntitle = "NumPy again"\nscenario = "matmul"\nparams = { n = 96 }\ncaption = "three"\n'
)


def test_speaker_clicker_works_before_any_click(tmp_path):
    """As a speaker on a 1080p projector: open the printed URL, press the clicker's PageDown
    without clicking the page, reload and press again, open a second tab, grow the font, and
    survive a server restart (the page reconnects by itself)."""
    if CHROMIUM is None:
        _missing("no system Chromium (Debian: apt-get install chromium; .ci/run does it)")
    try:
        from playwright import sync_api
    except ImportError:
        _missing("playwright is not installed (pip install -e '.[test]')")
    deck = tmp_path / "speaker.toml"
    deck.write_text(SPEAKER_DECK)
    port = free_port()
    args = ("--demo", str(deck), "--theme", "projector")
    server = start_server(port, *args)
    try:
        with sync_api.sync_playwright() as pw:
            browser = _open_browser(pw, tmp_path, 1920, 1080)
            page = browser.pages[0] if browser.pages else browser.new_page()
            page.goto(server.url)
            _wait_step(page, {1})
            assert "token" not in page.url, "the token stays in the address bar"
            assert page.evaluate("document.activeElement.className").startswith("xterm-helper-textarea")
            page.keyboard.press("PageDown")  # a clicker's "next", with no click on the page first
            _wait_step(page, {2})

            page.reload()  # signed in by the cookie now; a new session (resumed at its step if it can)
            at = _wait_step(page, {1, 2})
            page.keyboard.press("PageDown")
            _wait_step(page, {at + 1})

            second = browser.new_page()  # a second tab, from the bare address: the cookie suffices
            second.goto(f"http://127.0.0.1:{port}/")
            _wait_step(second, {1, 2, 3})
            second.close()

            size = page.evaluate("window.gpuplay.term.terminal.options.fontSize")
            page.keyboard.press("Control+Equal")
            page.keyboard.press("Control+Equal")
            assert page.evaluate("window.gpuplay.term.terminal.options.fontSize") == size + 4
            assert page.evaluate("localStorage.getItem('gpuplay.fontSize.talk')") == str(size + 4)
            page.keyboard.press("-")  # in a talk, + and - alone scale the font too
            assert page.evaluate("window.gpuplay.term.terminal.options.fontSize") == size + 2
            page.keyboard.press("+")
            assert page.evaluate("window.gpuplay.term.terminal.options.fontSize") == size + 4
            time.sleep(1.0)
            shot = _save_png(page, tmp_path, "browser-speaker-1080p.png")
            assert shot.stat().st_size > 10_000

            # The server restarts (a new token); the page, signed in by its cookie, comes back alone.
            opened = page.evaluate("window.gpuplay.connections")
            server.terminate()
            server.wait(timeout=30)
            _wait(lambda: page.locator("#banner").is_visible(), 30, "the reconnecting banner")
            _save_png(page, tmp_path, "browser-speaker-reconnecting.png")
            server = start_server(port, *args)
            _wait(lambda: page.evaluate("window.gpuplay.connections") > opened, 90, "the page reconnected")
            _wait(lambda: _step_shown(page) is not None and page.locator("#banner").is_hidden(), 60,
                  "the presenter back on screen")  # fmt: skip
            assert page.evaluate("window.gpuplay.term.terminal.options.fontSize") == size + 4
            before = _step_shown(page)
            assert before is not None
            page.keyboard.press("PageDown")  # the focus came back with the connection
            _wait_step(page, {min(before + 1, 3)})
            _save_png(page, tmp_path, "browser-speaker-reconnected.png")
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_a_fresh_browser_starts_a_talk_at_its_first_step(tmp_path):
    """As a speaker: an earlier session left the talk at step 3; a fresh browser opens
    the URL, presses PageDown before any click and is at step 2 (it opened at step 1, not at
    another session's step); a reload of that tab goes on at its own step 2."""
    if CHROMIUM is None:
        _missing("no system Chromium (Debian: apt-get install chromium; .ci/run does it)")
    try:
        from playwright import sync_api
    except ImportError:
        _missing("playwright is not installed (pip install -e '.[test]')")
    deck = tmp_path / "speaker.toml"
    deck.write_text(SPEAKER_DECK)
    port = free_port()
    server = start_server(port, "--demo", str(deck), "--theme", "projector")
    try:
        with sync_api.sync_playwright() as pw:
            earlier = _open_browser(pw, tmp_path / "earlier", 1920, 1080)
            page = earlier.pages[0] if earlier.pages else earlier.new_page()
            page.goto(server.url)
            _wait_step(page, {1})
            page.keyboard.press("PageDown")
            _wait_step(page, {2})
            page.keyboard.press("PageDown")
            _wait_step(page, {3})  # the earlier session ends on step 3
            earlier.close()

            fresh = _open_browser(pw, tmp_path / "fresh", 1920, 1080)
            page = fresh.pages[0] if fresh.pages else fresh.new_page()
            page.goto(server.url)
            assert _wait_step(page, {1, 3}) == 1, "a fresh browser opened at another session's step"
            page.keyboard.press("PageDown")  # a clicker, before any click on the page
            _wait_step(page, {2})
            page.reload()
            assert _wait_step(page, {1, 2}) == 2, "a reload of the same tab lost its own step"
            time.sleep(1.0)
            _save_png(page, tmp_path, "browser-fresh-talk-1080p.png")
            fresh.close()
    finally:
        server.terminate()
        server.wait(timeout=30)


def _staircase_row(page, title: str) -> tuple[str, str]:
    """The staircase's row for `title` (its bar line) and the provenance line under it."""
    import re

    lines = _screen_text(page).splitlines()
    for i, line in enumerate(lines[:-1]):  # the big digits share these lines: match the row itself
        m = re.search(rf"(?<!\S){re.escape(title)} +(█+|—|measuring).*", line)
        if m:
            return m.group(0), lines[i + 1][m.start() :]
    return "", ""


def test_a_reloaded_talk_tab_keeps_its_earlier_figures(tmp_path):
    """As a speaker, keys only (no click): step 1's figure arrives, PageDown, step 2's
    arrives, reload:
    the tab resumes at its step and the earlier step's figure is still there (not "—"), marked
    as measured earlier in this talk, before the reload (not live now), and not measured again."""
    if CHROMIUM is None:
        _missing("no system Chromium (Debian: apt-get install chromium; .ci/run does it)")
    try:
        from playwright import sync_api
    except ImportError:
        _missing("playwright is not installed (pip install -e '.[test]')")
    deck = tmp_path / "speaker.toml"
    deck.write_text(SPEAKER_DECK)
    state = Path(os.environ["GPUPLAY_STATE_DIR"])  # the conftest's; inherited by the app process
    port = free_port()
    server = start_server(port, "--demo", str(deck), "--theme", "projector")
    try:
        with sync_api.sync_playwright() as pw:
            browser = _open_browser(pw, tmp_path, 1920, 1080)
            page = browser.pages[0] if browser.pages else browser.new_page()
            page.goto(server.url)
            _wait_step(page, {1})
            try:
                _wait(lambda: "numpy" in _backends_measured(state), 120, "step 1's measurement")
                page.keyboard.press("PageDown")  # a clicker, and no click on the page at all
                _wait_step(page, {2})
                _wait(lambda: "torch" in _backends_measured(state), 120, "step 2's measurement")
                _wait(lambda: "running" not in _staircase_row(page, "PyTorch")[1], 30, "step 2's figure")
            except AssertionError as exc:
                raise AssertionError(f"{exc}; on screen:\n{_screen_text(page)}") from None
            before = _backends_measured(state)
            page.reload()
            assert _wait_step(page, {1, 2}) == 2, "a reload of the tab lost its step"
            _wait(lambda: _staircase_row(page, "NumPy")[0] != "", 30, "the staircase")
            time.sleep(2.0)  # a resumed tab that re-measured or lost the figure would show it by now
            bar, tag = _staircase_row(page, "NumPy")
            png = _save_png(page, tmp_path, "browser-reloaded-talk-1080p.png")
            assert "█" in bar and "—" not in bar, f"the earlier step's figure is gone: {bar!r} ({png})"
            assert "earlier in this talk" in tag and "before a reload" in tag, tag
            assert "live" in tag  # measured live here, only earlier: said so
            assert _backends_measured(state) == before, "the resumed tab measured again"
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=30)
