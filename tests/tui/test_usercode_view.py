"""The Code view for a user's file, and hot reload wired as the app will wire it, under Pilot.

The harness app below does what GpuPlayApp does for a code file: watch it, re-check it on
save, re-run the configuration in a thread, and show the file or its error in the CodeView.
"""

from __future__ import annotations

import textwrap
import threading
from pathlib import Path

from rich.console import Console
from textual import work
from textual.app import App, ComposeResult
from textual.widgets import Static

from gpuplay.core.runner import run
from gpuplay.core.spec import RunSpec
from gpuplay.core.usercode import code_ref
from gpuplay.tui.usercode_view import code_error_renderable, recheck, show_user_code, watch_code_files
from gpuplay.tui.widgets import CodeView
from tests.tui_helpers import wait_until

GOOD = """
def inputs(rng, n=1000):
    return rng.random(n)

def step(xp, x):
    return xp.sqrt(x) + 1.0
"""


def text_of(widget: Static) -> str:
    console = Console(width=120, record=True, color_system=None)
    console.print(widget.content)
    return console.export_text()


class Harness(App[None]):
    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self.results: list = []
        self.last_good = None

    def compose(self) -> ComposeResult:
        yield CodeView()
        yield Static(id="result")

    def on_mount(self) -> None:
        self.watcher = watch_code_files(self, [self.path], self.saved)
        self.saved(self.path)

    def on_unmount(self) -> None:
        self.watcher.stop()

    def saved(self, path: Path) -> None:
        source, message, detail = recheck(path)
        show_user_code(self.query_one(CodeView), path, source, "NumPy", message, detail)
        if not message:
            self.measure(source)

    @work(thread=True, exclusive=True)
    def measure(self, source: str) -> None:
        r = run(RunSpec.make(code_ref(self.path), {}, repeat=2, warmup=1), cancel=threading.Event())
        self.call_from_thread(self.done, r, source)

    def done(self, r, source: str) -> None:
        self.results.append(r)
        if r.status == "ok":
            self.last_good = r
            self.query_one("#result", Static).update(f"median {r.median:.3g} s, error {r.error:.1e}")
        else:  # the previous good result stays shown
            show_user_code(self.query_one(CodeView), self.path, source, "NumPy", r.message, r.detail)


async def test_saving_a_broken_then_fixed_file_shows_the_error_then_reruns(tmp_path):
    path = tmp_path / "mine.py"
    path.write_text(textwrap.dedent(GOOD))
    app = Harness(path)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: len(app.results) == 1)
        assert app.results[0].status == "ok"
        good_text = text_of(app.query_one("#result", Static))
        assert "def step(xp, x):" in text_of(app.query_one("#code-left", Static))

        # a step that raises: the error and the user's frame, the good result still there
        path.write_text(textwrap.dedent(GOOD).replace("xp.sqrt(x) + 1.0", "xp.sqrt(x) + x[:3]"))
        await wait_until(pilot, lambda: len(app.results) == 2)
        right = text_of(app.query_one("#code-right", Static))
        assert "step() raised ValueError" in right and "line 6, in step" in right
        assert text_of(app.query_one("#result", Static)) == good_text

        # a syntax error: shown at once, read without running anything
        path.write_text("def step(xp, x:\n")
        await wait_until(pilot, lambda: "SyntaxError" in text_of(app.query_one("#code-right", Static)))
        assert len(app.results) == 2

        # fixed: runs again
        path.write_text(textwrap.dedent(GOOD).replace("+ 1.0", "+ 2.0"))
        await wait_until(pilot, lambda: len(app.results) == 3)
        assert app.results[2].status == "ok" and app.is_running


def test_error_renderable_has_message_and_frames():
    console = Console(width=100, record=True, color_system=None)
    console.print(
        code_error_renderable("f.py:3: step() raised X: y", 'File "/a/f.py", line 3, in step\n    boom()')
    )
    out = console.export_text()
    assert "✗ f.py:3: step() raised X: y" in out and "line 3, in step" in out and "boom()" in out
