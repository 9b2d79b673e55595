"""R9 (docs/hardening.md): the run's own peak memory on Intel XPU and Apple MPS, through the run
path (runner.run over torch's documented torch.xpu / torch.mps calls, faked; tensors on the host).

torch.xpu documents reset_peak_memory_stats and max_memory_allocated as torch.cuda does; torch.mps
has no peak, only current_allocated_memory and driver_allocated_memory: the record says n/a and why.
Verified against these fakes only, not on an Intel GPU or a Mac."""

from __future__ import annotations

import csv
import io

import pytest

from gpuplay.core.reports import report
from gpuplay.core.result import RunResult
from gpuplay.core.spec import RunSpec
from tests.unit.gpu_fakes import install_mps, install_xpu, route_device_to_host
from tests.unit.hw_helpers import reprobe_torch

pytestmark = pytest.mark.gpu_fake
GIB = 2**30


def _on_host(monkeypatch, kind):
    """A `kind` GPU that computes on the host: its factories (route_device_to_host) and the
    inputs' copy to the device (TorchBackend.from_host, as install_cuda_run does) stay on the CPU."""
    import contextlib

    import torch

    from gpuplay.core.backends import torch_backend

    route_device_to_host(monkeypatch, kind)
    if kind == "xpu":  # torch.xpu.device(i): the context manager that selects the device
        monkeypatch.setattr(torch.xpu, "device", lambda index: contextlib.nullcontext())
    real_from_host = torch_backend.TorchBackend.from_host
    monkeypatch.setattr(torch_backend.TorchBackend, "from_host",
                        lambda self, h, device, dtype: real_from_host(self, h, "cpu", dtype))  # fmt: skip
    reprobe_torch(monkeypatch)


def _run(device):
    from gpuplay.core.runner import run

    return run(RunSpec.make("elementwise", {"n": 4096}, backend="torch", device=device, repeat=5, warmup=1))


def test_an_xpu_runs_peak_memory_is_torch_xpus_count_since_the_timed_phase(monkeypatch):
    import torch

    install_xpu(monkeypatch)
    _on_host(monkeypatch, "xpu")
    peak = {"bytes": 8 * GIB, "resets": []}  # the warm-up's spike, before the timed phase

    def reset_peak_memory_stats(device=None):
        peak["resets"].append(str(device))
        peak["bytes"] = GIB + 256 * 2**20  # the timed steps' own high-water mark from here

    monkeypatch.setattr(torch.xpu, "reset_peak_memory_stats", reset_peak_memory_stats)
    monkeypatch.setattr(torch.xpu, "max_memory_allocated", lambda device=None: peak["bytes"])
    r = _run("xpu:0")
    assert r.status == "ok", (r.message, r.detail)
    assert "xpu:0" in peak["resets"]
    assert r.peak_memory == {
        "bytes": GIB + 256 * 2**20,
        "source": "torch.xpu.max_memory_allocated, timed phase",
    }
    assert RunResult.from_dict(r.to_dict()).peak_memory == r.peak_memory
    row = report.Row(r)
    assert "peak memory 1.25 GiB (torch.xpu.max_memory_allocated" in report.row_cells(row)[report.NOTES]
    (exported,) = csv.DictReader(io.StringIO(report.to_csv([row])))
    assert exported["peak_memory_bytes"] == str(GIB + 256 * 2**20)


def test_an_mps_run_says_its_peak_is_na_and_what_torch_mps_offers_instead(monkeypatch):
    install_mps(monkeypatch)  # current_allocated_memory 768 MiB, driver_allocated_memory 1.5 GiB
    _on_host(monkeypatch, "mps")
    r = _run("mps")
    assert r.status == "ok", (r.message, r.detail)
    assert r.peak_memory["bytes"] is None
    said = r.peak_memory["source"]
    assert said.startswith("n/a: torch.mps counts no peak") and "768.00 MiB in tensors" in said
    assert "1.50 GiB held by the Metal driver" in said
    assert RunResult.from_dict(r.to_dict()).peak_memory == r.peak_memory  # read back from a log
    row = report.Row(r)
    assert "peak memory n/a: torch.mps counts no peak" in report.row_cells(row)[report.NOTES]
    (exported,) = csv.DictReader(io.StringIO(report.to_csv([row])))
    assert exported["peak_memory_bytes"] == ""  # no figure where there is none
    from gpuplay.core.catalogue.scenarios import load_scenarios
    from gpuplay.core.studies.session import LiveSession
    from gpuplay.tui import viewmodels

    live = LiveSession(load_scenarios([]), threads=1)
    live.live_result = r
    assert viewmodels.stats_info(live)["peak_memory"].startswith("n/a: torch.mps counts no peak")
