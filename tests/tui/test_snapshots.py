"""Layout snapshots at 80×24, 100×30 and 160×45, fed fixed timings so they are stable."""

from __future__ import annotations

import pytest

from gpuplay.core.backends import get_backend
from gpuplay.core.backends.base import Availability
from gpuplay.tui.app import GpuPlayApp
from tests.conftest import gpu_available
from tests.snapshot_feed import feed, feed_dtypes
from tests.tui_helpers import tiny_scenarios, wait_until

pytestmark = pytest.mark.skipif(gpu_available(), reason="snapshots are of the no-GPU layout")


@pytest.fixture(autouse=True)
def fixed_cupy_state():
    """CuPy's state differs between machines (absent in CI, installed without a device here):
    the snapshots show one fixed state, as they show fixed timings."""
    cupy = get_backend("cupy")
    saved = cupy._probe_result
    cupy._probe_result = (
        Availability(False, "CuPy is not installed: pip install 'gpuplay[cupy]' on a CUDA machine"),
        [],
    )
    yield
    cupy._probe_result = saved


def make_app(tmp_path):
    return GpuPlayApp(
        [tiny_scenarios(tmp_path / "sc")], autostart=False, telemetry=False, export_dir=tmp_path
    )


def before(tab: str | None = None, fill=feed):
    async def run_before(pilot):
        app = pilot.app
        await wait_until(pilot, lambda: app.probed)
        fill(app)
        if tab:
            await pilot.press(tab)
        await pilot.pause()

    return run_before


SIZES = [(80, 24), (100, 30), (160, 45)]


@pytest.mark.parametrize("size", SIZES)
def test_live_layout(snap_compare, tmp_path, size):
    assert snap_compare(make_app(tmp_path), terminal_size=size, run_before=before())


@pytest.mark.parametrize("size", SIZES)
def test_compare_layout(snap_compare, tmp_path, size):
    """Four PyTorch configurations that differ only in dtype or AMP, and the NumPy baseline: each
    row and bar says what makes it different, at every width."""
    assert snap_compare(make_app(tmp_path), terminal_size=size, run_before=before("2", feed_dtypes))


def test_code_layout(snap_compare, tmp_path):
    assert snap_compare(make_app(tmp_path), terminal_size=(160, 45), run_before=before("3"))


def test_telemetry_panel_without_driver(snap_compare, tmp_path):
    """The panel with NVML's real no-driver line and a fixed host snapshot."""
    from gpuplay.core.measure.telemetry import HostSnapshot, Snapshot, nvml_status

    async def run_before(pilot):
        app = pilot.app
        await wait_until(pilot, lambda: app.probed)
        feed(app)
        app.telemetry.nvml_line = nvml_status() or "NVML available"
        app.telemetry.latest = Snapshot(
            0.0, 0.0, HostSnapshot([37.0, 12.0], 6 * 2**30, 24 * 2**30, 512 * 2**20), []
        )
        await pilot.press("4")
        await pilot.pause()

    assert snap_compare(make_app(tmp_path), terminal_size=(120, 36), run_before=run_before)
