"""Intel GPUs through torch.xpu, with a fake torch.xpu of one device."""

from __future__ import annotations

import pytest

from gpuplay.core.spec import Refusal, RunSpec
from tests.unit.gpu_fakes import FakeDeviceEvent, install_xpu, route_device_to_host
from tests.unit.hw_helpers import reprobe_torch

pytestmark = pytest.mark.gpu_fake


def test_xpu_devices_reach_the_device_control_and_the_cli(monkeypatch):
    from gpuplay.cli.options import SPEC_FIELDS  # noqa: F401 - the CLI's -d takes what the spec takes
    from gpuplay.tui.controls import device_values

    install_xpu(monkeypatch)
    backend = reprobe_torch(monkeypatch)
    assert "xpu:0" in device_values()  # the device control lists it
    assert backend.device_name("xpu:0") == "Intel(R) Data Center GPU Max 1550 (XPU)"
    assert RunSpec.make("matmul", {"n": 64}, backend="torch", device="xpu:0").device == "xpu:0"
    with pytest.raises(ValueError, match="xpu, xpu:N"):
        RunSpec.make("matmul", {"n": 64}, backend="torch", device="xpu:a")


def test_xpu_plans_amp_bf16_and_compile_and_refuses_tf32_and_missing_float64(monkeypatch):
    from gpuplay.core.catalogue import planner

    install_xpu(monkeypatch, name="Intel(R) Arc(TM) A770 Graphics", has_fp64=False)
    reprobe_torch(monkeypatch)
    base = dict(backend="torch", device="xpu:0")
    assert not isinstance(planner.check(RunSpec.make("matmul", {"n": 64}, amp="bf16", **base)), Refusal)
    assert not isinstance(
        planner.check(RunSpec.make("matmul", {"n": 64}, compile="default", **base)), Refusal
    )
    tf32 = planner.check(RunSpec.make("matmul", {"n": 64}, tf32=True, **base))
    assert isinstance(tf32, Refusal) and "NVIDIA tensor-core format" in tf32.reason
    f64 = planner.check(RunSpec.make("matmul", {"n": 64}, dtype="float64", **base))
    assert isinstance(f64, Refusal) and "Arc(TM) A770 Graphics (XPU) has no float64" in f64.reason
    gone = planner.check(RunSpec.make("matmul", {"n": 64}, backend="torch", device="xpu:1"))
    assert isinstance(gone, Refusal) and "no Intel GPU xpu:1" in gone.reason


def test_xpu_memory_telemetry_over_the_run_window_and_utilisation_na(monkeypatch):
    from gpuplay.core.measure.telemetry import RunTelemetry

    install_xpu(monkeypatch)
    tele = RunTelemetry()
    gpu = tele.end(tele.begin("xpu:0"))["gpu"]
    assert gpu["vendor"] == "Intel" and gpu["name"] == "Intel(R) Data Center GPU Max 1550"
    assert gpu["mem_peak_bytes"] == 5 * 2**30 and gpu["mem_allocated_bytes"] == 3 * 2**30
    assert gpu["util_mean_percent"] is None and "xpu-smi" in gpu["util_note"]


def test_xpu_steps_are_timed_with_xpu_events(monkeypatch):
    install_xpu(monkeypatch)
    backend = reprobe_torch(monkeypatch)
    FakeDeviceEvent.log.clear()
    seconds, out = backend.step_timer("xpu:0")(lambda: 42)
    assert out == 42 and seconds >= 0
    assert FakeDeviceEvent.log == ["record", "record", "synchronize"]
    assert backend.timer_name("xpu:0") == "XPU events (torch.xpu)"


def test_xpu_calibrate_measures_the_roofs_with_xpu_events_and_keys_them_by_the_board(monkeypatch):
    import json
    from types import SimpleNamespace

    from click.testing import CliRunner

    from gpuplay.cli import main
    from gpuplay.core.measure import roofline

    install_xpu(monkeypatch, name="Intel(R) Arc(TM) A770 Graphics", has_fp64=False)
    props = SimpleNamespace(name="Intel(R) Arc(TM) A770 Graphics", total_memory=16 * 2**30, has_fp64=False,
                            driver_version="1.3.30049", uuid="8086-56a0-0300", max_compute_units=512)  # fmt: skip
    monkeypatch.setattr("torch.xpu.get_device_properties", lambda i=0: props)
    route_device_to_host(monkeypatch, "xpu")
    from tests.unit.gpu_fakes import accept_every_probe

    accept_every_probe(monkeypatch)
    FakeDeviceEvent.log.clear()
    out = CliRunner().invoke(main, ["calibrate", "-d", "xpu", "--budget", "0.01", "--format", "json"])
    assert out.exit_code == 0, out.output
    (peaks,) = json.loads(out.stdout)
    assert peaks["device"] == "xpu:0" and peaks["name"] == "Intel(R) Arc(TM) A770 Graphics (XPU)"
    computed = [m["name"] for m in peaks["measurements"] if m["kind"] == "compute"]
    assert computed == ["float32", "bfloat16", "float16"]  # no float64 on Arc, TF32 is NVIDIA's
    assert all(m["value"] > 0 and m["library"] == "torch" for m in peaks["measurements"])
    assert FakeDeviceEvent.log.count("synchronize") >= 20  # every probe call waited on an XPU event
    fp = peaks["fingerprint"]
    assert fp["uuid"] == "8086-56a0-0300" and fp["driver"] == "1.3.30049"
    assert (roofline.cache_dir() / "xpu_0.json").is_file()
    # A new driver makes the cached roofs stale, as a CUDA driver update does.
    # A result on xpu:0 finds them under the name it carries (the torch backend's device name).
    name = reprobe_torch(monkeypatch).device_name("xpu:0")
    assert roofline.load_peaks("xpu:0", name).peaks is not None
    props.driver_version = "1.6.31294"
    roofline._cached.cache_clear()  # the driver changes between processes: a new one looks again
    stale = roofline.load_peaks("xpu:0", name)
    assert stale.peaks is None and "driver 1.3.30049 → 1.6.31294" in stale.problem


def test_xpu_calibrate_refuses_a_device_torch_does_not_see(monkeypatch):
    from click.testing import CliRunner

    from gpuplay.cli import main

    install_xpu(monkeypatch)
    out = CliRunner().invoke(main, ["calibrate", "-d", "xpu:1"])
    assert out.exit_code == 2 and "no device xpu:1 to calibrate: PyTorch sees xpu:0" in out.output
