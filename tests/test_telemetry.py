"""Telemetry on a machine without the NVIDIA driver: NVML's real error, host figures always."""

from __future__ import annotations

import threading
import time

import pytest

from gpuplay.core import telemetry
from tests.conftest import gpu_available


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
