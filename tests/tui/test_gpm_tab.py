"""The Telemetry tab's GPM rows: why they are n/a on a machine without NVML, and the
figures of a Hopper beside an Ampere's reason through a fake nvidia-ml-py."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from gpuplay.tui.app import GpuPlayApp
from tests.tui_helpers import tiny_scenarios, wait_until
from tests.unit.gpu_fakes import FakeGpu, FakePynvml, install_nvml

pytestmark = pytest.mark.gpu_fake


def _panel_text(app) -> str:
    console = Console(width=160, record=True, file=io.StringIO())
    console.print(app.query_one("#telemetry-full").content)
    return console.export_text()


async def test_gpm_telemetry_tab_says_why_it_is_unavailable_without_nvml(tmp_path, monkeypatch):
    from gpuplay.core.measure import telemetry

    state = telemetry._NVML()
    state._tried = True
    state._error = "NVML unavailable: the NVIDIA driver library (libnvidia-ml.so) was not found"
    monkeypatch.setattr(telemetry, "nvml", state)
    app = GpuPlayApp([tiny_scenarios(tmp_path / "sc")], export_dir=tmp_path, budget_s=0.05, telemetry=True)
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_until(pilot, lambda: app.telemetry.latest is not None, timeout=30)
        await pilot.press("4")
        await wait_until(pilot, lambda: "GPM" in _panel_text(app), timeout=30)
        gpm_line = next(line for line in _panel_text(app).splitlines() if line.startswith("GPM"))
        assert "n/a: GPM counters are read through NVML (see GPU)" in gpm_line
        gpu_line = next(line for line in _panel_text(app).splitlines() if line.startswith("GPU"))
        assert "NVML unavailable: the NVIDIA driver library" in gpu_line


async def test_gpm_telemetry_tab_shows_a_hoppers_activity_and_an_amperes_reason(tmp_path, monkeypatch):
    fake = FakePynvml(
        [FakeGpu("GPU-aaaa", "NVIDIA H100 PCIe"), FakeGpu("GPU-bbbb", "NVIDIA A100", arch="ampere")]
    )
    fake.busy(0, {fake.NVML_GPM_METRIC_ANY_TENSOR_UTIL: 64.0, fake.NVML_GPM_METRIC_HMMA_TENSOR_UTIL: 63.0,
                  fake.NVML_GPM_METRIC_SM_UTIL: 88.0, fake.NVML_GPM_METRIC_DRAM_BW_UTIL: 31.0})  # fmt: skip
    install_nvml(monkeypatch, fake)
    app = GpuPlayApp([tiny_scenarios(tmp_path / "sc")], export_dir=tmp_path, budget_s=0.05, telemetry=True)
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.press("4")
        await wait_until(pilot, lambda: "tensor cores 64 %" in _panel_text(app), timeout=30)
        text = _panel_text(app)
        assert "tensor cores 64 % · SM 88 % · DRAM 31 %" in text and "HMMA 63 %" in text
        assert "NVIDIA A100 has no GPM counters (they start with Hopper" in text
        chart = app.query_one("#tchart-full")
        await wait_until(pilot, lambda: "tensor cores %" in str(chart.render()), timeout=30)
        assert "DRAM bw %" in str(chart.render())  # GPM's series beside NVML's utilisation
    assert fake.gpm_live == set()  # the app's end freed the open window's samples
