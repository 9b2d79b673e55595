"""Every tab at 80×24 and 120×36: snapshots, and what a user must see there asserted in text.

The Compare tab exists for the speedup and the error: both columns are on screen at both
sizes, with long configuration names (shortened with an ellipsis, never pushed off screen).
"""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from gpuplay.core.backends import get_backend
from gpuplay.core.backends.base import Availability
from gpuplay.core.measure.telemetry import HostSnapshot, Snapshot
from gpuplay.tui.app import GpuPlayApp
from gpuplay.tui.tabs import TAB_CLASSES
from gpuplay.tui.viewmodels import fit_columns
from gpuplay.tui.widgets import CompareView, ControlsPanel
from tests.conftest import gpu_available
from tests.snapshot_feed import feed, fixed_result
from tests.tui_helpers import tiny_scenarios, wait_until

SIZES = [(80, 24), (120, 36)]
TABS = {
    "live": "1",
    "compare": "2",
    "code": "3",
    "telemetry": "4",
    "profile": "5",
    "collectives": "6",
    "sweep": "7",
}

needs_no_gpu = pytest.mark.skipif(gpu_available(), reason="snapshots are of the no-GPU layout")


@pytest.fixture(autouse=True)
def fixed_cupy_state():
    cupy = get_backend("cupy")
    saved = cupy._probe_result
    cupy._probe_result = (Availability(False, "CuPy is not installed"), [])
    yield
    cupy._probe_result = saved


def make_app(tmp_path):
    return GpuPlayApp(
        [tiny_scenarios(tmp_path / "sc")], autostart=False, telemetry=False, export_dir=tmp_path
    )


def feed_long_names(app) -> None:
    """The baseline, torch, and configurations with long labels (AMP, compile, TF32)."""
    feed(app)
    s = app.session
    base = s.results[0]
    for i, kw in enumerate(
        [
            {"amp": "bf16", "compile": "max-autotune"},
            {"amp": "fp16", "compile": "reduce-overhead"},
            {"compile": "default"},
        ]
    ):
        spec = app.spec.replace(backend="torch", **kw)
        s.results.append(fixed_result(spec, 0.004 + 0.001 * i, 2.9e-3))
    assert base.spec.backend == "numpy"
    app.refresh_all()


def screen_text(app) -> str:
    """What the terminal shows, as plain text."""
    console = Console(width=app.size.width, height=app.size.height, record=True, file=io.StringIO())
    console.print(app.screen._compositor.render_update(full=True))
    return console.export_text()


def before(tab: str):
    async def run_before(pilot):
        app = pilot.app
        await wait_until(pilot, lambda: app.probed)
        feed_long_names(app)
        # Fixed telemetry and profile: nothing in a snapshot may depend on this machine.
        app.telemetry.nvml_line = (
            "NVML unavailable: the NVIDIA driver library (libnvidia-ml.so) was not found"
        )
        app.telemetry.latest = Snapshot(
            0.0, 0.0, HostSnapshot([37.0, 12.0], 6 * 2**30, 24 * 2**30, 512 * 2**20), []
        )
        app.tab("profile").profiles[app.spec] = {"label": app.spec.label(), "status": "refused",
                                  "message": "a fixed profile state for the layout snapshot"}  # fmt: skip
        await pilot.press(TABS[tab])
        await pilot.pause()

    return run_before


@needs_no_gpu
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("tab", list(TABS))
def test_tab_layout(snap_compare, tmp_path, tab, size):
    assert snap_compare(make_app(tmp_path), terminal_size=size, run_before=before(tab))


@needs_no_gpu
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_help_layout(snap_compare, tmp_path, size):
    """The help screen (?) over the Live tab: every key, nothing cut at either size."""

    async def open_help(pilot):
        await before("live")(pilot)
        await pilot.press("question_mark")
        await pilot.pause()

    assert snap_compare(make_app(tmp_path), terminal_size=size, run_before=open_help)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_every_tab_label_is_on_screen(tmp_path, size):
    """All seven tabs are named in the tab bar, in key order: short labels where the bar is narrow."""
    app = make_app(tmp_path)
    async with app.run_test(size=size) as pilot:
        await before("live")(pilot)
        await pilot.pause()
        bar = next(line for line in screen_text(app).splitlines() if " Live " in line)
        labels = [cls.SHORT if size[0] == 80 else cls.LABEL for cls in TAB_CLASSES]
        words = bar.split("▕", 1)[-1].split()
        assert words[: len(labels)] == labels, bar
        await pilot.press(TABS["sweep"])  # the last tab shown: the bar does not scroll the first away
        await pilot.pause()
        bar = next(line for line in screen_text(app).splitlines() if " Live " in line)
        assert all(f" {label} " in f"{bar} " for label in labels), bar


async def test_tab_labels_follow_a_resize(tmp_path):
    """A terminal resized from 120 to 80 columns and back: short labels, then full ones again."""
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await before("live")(pilot)
        for width, height, attr in ((80, 24, "SHORT"), (120, 36, "LABEL")):
            await pilot.resize_terminal(width, height)
            await pilot.pause()
            await pilot.pause()
            bar = next(line for line in screen_text(app).splitlines() if " Live " in line)
            labels = [getattr(cls, attr) for cls in TAB_CLASSES]
            assert bar.split("▕", 1)[-1].split()[: len(labels)] == labels, bar


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_compare_shows_speedup_and_error_on_screen(tmp_path, size):
    app = make_app(tmp_path)
    async with app.run_test(size=size) as pilot:
        await before("compare")(pilot)
        view = app.query_one(CompareView)
        assert view.columns[:3] == ["configuration", "speedup", "error"]
        text = screen_text(app)
        header = next(line for line in text.splitlines() if "configuration" in line)
        assert "speedup" in header and "error" in header, text
        assert "2×" in text and "3e-03" in text, text  # the figures, not only the headers
        if size[0] == 80:
            assert "…" in text  # a long configuration is shortened visibly, not cut


async def test_small_terminal_keeps_footer_and_collapses_controls_on_resize(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await before("live")(pilot)
        assert not app.query_one(ControlsPanel)._key[4]  # full controls at 120 columns
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert app.query_one(ControlsPanel)._key[4], "controls not collapsed after resizing to 80×24"
        last = screen_text(app).splitlines()[-1]
        assert "quit" in last and "help" in last, last  # the footer keeps its essential keys


def test_fit_columns_drops_the_least_important_first():
    cells = [
        {
            "configuration": "torch cpu amp=bf16 compile=max-autotune",
            "speedup": "4.24×",
            "error": "3e-03✓",
            "median": "5.0 ms",
            "±": "±2.1%",
            "compute": "bfloat16",
            "scenario": "1024² matmul",
        }
    ]
    wide = fit_columns(cells, 200)
    assert [n for n, _ in wide][-1] == "scenario" and dict(wide)["configuration"] == 39
    narrow = fit_columns(cells, 44)
    assert [n for n, _ in narrow][:3] == ["configuration", "speedup", "error"]
    assert sum(w + 2 for _, w in narrow) <= 44
    assert "scenario" not in dict(narrow)  # one scenario for every row: it tells rows nothing
    mixed = [*cells, {**cells[0], "configuration": "torch cpu", "scenario": "384² svd"}]
    narrow = fit_columns(mixed, 50)
    # rows of two scenarios: what identifies each (scenario and size) stays, secondary columns go
    assert [n for n, _ in narrow] == ["configuration", "speedup", "error", "scenario"]
    assert sum(w + 2 for _, w in narrow) <= 50
