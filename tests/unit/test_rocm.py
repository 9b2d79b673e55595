"""AMD GPUs under PyTorch's ROCm build, through a fake ROCm torch and a fake amdsmi
that lists the two GPUs in another order than torch does."""

from __future__ import annotations

import pytest

from gpuplay.core.spec import Refusal, RunSpec
from tests.unit.gpu_fakes import FakeAmdGpu, FakeAmdsmi, install_rocm
from tests.unit.hw_helpers import reprobe_torch

pytestmark = pytest.mark.gpu_fake

MI300X = FakeAmdGpu(
    "AMD Instinct MI300X",
    "gfx942:sramecc+:xnack-",
    bus=0xC1,
    uuid="4cff74a1-0000-1000-80aa-000000000001",
    gfx=93,
    watts=612.0,
)
MI250X = FakeAmdGpu(
    "AMD Instinct MI250X",
    "gfx90a:sramecc+:xnack-",
    bus=0x29,
    uuid="4cff74a1-0000-1000-80aa-000000000002",
    gfx=12,
    watts=180.0,
)


def test_rocm_devices_are_labelled_amd_with_arch_and_rocm_never_cuda(monkeypatch):
    install_rocm(monkeypatch, [MI300X, MI250X], FakeAmdsmi([MI250X, MI300X]))
    backend = reprobe_torch(monkeypatch)
    devices = {d.id: d for d in backend.devices(0)}
    assert devices["cuda:0"].name == "AMD Instinct MI300X (gfx942, ROCm 6.2.41133-dd7f95766)"
    assert devices["cuda:1"].extra["vendor"] == "AMD" and devices["cuda:1"].extra["arch"] == "gfx90a"
    assert backend.device_name("cuda:0").startswith("AMD Instinct MI300X (gfx942")
    assert backend.timer_name("cuda:0") == "HIP events (torch.cuda on ROCm)"
    assert "CUDA" not in backend.device_name("cuda:1") + backend.timer_name("cuda:1")
    assert backend.cuda_reason() == ""


def test_rocm_telemetry_maps_torch_devices_to_amdsmi_by_pci_bus_id(monkeypatch):
    from gpuplay.core.measure.telemetry import RunTelemetry

    smi = FakeAmdsmi([MI250X, MI300X])  # amdsmi's order is not torch's
    install_rocm(monkeypatch, [MI300X, MI250X], smi)
    tele = RunTelemetry()
    out = tele.end(tele.begin("cuda:0"))
    gpu = out["gpu"]
    assert gpu["vendor"] == "AMD" and gpu["name"] == "AMD Instinct MI300X" and gpu["index"] == 1
    assert gpu["pci"] == "0000:c1:00.0" and gpu["cuda_index"] == 0
    assert gpu["util_mean_percent"] == 93.0 and gpu["power_mean_w"] == 612.0
    assert gpu["mem_peak_bytes"] == 4096 * 2**20
    assert gpu["energy_source"] == "amdsmi energy counter" and gpu["energy_j"] > 0
    assert "NVIDIA's" in gpu["activity"]["reason"]  # GPM is refused with its reason, not an error
    out1 = tele.end(tele.begin("cuda:1"))
    assert out1["gpu"]["name"] == "AMD Instinct MI250X" and out1["gpu"]["util_mean_percent"] == 12.0


def test_rocm_energy_counter_and_front_end_snapshot_come_from_amdsmi(monkeypatch):
    from gpuplay.core.measure.energy import counter_for
    from gpuplay.core.measure.telemetry import snapshot

    install_rocm(monkeypatch, [MI300X, MI250X], FakeAmdsmi([MI250X, MI300X]))
    counter, reason = counter_for("cuda:1")
    assert (
        reason == ""
        and counter.source == "amdsmi energy counter"
        and counter.gpu.name == "AMD Instinct MI250X"
    )
    j0, j1 = counter.read_j(), counter.read_j()
    assert j1 - j0 == pytest.approx(1000 * 15.3e-6)  # ticks × µJ resolution
    amd = [g for g in snapshot().gpus if g.vendor == "AMD"]
    assert [g.name for g in amd] == ["AMD Instinct MI250X", "AMD Instinct MI300X"]
    assert amd[1].temp_c == 61 and amd[1].sm_clock_mhz == 2100 and amd[1].power_limit_w == 750


def test_rocm_tf32_is_refused_before_mi300_with_the_reason(monkeypatch):
    from gpuplay.core.catalogue import planner

    install_rocm(monkeypatch, [MI300X, MI250X], FakeAmdsmi([MI300X, MI250X]))
    reprobe_torch(monkeypatch)
    old = planner.check(RunSpec.make("matmul", {"n": 64}, backend="torch", device="cuda:1", tf32=True))
    assert isinstance(old, Refusal)
    assert (
        "needs CDNA3 (MI300, gfx942) or newer; AMD Instinct MI250X" in old.reason and "gfx90a" in old.reason
    )
    new = planner.check(RunSpec.make("matmul", {"n": 64}, backend="torch", device="cuda:0", tf32=True))
    assert not isinstance(new, Refusal), new
    # HIP graphs go through torch.cuda.graph on ROCm: not refused as "CUDA only"
    graphs = planner.check(
        RunSpec.make("matmul", {"n": 64}, backend="torch", device="cuda:1", cuda_graphs=True)
    )
    assert not isinstance(graphs, Refusal), graphs


def test_rocm_info_says_amdsmi_is_missing_and_what_to_install(monkeypatch):
    import torch

    from gpuplay.core.reports.info import gather

    install_rocm(monkeypatch, [MI300X], None)  # torch sees the GPU; amdsmi is not installed
    reprobe_torch(monkeypatch)
    data = gather(5)
    assert data["accelerators"][0]["vendor"] == "AMD" and data["accelerators"][0]["device"] == "cuda:0"
    assert any("amdsmi is not installed: pip install amdsmi" in n for n in data["vendor_notes"])
    assert torch.version.hip  # the fake stands for a ROCm build throughout


def test_rocm_amdsmi_that_cannot_start_is_a_reason_not_an_error(monkeypatch):
    from gpuplay.core.measure.telemetry import RunTelemetry

    install_rocm(monkeypatch, [MI300X], FakeAmdsmi([MI300X], init_error=True))
    out = RunTelemetry().end(RunTelemetry().begin("cuda:0"))
    assert out["gpu"] is None and "amdsmi cannot start" in out["gpu_note"]
    assert "DRIVER_NOT_LOADED" in out["gpu_note"]


def test_rocm_results_compare_and_exports_name_the_amd_gpu_and_hip_timing(monkeypatch):
    import csv
    import io
    import json

    from gpuplay.core.reports.report import row_cells, to_csv, to_json
    from gpuplay.core.result import RunResult
    from gpuplay.core.runner.plan import conditions, plan_run
    from gpuplay.core.studies.compare import Row

    install_rocm(monkeypatch, [MI300X, MI250X], FakeAmdsmi([MI250X, MI300X]))
    reprobe_torch(monkeypatch)
    spec = RunSpec.make("matmul", {"n": 64}, backend="torch", device="cuda:0", amp="bf16")
    plan = plan_run(spec)
    cond = conditions(plan)  # what the runner stores with every result
    assert cond["device_name"] == "AMD Instinct MI300X (gfx942, ROCm 6.2.41133-dd7f95766)"
    assert cond["timer"] == "HIP events (torch.cuda on ROCm)"
    r = RunResult(spec=spec, status="ok", samples=[1e-3, 1.1e-3, 0.9e-3], conditions=cond)
    line = next(csv.DictReader(io.StringIO(to_csv([Row(r)]))))
    assert line["device_name"].startswith("AMD Instinct MI300X (gfx942")
    doc = json.loads(to_json([Row(r)]))
    assert doc["results"][0]["conditions"]["device_name"].startswith("AMD Instinct MI300X")
    assert "CUDA" not in json.dumps(doc["results"][0]["conditions"])
    assert row_cells(Row(r))[0] == "matmul"


def test_rocm_cupy_hip_build_lists_amd_gpus_and_results_never_say_cuda(monkeypatch):
    from gpuplay.core.runner.plan import conditions, plan_run
    from tests.unit.gpu_fakes import install_cupy_rocm

    backend = install_cupy_rocm(monkeypatch, [("AMD Instinct MI300X", "gfx942:sramecc+:xnack-"),
                                              ("AMD Instinct MI250X", "gfx90a:sramecc+:xnack-")])  # fmt: skip
    devices = {d.id: d for d in backend.devices(0)}
    assert devices["cuda:0"].name == "AMD Instinct MI300X (gfx942, ROCm 6.2.41133)"
    assert devices["cuda:1"].extra == {"vendor": "AMD", "arch": "gfx90a", "runtime": "ROCm 6.2.41133"}
    plan = plan_run(RunSpec.make("matmul", {"n": 64}, backend="cupy", device="cuda:1"))
    assert not isinstance(plan, Refusal)
    cond = conditions(plan)
    assert cond["device_name"] == "AMD Instinct MI250X (gfx90a, ROCm 6.2.41133)"
    assert cond["timer"] == "HIP events (CuPy on ROCm)"
    assert "CUDA" not in cond["device_name"] + cond["timer"]


def test_rocm_cupy_refuses_sparse_csr_with_cupys_reason_and_info_claims_no_cuda_major(monkeypatch):
    from gpuplay.core.catalogue import planner
    from gpuplay.core.reports.info import cupy_cuda_major
    from tests.unit.gpu_fakes import install_cupy_rocm

    install_cupy_rocm(monkeypatch, [("AMD Instinct MI300X", "gfx942:sramecc+:xnack-")])
    csr = planner.check(RunSpec.make("sparse", {}, backend="cupy", device="cuda:0"))
    assert isinstance(csr, Refusal) and "ROCm build does not support sparse matrices" in csr.reason
    assert csr.hint == "use torch, or format=dense"
    dense = planner.check(RunSpec.make("sparse", {"format": "dense"}, backend="cupy", device="cuda:0"))
    assert not isinstance(dense, Refusal)
    assert cupy_cuda_major() is None  # HIP 6.2's version number is no "CUDA 60241"


def test_rocm_calibrate_keys_the_peaks_by_the_amd_label_and_skips_tf32_before_mi300(monkeypatch):
    import json

    from click.testing import CliRunner

    from gpuplay.cli import main
    from gpuplay.core.measure import roofline
    from tests.unit.gpu_fakes import FakeDeviceEvent, route_device_to_host

    install_rocm(monkeypatch, [MI250X], None)
    route_device_to_host(monkeypatch, "cuda")
    from tests.unit.gpu_fakes import accept_every_probe

    accept_every_probe(monkeypatch)
    FakeDeviceEvent.log.clear()
    out = CliRunner().invoke(main, ["calibrate", "-d", "cuda", "--budget", "0.01", "--format", "json"])
    assert out.exit_code == 0, out.output
    (peaks,) = json.loads(out.stdout)
    assert peaks["name"] == "AMD Instinct MI250X (gfx90a, ROCm 6.2.41133-dd7f95766)"
    computed = [m["name"] for m in peaks["measurements"] if m["kind"] == "compute"]
    assert computed == ["float64", "float32", "bfloat16", "float16"]  # no TF32 on gfx90a
    assert FakeDeviceEvent.log.count("synchronize") >= 20  # HIP events through torch.cuda's API
    name = reprobe_torch(monkeypatch).device_name("cuda:0")
    assert roofline.load_peaks("cuda:0", name).peaks is not None  # a result's name finds them
