"""The GPU paths read again (issue 32): each defect pinned through the path a run takes.

Each test drives `runner.run` on "cuda:0" (or the lock, the energy counter, the roofline cache
through their public entry points) over the fakes of tests/unit/gpu_fakes.py: torch.cuda's
events on a simulated stream clock, NVML's recorded boards, the allocator's counts.
"""

from __future__ import annotations

import csv
import io
import threading

import pytest

from gpuplay.core.spec import RunSpec
from tests.unit.gpu_fakes import (
    FakeCuda,
    FakeGpu,
    FakePynvml,
    install_cuda_run,
    install_cuda_uuids,
    install_nvml,
)

pytestmark = pytest.mark.gpu_fake
GPU_A = "GPU-aaaaaaaa-0000-0000-0000-000000000000"
GPU_B = "GPU-bbbbbbbb-1111-1111-1111-111111111111"
MIG_B = "MIG-cccccccc-2222-2222-2222-222222222222"
GIB = 2**30


def _run(**kw):
    from gpuplay.core.runner import run

    params = kw.pop("params", {"n": 4096})
    workload = kw.pop("workload", "elementwise")
    kw = {"repeat": 5, "warmup": 1, **kw}
    return run(RunSpec.make(workload, params, backend="torch", device="cuda:0", **kw))


class EnergyBoards(FakePynvml):
    """NVML whose energy counters are per board, each read logged with the board it was on."""

    def __init__(self, gpus):
        super().__init__(gpus)
        self.energy_reads: list[int] = []
        self.mj = [1_000_000 * (i + 1) for i in range(len(gpus))]

    def nvmlDeviceGetTotalEnergyConsumption(self, h):  # noqa: N802
        self.energy_reads.append(h.gpu)
        self.mj[h.gpu] += 40_000  # every read sees the counter move: the window ticks at once
        return self.mj[h.gpu]


# -- 1. energy from the board CUDA's ordinal names ----------------------------------------------
def test_energy_per_step_is_read_from_the_board_matched_by_uuid(monkeypatch):
    nvml = EnergyBoards([FakeGpu(GPU_A, "board A"), FakeGpu(GPU_B, "board B")])
    install_nvml(monkeypatch, nvml)
    # CUDA_VISIBLE_DEVICES=1,0 (or fastest first): cuda:0 is board B, NVML's index 1.
    install_cuda_uuids(monkeypatch, [GPU_B, GPU_A])
    install_cuda_run(monkeypatch, FakeCuda(1))
    r = _run(energy=True)
    energy = r.telemetry["energy"]
    assert r.status == "ok" and energy["status"] in ("ok", "below resolution"), energy
    assert nvml.energy_reads and set(nvml.energy_reads) == {1}  # never board A's counter
    assert GPU_B in energy["scope"] and "NVML GPU 1" in energy["scope"]


def test_energy_of_a_mig_instance_reads_its_parent_and_says_so(monkeypatch):
    nvml = EnergyBoards([FakeGpu(GPU_A, "board A"), FakeGpu(GPU_B, "board B", mig=[MIG_B])])
    install_nvml(monkeypatch, nvml)
    install_cuda_uuids(monkeypatch, [MIG_B])
    install_cuda_run(monkeypatch, FakeCuda(1))
    energy = _run(energy=True).telemetry["energy"]
    assert set(nvml.energy_reads) == {1}
    assert "parent GPU 1" in energy["scope"] and MIG_B in energy["scope"]


def test_energy_is_refused_with_a_reason_when_no_board_has_the_uuid(monkeypatch):
    nvml = EnergyBoards([FakeGpu(GPU_A, "board A")])
    install_nvml(monkeypatch, nvml)
    install_cuda_uuids(monkeypatch, ["deadbeef" * 4])
    install_cuda_run(monkeypatch, FakeCuda(1))
    energy = _run(energy=True).telemetry["energy"]
    assert nvml.energy_reads == []
    assert energy["status"].startswith("n/a") and "no UUID match" in energy["status"]


# -- 2. one timing convention for warm and cold steps ---------------------------------------------
@pytest.mark.parametrize("kernels", [((10e-6, 2e-6),) * 5, ((1e-6, 300e-6),)])  # launch-bound, device-bound
def test_a_cold_step_never_reads_faster_than_the_warm_one_by_construction(monkeypatch, kernels):
    cuda = FakeCuda(1)
    install_cuda_run(monkeypatch, cuda, kernels=kernels)
    warm, cold = _run(cache="warm"), _run(cache="cold")
    assert warm.status == cold.status == "ok"
    # The simulated stream has no cache: the same step must read the same, cold never below warm.
    assert cold.median >= warm.median * (1 - 1e-9), (cold.samples, warm.samples)
    # Host dispatch of the five launches is inside both (50 µs of the launch-bound step's 52).
    assert warm.median == pytest.approx(sum(d for d, _ in kernels) + kernels[-1][1], rel=1e-6)
    for r in (warm, cold):
        assert "idle GPU" in r.conditions["timing"] and "dispatch" in r.conditions["timing"]


def test_a_cold_run_paired_with_numpy_flushes_before_each_of_its_paired_steps(monkeypatch):
    from gpuplay.core.runner.paired import run_paired
    from gpuplay.core.studies.compare import baseline_spec

    cuda = FakeCuda(1)
    install_cuda_run(monkeypatch, cuda)
    spec = RunSpec.make("elementwise", {"n": 4096}, backend="torch", device="cuda:0", cache="cold", repeat=6,
                        warmup=2)  # fmt: skip
    r = run_paired(spec, baseline_spec(spec))
    assert r.status == "ok" and r.speedup is not None, r.message
    assert r.conditions["cache"].startswith("cold:")
    # Timed as labelled: a flush before every paired step too, not only in the warm-up
    # (elementwise at 4096 is µs-fast: several candidate steps per paired element).
    assert cuda.sim.flushes >= spec.warmup + len(r.samples)
    assert min(r.samples) >= 52e-6 * (1 - 1e-9)  # the launch-bound step's dispatch, as unpaired


# -- 3. the device lock names the GPU, not the ordinal ---------------------------------------------
def test_the_lock_is_the_gpus_whatever_cuda_visible_devices_says(monkeypatch, tmp_path):
    from gpuplay.core.engine import devicelock

    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"{GPU_A},{GPU_B}")
    path = devicelock.lock_path("cuda:1", tmp_path)  # board B in this session
    assert "bbbbbbbb" in path.name and path.name.startswith("cuda-")
    held, release = threading.Event(), threading.Event()

    def first_session():
        with devicelock.device_lock("cuda:1", root=tmp_path):
            held.set()
            release.wait(10)

    t = threading.Thread(target=first_session)
    t.start()
    try:
        assert held.wait(10)
        # Another session that sees only board B calls it cuda:0: the same lock, so it waits.
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", GPU_B)
        assert devicelock.lock_path("cuda:0", tmp_path) == path
        with (
            pytest.raises(devicelock.WaitCancelled),
            devicelock.device_lock("cuda:0", root=tmp_path, timeout_s=0.3),
        ):
            pass
        # ...and board A, cuda:0 of a third session, is free.
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", GPU_A)
        notes: list[str] = []
        with devicelock.device_lock("cuda:0", root=tmp_path, timeout_s=0.3, notes=notes):
            pass
        assert notes == []
    finally:
        release.set()
        t.join(10)


def test_a_lock_without_a_known_uuid_says_it_is_keyed_by_the_ordinal(monkeypatch, tmp_path):
    from gpuplay.core.engine import devicelock

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,0")
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    notes: list[str] = []
    with devicelock.device_lock("cuda:0", root=tmp_path, notes=notes):
        pass
    assert devicelock.lock_path("cuda:0", tmp_path).name == "cuda-0.lock"
    assert any("keyed by the CUDA ordinal" in n for n in notes)


def test_the_runs_library_is_loaded_before_the_lock_is_named(monkeypatch):
    import sys

    import torch

    from gpuplay.core.backends import get_backend
    from gpuplay.core.engine import devicelock
    from gpuplay.core.result import RunResult

    # An engine that has not imported torch yet: no library can tell the UUID until it does.
    monkeypatch.delitem(sys.modules, "torch")
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    loaded = []
    monkeypatch.setattr(get_backend("torch"), "module", lambda: loaded.append("torch") or torch)
    named = []
    real_path = devicelock.lock_path
    monkeypatch.setattr(
        devicelock, "lock_path", lambda d, r=None: named.append(list(loaded)) or real_path(d, r)
    )
    spec = RunSpec.make("matmul", {"n": 8}, backend="torch", device="cuda:0")
    devicelock.measure_exclusively(spec, lambda: RunResult(spec))
    assert named == [["torch"]]


# -- 4. the run's own peak memory ---------------------------------------------------------------------
def test_the_runs_peak_memory_is_in_the_result_compare_and_exports(monkeypatch):
    from gpuplay.core.reports import report
    from gpuplay.core.result import RunResult

    cuda = FakeCuda(1)
    cuda.allocated = GIB  # the inputs

    def spike(call):  # the first call (warm-up) spikes; the timed steps need 256 MiB more
        cuda.allocate(8 * GIB if call == 1 else 256 * 2**20)

    install_cuda_run(monkeypatch, cuda, on_step=spike)
    r = _run(warmup=1)
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


# -- 5. out of memory by type and status --------------------------------------------------------------
class CuFFTError(RuntimeError):  # cupy_backends.cuda.libs.cufft.CuFFTError's shape
    def __init__(self, result):
        self.result = result
        super().__init__({2: "CUFFT_ALLOC_FAILED", 5: "CUFFT_INTERNAL_ERROR"}[result])


class CUBLASError(RuntimeError):  # cupy_backends.cuda.libs.cublas.CUBLASError's
    def __init__(self, status):
        self.status = status
        super().__init__("CUBLAS_STATUS_ALLOC_FAILED" if status == 3 else "CUBLAS_STATUS_EXECUTION_FAILED")


class CUDARuntimeError(RuntimeError):  # cupy_backends.cuda.api.runtime.CUDARuntimeError's
    def __init__(self, status):
        self.status = status
        super().__init__("cudaErrorMemoryAllocation: out of memory" if status == 2 else "cudaErrorUnknown")


@pytest.mark.parametrize(
    "error, what, size",
    [
        (CuFFTError(2), "cuFFT workspace", ""),
        (CUBLASError(3), "cuBLAS workspace", ""),
        (CUDARuntimeError(2), "CUDA runtime allocation", ""),
        (RuntimeError("cuFFT error: CUFFT_ALLOC_FAILED"), "cuFFT workspace", ""),
        (
            RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"),
            "cuBLAS workspace",
            "",
        ),  # fmt: skip
        (
            RuntimeError("cusolver error: CUSOLVER_STATUS_ALLOC_FAILED, when calling `cusolverDnCreate`"),
            "cuSOLVER workspace",
            "",
        ),  # fmt: skip
        (
            MemoryError("Out of memory allocating 1,073,741,824 bytes (allocated so far: 0 bytes)."),
            "the allocator",
            "1.00 GiB",
        ),  # fmt: skip
    ],
)
def test_library_workspace_failures_are_out_of_memory_with_size_and_free(monkeypatch, error, what, size):
    cuda = FakeCuda(1)
    cuda.free_bytes = 3 * GIB

    def fail(call):
        if call >= 2:
            raise error

    install_cuda_run(monkeypatch, cuda, on_step=fail)
    r = _run()
    assert r.status == "failed" and r.failure == "out-of-memory", r.message
    assert what in r.message and "3.00 GiB free on cuda:0" in r.message
    assert size in r.message
    assert cuda.emptied >= 1  # the caches were emptied before free memory was read


def test_torchs_oom_names_the_size_that_did_not_fit(monkeypatch):
    import torch

    def fail(call):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has ...")

    install_cuda_run(monkeypatch, FakeCuda(1), on_step=fail)
    r = _run()
    assert r.failure == "out-of-memory" and "could not allocate 2.00 GiB" in r.message


@pytest.mark.parametrize("error", [CuFFTError(5), CUBLASError(14), CUDARuntimeError(999)])
def test_other_library_statuses_are_not_out_of_memory(monkeypatch, error):
    from gpuplay.core.backends.cupy_backend import CupyBackend

    install_cuda_run(monkeypatch, FakeCuda(1), on_step=lambda call: (_ for _ in ()).throw(error))
    r = _run()
    assert r.status == "failed" and r.failure == "error" and type(error).__name__ in r.message
    assert not CupyBackend().is_out_of_memory(error)
    assert CupyBackend().is_out_of_memory(
        type(error)(2 if isinstance(error, CuFFTError | CUDARuntimeError) else 3)
    )


# -- 6. reduce-overhead's CUDA graph is recorded outside the samples --------------------------------
@pytest.mark.parametrize("mode", ["reduce-overhead", "max-autotune"])
def test_a_cudagraph_compile_records_before_the_timed_steps(monkeypatch, mode):
    from gpuplay.core.backends import torch_backend

    cuda = FakeCuda(1)
    calls = {"n": 0}

    def cudagraph_tree(fn, mode):
        # inductor's cudagraph trees (torch/_inductor/cudagraph_trees.py): the first call compiles
        # and runs eagerly as the warm-up, the second records the graph (50 ms here), every later
        # call replays it.
        def compiled(*args):
            calls["n"] += 1
            if calls["n"] == 2:
                cuda.sim.launch(0.0, 50e-3)
            return fn(*args)

        return compiled

    monkeypatch.setattr(
        torch_backend.TorchBackend, "compile", lambda self, fn, mode: cudagraph_tree(fn, mode)
    )
    monkeypatch.setattr(torch_backend.TorchBackend, "compile_counts", lambda self: None)
    install_cuda_run(monkeypatch, cuda)
    r = _run(compile=mode, warmup=0, repeat=5)
    assert r.status == "ok", r.message
    assert max(r.samples) < 1e-3, r.samples  # no sample holds the 50 ms recording
    assert (
        r.conditions["warmup"] >= 2 and "kept out of the timed steps" in r.conditions["cuda_graph_recording"]
    )


# -- 7. TF32 reaches what each path reads ------------------------------------------------------------------
@pytest.mark.parametrize("tf32, want", [(True, "tf32"), (False, "ieee")])
def test_tf32_sets_the_cudnn_wide_flag_inductors_conv_templates_read(monkeypatch, tf32, want):
    import torch

    seen = []

    def read_flags(call):
        b = torch.backends
        seen.append((b.cudnn.fp32_precision, b.cudnn.conv.fp32_precision, b.cudnn.rnn.fp32_precision,
                     b.cuda.matmul.fp32_precision))  # fmt: skip

    before = (torch.backends.cudnn.fp32_precision, torch.backends.cudnn.conv.fp32_precision)
    install_cuda_run(monkeypatch, FakeCuda(1), on_step=read_flags)
    r = _run(workload="matmul", params={"n": 64}, tf32=tf32)
    assert r.status == "ok" and seen
    assert set(seen) == {(want, want, want, want)}  # inductor's conv.py reads cudnn.fp32_precision
    words = r.conditions["fp32_precision"]
    assert ("TF32" in words) if tf32 else ("IEEE float32" in words and "convolutions" in words)
    assert (torch.backends.cudnn.fp32_precision, torch.backends.cudnn.conv.fp32_precision) == before


# -- 8. a cached roof names the board, driver, power limit and MIG profile it was measured on ----------
def _calibrated(monkeypatch, gpus, uuids):
    from gpuplay.core.measure import roofline
    from gpuplay.core.measure.roofline import DevicePeaks, Measurement

    nvml = FakePynvml(gpus)
    install_nvml(monkeypatch, nvml)
    install_cuda_uuids(monkeypatch, uuids)
    name = "NVIDIA H100 80GB HBM3"
    roofline.save_peaks(
        DevicePeaks("cuda:0", name, roofline.fingerprint("cuda:0", name), "2026-01-01T00:00:00+00:00", 1.0,
                    [Measurement("memory", "triad", "torch", 3000.0, "3 x 1 GiB", 0.01, 5),
                     Measurement("compute", "float32", "torch", 50_000.0, "n=8192", 0.02, 5)])
    )  # fmt: skip
    return nvml


def _roof(monkeypatch):
    from gpuplay.core.result import RunResult

    r = RunResult(RunSpec.make("matmul", {"n": 4096}, backend="torch", device="cuda:0"),
                  samples=[1e-3] * 5, flops=2 * 4096**3, bytes=3 * 4 * 4096**2, compute_dtype="float32",
                  conditions={"device_name": "NVIDIA H100 80GB HBM3"})  # fmt: skip
    return r.roof_fields()


def test_a_roof_cached_on_another_board_of_the_same_name_is_stale(monkeypatch):
    from gpuplay.core.measure import roofline

    _calibrated(monkeypatch, [FakeGpu(GPU_A, "H100"), FakeGpu(GPU_B, "H100")], [GPU_A, GPU_B])
    assert _roof(monkeypatch)["status"] == "ok"
    install_cuda_uuids(monkeypatch, [GPU_B, GPU_A])  # now cuda:0 is the other H100
    roofline._cached.cache_clear()  # a new process (the file is unchanged: lookups are memoised by mtime)
    roof = _roof(monkeypatch)
    assert roof["status"] != "ok" and "stale" in roof["note"] and "uuid" in roof["note"]


@pytest.mark.parametrize(
    "change, key",
    [
        (lambda nvml: setattr(nvml.gpus[0], "power_limit_mw", 400_000), "power_limit_w 700 → 400"),
        (lambda nvml: setattr(nvml, "driver", "590.10"), "driver 580.95.05 → 590.10"),
    ],
)
def test_a_roof_is_stale_after_a_power_limit_or_driver_change(monkeypatch, change, key):
    from gpuplay.core.measure import roofline

    nvml = _calibrated(monkeypatch, [FakeGpu(GPU_A, "H100")], [GPU_A])
    assert _roof(monkeypatch)["status"] == "ok"
    change(nvml)
    roofline._cached.cache_clear()  # the cache file is unchanged: its lookup is memoised by mtime
    roof = _roof(monkeypatch)
    assert roof["status"] != "ok" and key in roof["note"], roof


def test_the_fingerprint_records_mig_profile_and_cuda_runtime(monkeypatch):
    from gpuplay.core.measure import roofline

    class MigNames(FakePynvml):
        def nvmlDeviceGetName(self, h):  # noqa: N802
            return "NVIDIA H100 80GB HBM3 MIG 1g.10gb" if h.mig is not None else "NVIDIA H100 80GB HBM3"

    install_nvml(monkeypatch, MigNames([FakeGpu(GPU_B, "H100", mig=[MIG_B])]))
    install_cuda_uuids(monkeypatch, [MIG_B])
    fp = roofline.fingerprint("cuda:0", "NVIDIA H100 80GB HBM3")
    assert fp["uuid"] == MIG_B.removeprefix("MIG-").replace("-", "") and fp["mig_profile"].endswith(
        "MIG 1g.10gb"
    )
    assert fp["power_limit_w"] == 700 and fp["driver"] == "580.95.05" and "cuda_runtime" in fp


# -- Hopper's power and utilisation are 1-second averages ------------------------------------------------
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


def test_gpuplay_info_says_a_cached_roof_is_stale(monkeypatch):
    from gpuplay.core.measure import roofline

    nvml = _calibrated(monkeypatch, [FakeGpu(GPU_A, "H100")], [GPU_A])
    assert roofline.summary("cuda:0")["stale"] == ""
    nvml.gpus[0].power_limit_mw = 350_000  # a power cap since the calibration
    roofline._cached.cache_clear()
    assert "power_limit_w 700 → 350" in roofline.summary("cuda:0")["stale"]


@pytest.mark.parametrize("n", [float("nan"), float("inf"), -1.0, True])
def test_a_byte_count_that_is_no_count_reads_na_not_a_crash(n):
    """fmt_bytes is shared by OOM refusals, the peak-memory note and the Collectives chart: a NaN
    from a glitching counter or a file raised ValueError in int(n) before."""
    from gpuplay.core.backends.oom import fmt_bytes

    assert fmt_bytes(n) == "n/a"
    assert fmt_bytes(3 * 2**30) == "3.00 GiB" and fmt_bytes(12) == "12 B"


def test_a_gpm_figure_that_is_a_flag_is_not_a_reading():
    """float(True) is 1.0: a bool in a GPM reading (a fake, a file) must read n/a, not '1 %'."""
    from gpuplay.core.hw.nvidia import bounded

    assert bounded("tensor_active", True) is None and bounded("tensor_active", 71) == 71.0
