"""The Compare tab shows each run's own peak memory and its tensor-core activity over
the timed steps (GPM) as secondary columns: there at 120×36, the first to go at 80×24,
absent from a CPU-only session. The results come from a run on a fake CUDA device with a fake
Hopper's NVML, through the runner's own path."""

from __future__ import annotations

import copy
import csv
import functools
import html
import json
import math
import time

import pytest

from gpuplay.core.spec import RunSpec
from tests.tui.test_newuser_app import make_app
from tests.tui_helpers import wait_until
from tests.unit.gpu_fakes import (
    FakeCuda,
    FakeGpu,
    FakePynvml,
    install_cuda_run,
    install_cuda_uuids,
    install_nvml,
)

pytestmark = pytest.mark.gpu_fake

H100 = "GPU-aaaaaaaa-0000-0000-0000-000000000000"
GIB = 2**30
F = FakePynvml


def _gpu_run():
    """The run below, measured once for the module (its energy idle baseline alone waits 1 s);
    each test gets its own copy to change."""
    return copy.deepcopy(_measured_gpu_run())


@functools.cache
def _measured_gpu_run():
    """A torch run on cuda:0 (a fake H100): 1 GiB of inputs, 256 MiB more in each timed step,
    GPM saying tensor cores 71 % busy. Returned with its NumPy baseline, as the tab gets them.
    The fakes are gone when it returns: the app then sees this machine as it is (only the
    results are the GPU's), as when a GPU session's results are loaded on a laptop."""
    from gpuplay.core.measure.telemetry import RunTelemetry
    from gpuplay.core.runner import run

    with pytest.MonkeyPatch.context() as mp:
        nvml = FakePynvml([FakeGpu(H100, "NVIDIA H100 PCIe")])
        install_nvml(mp, nvml)
        install_cuda_uuids(mp, [H100])
        nvml.busy(0, {F.NVML_GPM_METRIC_SM_UTIL: 93.0, F.NVML_GPM_METRIC_ANY_TENSOR_UTIL: 71.0,
                      F.NVML_GPM_METRIC_DRAM_BW_UTIL: 12.0})  # fmt: skip
        cuda = FakeCuda(1)
        cuda.allocated = GIB
        # Each step also takes 30 ms of real time: GPM's two samples must lie over 100 ms apart
        # (NVML's refresh), or the run's activity reads n/a, as on a real GPU.
        install_cuda_run(mp, cuda, on_step=lambda call: (cuda.allocate(256 * 2**20), time.sleep(0.03)))
        spec = RunSpec.make("elementwise", {"n": 4096}, backend="torch", device="cuda:0", repeat=5, warmup=1)
        # the engine's own telemetry window (engine/server.py), which brackets the timed steps
        gpu = run(spec, telemetry=RunTelemetry())
        base = run(spec.replace(backend="numpy", device="cpu"), telemetry=RunTelemetry())
    assert gpu.status == base.status == "ok", (gpu.message, base.message)
    return base, gpu


def _screen(app) -> str:
    return html.unescape(app.export_screenshot()).replace("\xa0", " ")


async def _show(app, pilot, results):
    from gpuplay.core.studies.compare import attach_baselines
    from gpuplay.tui.widgets import CompareView

    app.session.results = results
    await pilot.press("2")
    await pilot.pause()
    view = app.query_one(CompareView)
    view.show(attach_baselines(results), None)
    await pilot.pause()
    return view


async def test_compare_shows_peak_memory_and_tensor_activity_then_drops_them_at_80x24(tmp_path):
    base, gpu = _gpu_run()
    assert gpu.peak_memory and gpu.peak_memory["bytes"] == GIB + 256 * 2**20
    assert base.peak_memory is None  # NumPy on the CPU counts none
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(pilot, lambda: app.probed)
        view = await _show(app, pilot, [base, gpu])
        assert view.columns[-2:] == ["peak mem", "tensor"], view.columns
        screen = _screen(app)
        assert "1.25 GiB" in screen and "71 %" in screen
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        await pilot.pause()
        # secondary: the first to go; what a row is and its speedup and error stay
        assert "peak mem" not in view.columns and "tensor" not in view.columns, view.columns
        assert view.columns[:3] == ["configuration", "speedup", "error"], view.columns


async def test_a_cpu_only_session_has_no_peak_memory_or_tensor_column(tmp_path):
    from gpuplay.tui.widgets import CompareView
    from tests.snapshot_feed import feed

    app = make_app(tmp_path)
    async with app.run_test(size=(300, 45)) as pilot:  # room for every column
        await wait_until(pilot, lambda: app.probed)
        feed(app)
        await pilot.press("2")
        await pilot.pause()
        columns = app.query_one(CompareView).columns
        # the scenario (one for every row) is offered after the secondary columns: it shown, they had room
        assert "scenario" in columns and "peak mem" not in columns and "tensor" not in columns, columns


@pytest.mark.parametrize("bad", [math.nan, -5.0, 1e300, math.inf, "7 GiB", True])
async def test_hostile_peak_and_activity_figures_show_as_a_dash_or_bounded(tmp_path, bad):
    base, gpu = _gpu_run()
    gpu.peak_memory = {"bytes": bad, "source": "[b]x[/b]"}  # as a hand-edited result could hold
    gpu.telemetry["gpu"]["activity"]["tensor_active"] = bad
    from gpuplay.core.studies.compare import attach_baselines
    from gpuplay.tui.viewmodels import compare_cells

    cells = compare_cells(attach_baselines([base, gpu])[1])
    assert cells["peak mem"] == "—"
    assert cells["tensor"] == ("100 %" if bad in (1e300,) else "—")  # GPM's % bounded to 0–100
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(pilot, lambda: app.probed)
        view = await _show(app, pilot, [base, gpu])
        assert "peak mem" not in view.columns  # no row has a figure to show
        assert "nan" not in _screen(app).lower()


async def test_the_apps_export_carries_peak_memory_and_gpm(tmp_path):
    base, gpu = _gpu_run()
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(pilot, lambda: app.probed)
        app.session.results = [base, gpu]
        await pilot.press("e")
        await pilot.pause()
    folder = app.export_dir
    (j,) = folder.rglob("gpuplay-session-*.json")
    doc = json.loads(j.read_text())
    (row,) = [r for r in doc["results"] if r["spec"]["backend"] == "torch"]
    assert row["peak_memory"]["bytes"] == GIB + 256 * 2**20
    assert row["gpu_activity"]["tensor_active"] == pytest.approx(71.0)
    (c,) = folder.rglob("gpuplay-session-*.csv")
    (line,) = [x for x in csv.DictReader(c.open()) if x["backend"] == "torch"]
    assert line["peak_memory_bytes"] == str(GIB + 256 * 2**20) and float(line["tensor_active_pct"]) == 71.0
    (m,) = folder.rglob("gpuplay-session-*.md")
    md = m.read_text()
    assert "peak memory 1.25 GiB" in md and "tensor cores 71 %" in md
