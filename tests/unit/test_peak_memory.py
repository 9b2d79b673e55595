"""The run's own peak memory on every device kind, through the run path: CUDA (torch's allocator
counts), Intel XPU (torch.xpu's documented peak calls) and Apple MPS (no peak: n/a and why), all
faked with tensors on the host; into the result, the log, the report's notes and the CSV export.
Verified against these fakes only, not on an Intel GPU or a Mac."""

from __future__ import annotations

import csv
import io

import pytest

from gpuplay.core.reports import report
from gpuplay.core.result import RunResult
from gpuplay.core.spec import RunSpec
from tests.unit.gpu_fakes import (
    FakeCuda,
    install_cuda_run,
    install_mps,
    install_xpu,
    route_device_to_host,
)
from tests.unit.hw_helpers import reprobe_torch

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


@pytest.mark.gpu_fake
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


@pytest.mark.gpu_fake
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


def _run_on_cuda(**kw):
    from gpuplay.core.runner import run

    params = kw.pop("params", {"n": 4096})
    workload = kw.pop("workload", "elementwise")
    kw = {"repeat": 5, "warmup": 1, **kw}
    return run(RunSpec.make(workload, params, backend="torch", device="cuda:0", **kw))


# -- the run's own peak memory ---------------------------------------------------------------------
@pytest.mark.gpu_fake
def test_the_runs_peak_memory_is_in_the_result_compare_and_exports(monkeypatch):
    from gpuplay.core.reports import report
    from gpuplay.core.result import RunResult

    cuda = FakeCuda(1)
    cuda.allocated = GIB  # the inputs

    def spike(call):  # the first call (warm-up) spikes; the timed steps need 256 MiB more
        cuda.allocate(8 * GIB if call == 1 else 256 * 2**20)

    install_cuda_run(monkeypatch, cuda, on_step=spike)
    r = _run_on_cuda(warmup=1)
    assert r.status == "ok" and cuda.resets >= 1
    # reset before the timed phase: the warm-up's spike is not this run's timed peak
    assert r.peak_memory == {"bytes": GIB + 256 * 2**20, "source": r.peak_memory["source"]}
    assert "max_memory_allocated" in r.peak_memory["source"]
    assert RunResult.from_dict(r.to_dict()).peak_memory == r.peak_memory
    row = report.Row(r)
    assert "peak memory 1.25 GiB" in report.row_cells(row)[report.NOTES]
    (exported,) = csv.DictReader(io.StringIO(report.to_csv([row])))
    assert exported["peak_memory_bytes"] == str(GIB + 256 * 2**20)
    assert '"peak_memory"' in report.to_json([row])
    # ...and the playground's stats panel, beside the energy
    from gpuplay.core.catalogue.scenarios import load_scenarios
    from gpuplay.core.studies.session import LiveSession
    from gpuplay.tui import viewmodels

    live = LiveSession(load_scenarios([]), threads=1)
    live.live_result = r
    assert viewmodels.stats_info(live)["peak_memory"].startswith("1.25 GiB (torch.cuda.max_memory_allocated")


@pytest.mark.gpu_fake
def test_a_run_paired_with_numpy_has_its_peak_memory_too(monkeypatch):
    """The API, `gpuplay compare` and `run --baseline` time GPU runs paired with NumPy
    (runner.paired): the peak must be counted there too, over the paired phase."""
    from gpuplay.core.runner.paired import run_paired
    from gpuplay.core.studies.compare import baseline_spec

    cuda = FakeCuda(1)
    cuda.allocated = GIB

    def spike(call):
        cuda.allocate(8 * GIB if call == 1 else 256 * 2**20)

    install_cuda_run(monkeypatch, cuda, on_step=spike)
    spec = RunSpec.make("elementwise", {"n": 4096}, backend="torch", device="cuda:0", repeat=6, warmup=1)
    r = run_paired(spec, baseline_spec(spec))
    assert r.status == "ok" and r.speedup is not None, r.message
    assert r.peak_memory is not None and r.peak_memory["bytes"] == GIB + 256 * 2**20
