"""What the playground's first frame waits for: not the CLI's subcommands, not the
widgets of the tabs that are not on screen."""

from __future__ import annotations

import subprocess
import sys

from textual.app import App
from textual.widgets import DataTable

from gpuplay.tui.app import GpuPlayApp
from gpuplay.tui.tabs import TAB_CLASSES, PlaygroundTab
from gpuplay.tui.widgets import StepChart
from tests.tui_helpers import tiny_scenarios, wait_until

SUBCOMMANDS = ("run", "compare", "sweep", "calibrate", "serve", "demo", "history", "collectives")


def test_bare_gpuplay_imports_no_subcommand_and_help_still_lists_them_all():
    """`gpuplay` alone opens the playground: importing its group must not import `run`, `sweep`,
    the report or the comparisons (they cost the first frame ~80 ms); `--help` still lists them."""
    code = (
        "import sys, gpuplay.cli\n"
        "print(' '.join(m for m in sys.modules if m.startswith('gpuplay.cli.') or m == 'gpuplay.core.reports.report'))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert not [
        m for m in loaded if m.rsplit(".", 1)[-1] in SUBCOMMANDS or m == "gpuplay.core.reports.report"
    ], loaded
    out = subprocess.run(
        [sys.executable, "-m", "gpuplay", "--help"], capture_output=True, text=True, check=True
    )
    for name in SUBCOMMANDS:
        assert f"  {name} " in out.stdout


async def test_the_first_frame_is_painted_before_the_hidden_tabs_mount_their_widgets(tmp_path, monkeypatch):
    app = GpuPlayApp([tiny_scenarios(tmp_path / "sc")], export_dir=tmp_path, budget_s=0.1, telemetry=False)
    first: dict[str, int] = {}
    real = App._display

    def display(self, screen, renderable):  # each frame the app hands its driver
        if renderable is not None and not first and self is app:
            first["tables"] = len(app.query(DataTable))  # the Compare tab's table
            first["charts"] = len(app.query(StepChart))  # the Live tab's (on screen)
        return real(self, screen, renderable)

    monkeypatch.setattr(App, "_display", display)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(pilot, lambda: bool(first))
        assert first == {"tables": 0, "charts": 1}
        await wait_until(pilot, lambda: all(t.ready for t in app.query(PlaygroundTab)))
        assert len(app.query(PlaygroundTab)) == len(TAB_CLASSES)
        await pilot.press("2")  # shown once mounted: the table is there and drawn
        await wait_until(pilot, lambda: app.query_one(DataTable).columns)


FIRST_FRAME_IMPORTS = """
import asyncio, sys
from pathlib import Path
from textual.app import App
from gpuplay.tui.app import GpuPlayApp

seen = []
real = App._display

def display(self, screen, renderable):
    if renderable is not None and not seen:
        seen.append(sorted(m for m in ("psutil", "pygments") if m in sys.modules))
    return real(self, screen, renderable)

App._display = display

async def main():
    app = GpuPlayApp([Path(sys.argv[1])], telemetry=True, autostart=False, export_dir=Path(sys.argv[2]))
    async with app.run_test(size=(120, 36)) as pilot:
        while not seen or app.telemetry.latest is None:
            await asyncio.sleep(0.02)
        print(seen[0] == [], "psutil" in sys.modules, app.telemetry.latest.host.mem_total > 0, seen[0])

asyncio.run(main())
"""


def test_the_first_frame_does_not_wait_for_the_telemetry_imports(tmp_path):
    """psutil and the NVML glue (the telemetry sampler) are imported after the first frame, and
    the sampler then runs: its first snapshot reaches the app. pygments (the Code tab's syntax
    colours) is not imported for the first frame either."""
    import os

    env = {k: v for k, v in os.environ.items() if k != "GPUPLAY_IN_PROCESS"}  # the real app's engine
    env.update(GPUPLAY_STATE_DIR=str(tmp_path / "state"), GPUPLAY_CONFIG_DIR=str(tmp_path / "config"))
    out = subprocess.run(
        [sys.executable, "-c", FIRST_FRAME_IMPORTS, str(tiny_scenarios(tmp_path / "sc")), str(tmp_path)],
        capture_output=True, text=True, timeout=120, env=env, check=False,
    )  # fmt: skip
    assert out.stdout.split()[:3] == ["True", "True", "True"], out.stdout + out.stderr[-2000:]


async def test_the_hidden_tabs_mount_one_at_a_time_the_shown_one_first(tmp_path, monkeypatch):
    """After the first frame the six hidden tabs mount one at a time with a pause between, not in
    one ~100 ms block: the screen is repainted between two mounts (a key's frame need not wait
    for all six), and a tab shown before its turn is mounted next."""
    from textual.widgets import TabbedContent

    order: list[str] = []
    real, real_display = PlaygroundTab.redraw_if_shown, App._display
    app = GpuPlayApp([tiny_scenarios(tmp_path / "sc")], export_dir=tmp_path, autostart=False, telemetry=False)

    def mounted(self):
        order.append(self.id)
        if len(order) == 1:  # the first hidden tab is mounted: the user asks for the last one
            app.query_one(TabbedContent).active = "sweep"
        return real(self)

    def display(self, screen, renderable):
        if renderable is not None and order:
            order.append("frame")
        return real_display(self, screen, renderable)

    monkeypatch.setattr(PlaygroundTab, "redraw_if_shown", mounted)
    monkeypatch.setattr(App, "_display", display)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(pilot, lambda: all(t.ready for t in app.query(PlaygroundTab)))
    tabs = [t for t in order if t != "frame"]
    assert sorted(tabs) == sorted(t.TAB_ID for t in TAB_CLASSES[1:]), order
    assert order[1] == "frame", order
    assert tabs[1] == "sweep", order
