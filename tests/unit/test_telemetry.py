"""Telemetry on a machine without the NVIDIA driver: NVML's real error, host figures always."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import pytest

from gpuplay.core.measure import telemetry
from gpuplay.core.spec import RunSpec
from tests.conftest import gpu_available
from tests.unit.gpu_fakes import (
    FakeCuda,
    FakeGpu,
    FakePynvml,
    install_cuda_run,
    install_cuda_uuids,
    install_nvml,
)


@pytest.mark.skipif(gpu_available(), reason="this machine has a GPU")
def test_real_nvml_error_becomes_one_clear_line():
    status = telemetry.nvml_status()
    assert status.startswith("NVML unavailable:")
    assert "NVMLError" in status or "not installed" in status
    assert telemetry.query_gpu(0).util_gpu is None  # n/a, not an exception
    assert telemetry.gpu_count() == 0


def test_host_snapshot_is_never_empty():
    snap = telemetry.snapshot()
    assert snap.host.mem_total > 0 and snap.host.process_rss > 0
    assert len(snap.host.cpu_percent) >= 1
    d = snap.to_dict()
    assert "cpu_mean" in d["host"]


def test_sampler_history_is_bounded_and_thread_stops(no_leaked_threads):
    got = []
    s = telemetry.Sampler(interval=0.01, history=5, on_snapshot=got.append).start()
    time.sleep(0.2)
    s.stop()
    assert not s.running
    assert len(s.history) == 5 and len(got) > 5
    assert all(a.t < b.t for a, b in zip(list(s.history), list(s.history)[1:]))
    assert not any(t.name == "gpuplay-telemetry" for t in threading.enumerate())


def test_sampler_rejects_bad_interval():
    with pytest.raises(ValueError):
        telemetry.Sampler(interval=0)


def test_run_records_host_telemetry_for_the_timed_phase():
    from gpuplay.core.runner import run
    from gpuplay.core.spec import RunSpec

    r = run(RunSpec.make("matmul", {"n": 128}, budget_s=0.3), telemetry=telemetry.RunTelemetry())
    assert r.telemetry["duration_s"] > 0
    assert r.telemetry["host_cpu_mean_percent"] is not None
    assert r.telemetry["gpu"] is None and r.telemetry["gpu_note"]


class FakeNVML:
    """A stand-in for the pynvml module at the library boundary: one GPU whose board,
    like many, does not report some fields (those raise NVMLError_NotSupported)."""

    NVML_TEMPERATURE_GPU, NVML_CLOCK_SM, NVML_CLOCK_MEM = 0, 1, 2
    NVML_PCIE_UTIL_TX_BYTES, NVML_PCIE_UTIL_RX_BYTES = 0, 1

    class NVMLError(Exception):
        pass

    class NVMLError_NotSupported(NVMLError):
        pass

    def __init__(self):
        self.energy = 1_000_000

    def nvmlInit(self):
        pass

    def nvmlDeviceGetCount(self):
        return 1

    def nvmlDeviceGetHandleByIndex(self, i):
        return ("h", i)

    def nvmlDeviceGetName(self, h):
        return b"NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetUtilizationRates(self, h):
        return type("U", (), {"gpu": 97, "memory": 61})()

    def nvmlDeviceGetMemoryInfo(self, h):
        return type("M", (), {"used": 40 * 2**30, "total": 80 * 2**30})()

    def nvmlDeviceGetPowerUsage(self, h):
        return 612_000  # mW

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        return 700_000

    def nvmlDeviceGetTemperature(self, h, sensor):
        return 64

    def nvmlDeviceGetClockInfo(self, h, kind):
        return 1980 if kind == self.NVML_CLOCK_SM else 2619

    def nvmlDeviceGetMaxClockInfo(self, h, kind):
        return 1980 if kind == self.NVML_CLOCK_SM else 2619

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h):
        return 5

    def nvmlDeviceGetCurrPcieLinkWidth(self, h):
        return 16

    def nvmlDeviceGetPcieThroughput(self, h, counter):
        raise self.NVMLError_NotSupported("Not Supported")

    def nvmlDeviceGetPerformanceState(self, h):
        return 0

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        self.energy += 61_200  # mJ between two reads
        return self.energy

    def nvmlDeviceGetUUID(self, h):
        return "GPU-00000000-1111-2222-3333-444444444444"

    def nvmlDeviceGetComputeRunningProcesses(self, h):

        return [type("P", (), {"pid": os.getpid(), "usedGpuMemory": 3 * 2**30})()]


@pytest.fixture
def fake_nvml(monkeypatch):
    fake = FakeNVML()
    state = telemetry._NVML()
    state._tried, state._pynvml = True, fake
    monkeypatch.setattr(telemetry, "nvml", state)
    # The CUDA side of the UUID match: cuda:0 is this GPU.
    monkeypatch.setattr(telemetry, "cuda_device_uuids", lambda: ["00000000111122223333444444444444"])
    return fake


def test_gpu_fields_map_and_unsupported_ones_read_na(fake_nvml):
    g = telemetry.query_gpu(0)
    assert g.name == "NVIDIA H100 80GB HBM3"
    assert (g.util_gpu, g.util_mem, g.power_w, g.power_limit_w, g.temp_c) == (97.0, 61.0, 612.0, 700.0, 64)
    assert (g.sm_clock_mhz, g.mem_clock_max_mhz, g.pcie_gen, g.pcie_width, g.pstate) == (
        1980,
        2619,
        5,
        16,
        "P0",
    )
    assert g.pcie_tx_mbs is None and g.pcie_rx_mbs is None  # NotSupported → n/a, no exception
    assert g.process_mem == 3 * 2**30


def test_run_window_records_gpu_utilisation_power_and_energy(fake_nvml):
    from gpuplay.core.runner import run
    from gpuplay.core.spec import RunSpec

    tele = telemetry.RunTelemetry()
    token = tele.begin("cuda:0")
    out = tele.end(token)
    gpu = out["gpu"]
    # A window shorter than NVML's 1-second averaging: the readings kept apart, not the run's
    assert gpu["util_nvml_percent"] == 97.0 and gpu["power_nvml_w"] == 612.0
    assert gpu["util_mean_percent"] is None and gpu["power_mean_w"] is None and gpu["averaging_note"]
    assert gpu["energy_j"] == 61.2 and gpu["energy_source"] == "NVML total-energy counter"
    # and through the runner, energy per step is derived from the window
    r = run(RunSpec.make("matmul", {"n": 32}, repeat=4), telemetry=_AsCuda(tele))
    assert r.telemetry["gpu"]["energy_per_step_j"] == pytest.approx(r.telemetry["gpu"]["energy_j"] / 4)


class _AsCuda:
    """Bracket a CPU run as if it ran on cuda:0, to exercise the runner's energy bookkeeping."""

    def __init__(self, inner):
        self.inner = inner

    def begin(self, device):
        return self.inner.begin("cuda:0")

    def end(self, token):
        return self.inner.end(token)


def test_paced_snapshots_keep_their_rate_and_count():
    from gpuplay.core.measure.telemetry import paced_snapshots

    now = [0.0]
    waits: list[float] = []

    def sleep(s: float) -> None:
        waits.append(s)
        now[0] += s

    stream = paced_snapshots(1.0, 3, clock=lambda: now[0], sleep=sleep)
    snaps = []
    for snap in stream:
        snaps.append(snap)
        now[0] += 0.25  # the caller's work between two samples
    assert len(snaps) == 3 and all(s.host.mem_total > 0 for s in snaps)
    # priming wait, then the interval less the work: no drift, and no wait after the last one
    assert waits == [0.1, 0.75, 0.75]


def test_the_host_row_reports_the_engine_process_beside_the_front_end():

    from gpuplay.core.measure.telemetry import Sampler

    child = subprocess.Popen([sys.executable, "-c", "import time; x = bytearray(64 << 20); time.sleep(30)"])
    try:
        sampler = Sampler(interval=0.1)
        assert sampler.take().host.engine_rss is None  # no engine: nothing invented
        sampler.engine_pid = lambda: child.pid
        deadline = time.monotonic() + 10
        while (sampler.take().host.engine_rss or 0) < 64 << 20:
            assert time.monotonic() < deadline, "the engine's RSS never showed"
            time.sleep(0.1)
    finally:
        child.kill()
        child.wait()
    assert sampler.take().host.engine_rss is None  # a dead engine reads n/a, never an error


@pytest.mark.parametrize("device", ["cuda:0", "xpu:0", "mps"])
def test_an_accelerator_s_run_window_still_asks_its_vendor(monkeypatch, device):
    from gpuplay.core.hw import devices
    from gpuplay.core.measure import telemetry

    asked: list[str] = []
    vendor = SimpleNamespace(note="the vendor's note")
    monkeypatch.setattr(devices, "run_window", lambda d: asked.append(d) or vendor)
    window = telemetry.RunTelemetry().begin(device)
    assert asked == [device] and window.vendor is vendor and window.gpu_note == "the vendor's note"


GPU_A = "GPU-aaaaaaaa-0000-0000-0000-000000000000"


# -- Hopper's power and utilisation are 1-second averages ------------------------------------------------
@pytest.mark.gpu_fake
def test_a_run_shorter_than_nvmls_averaging_window_does_not_claim_its_power(monkeypatch):
    from gpuplay.core.measure.telemetry import RunTelemetry
    from gpuplay.core.runner import run

    install_nvml(monkeypatch, FakePynvml([FakeGpu(GPU_A, "board A", util=90, power_mw=650_000)]))
    install_cuda_uuids(monkeypatch, [GPU_A])
    install_cuda_run(monkeypatch, FakeCuda(1))
    r = run(RunSpec.make("elementwise", {"n": 4096}, backend="torch", device="cuda:0", repeat=3, warmup=1),
            telemetry=RunTelemetry())  # fmt: skip
    gpu = r.telemetry["gpu"]
    assert r.telemetry["duration_s"] < 1.0
    assert gpu["power_mean_w"] is None and gpu["util_mean_percent"] is None
    assert "1-second averages" in gpu["averaging_note"] and gpu["power_nvml_w"] == 650.0
