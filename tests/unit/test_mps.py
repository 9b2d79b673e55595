"""Apple silicon through torch.mps, with a fake MPS device without float64."""

from __future__ import annotations

import pytest

from gpuplay.core.spec import Refusal, RunSpec
from tests.unit.gpu_fakes import FakeDeviceEvent, install_mps, route_device_to_host
from tests.unit.hw_helpers import reprobe_torch

pytestmark = pytest.mark.gpu_fake


def test_mps_device_is_named_after_the_chip(monkeypatch):
    install_mps(monkeypatch, "Apple M2 Pro")
    backend = reprobe_torch(monkeypatch)
    assert backend.device_name("mps") == "Apple M2 Pro (MPS)"
    mps = next(d for d in backend.devices(0) if d.id == "mps")
    assert mps.extra["vendor"] == "Apple" and mps.extra["fp64"] is False


def test_mps_refuses_float64_cuda_graphs_and_tf32_with_reasons(monkeypatch):
    from gpuplay.core.catalogue import planner

    install_mps(monkeypatch)
    reprobe_torch(monkeypatch)
    base = dict(backend="torch", device="mps")
    f64 = planner.check(RunSpec.make("matmul", {"n": 64}, dtype="float64", **base))
    assert (
        isinstance(f64, Refusal) and f64.reason.startswith("MPS has no float64") and f64.hint == "use float32"
    )
    graphs = planner.check(RunSpec.make("matmul", {"n": 64}, cuda_graphs=True, **base))
    assert isinstance(graphs, Refusal) and graphs.reason.startswith("MPS has no CUDA graphs")
    tf32 = planner.check(RunSpec.make("matmul", {"n": 64}, tf32=True, **base))
    assert isinstance(tf32, Refusal) and "TF32" in tf32.reason
    assert not isinstance(planner.check(RunSpec.make("matmul", {"n": 64}, amp="fp16", **base)), Refusal)


def test_mps_allocated_and_driver_memory_in_the_run_window(monkeypatch):
    from gpuplay.core.measure.telemetry import RunTelemetry

    install_mps(monkeypatch, "Apple M3 Max")
    tele = RunTelemetry()
    gpu = tele.end(tele.begin("mps"))["gpu"]
    assert gpu["vendor"] == "Apple" and gpu["name"] == "Apple M3 Max"
    assert gpu["mem_allocated_bytes"] == 768 * 2**20 and gpu["driver_allocated_bytes"] == 1536 * 2**20
    assert "powermetrics" in gpu["util_note"]


def test_mps_steps_are_timed_with_mps_events_that_wait_for_the_gpu(monkeypatch):
    install_mps(monkeypatch)
    backend = reprobe_torch(monkeypatch)
    FakeDeviceEvent.log.clear()
    seconds, out = backend.step_timer("mps")(lambda: "y")
    assert out == "y" and FakeDeviceEvent.log == ["record", "record", "synchronize"]
    assert backend.timer_name("mps") == "MPS events (torch.mps)"
    backend.synchronize("mps")
    assert FakeDeviceEvent.log[-1] == "mps.synchronize"


def test_mps_calibrate_measures_the_roofs_with_mps_events_and_keys_them_by_the_chip(monkeypatch):
    import json

    from click.testing import CliRunner

    from gpuplay.cli import main
    from gpuplay.core.measure import roofline

    install_mps(monkeypatch, "Apple M3 Max")
    route_device_to_host(monkeypatch, "mps")
    from tests.unit.gpu_fakes import accept_every_probe

    accept_every_probe(monkeypatch)
    FakeDeviceEvent.log.clear()
    out = CliRunner().invoke(main, ["calibrate", "-d", "mps", "--budget", "0.01", "--format", "json"])
    assert out.exit_code == 0, out.output
    (peaks,) = json.loads(out.stdout)
    assert peaks["device"] == "mps" and peaks["name"] == "Apple M3 Max (MPS)"
    computed = [m["name"] for m in peaks["measurements"] if m["kind"] == "compute"]
    assert computed == ["float32", "bfloat16", "float16"]  # no float64 or TF32 on Metal
    assert {m["name"] for m in peaks["measurements"] if m["kind"] == "memory"} == {"copy", "triad"}
    assert all(m["value"] > 0 for m in peaks["measurements"])
    assert FakeDeviceEvent.log.count("synchronize") >= 20  # every probe call waited on an MPS event
    assert peaks["fingerprint"]["chip"] == "Apple M3 Max"
    # The peaks belong to the chip: another Mac's (or this cache on a new chip) read as stale.
    # A result on mps finds them under the name it carries (the torch backend's device name).
    assert roofline.load_peaks("mps", reprobe_torch(monkeypatch).device_name("mps")).peaks is not None
    install_mps(monkeypatch, "Apple M1")
    roofline._cached.cache_clear()  # the chip changes between processes: a new one looks again
    stale = roofline.load_peaks("mps", "Apple M1 (MPS)")
    assert stale.peaks is None and "chip Apple M3 Max → Apple M1" in stale.problem
