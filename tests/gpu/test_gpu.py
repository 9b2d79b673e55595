"""GPU paths: skipped where there is no CUDA device (see conftest). Written for the H100/H200
verification (issue 'GPU verification'); not yet run on a GPU at the time of writing."""

from __future__ import annotations

import pytest

from gpuplay.core.runner import run
from gpuplay.core.spec import RunSpec
from tests.unit.test_workloads import SMALL

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("workload", sorted(SMALL))
def test_torch_cuda_matches_float64(workload):
    r = run(RunSpec.make(workload, SMALL[workload], backend="torch", device="cuda:0", warmup=1, repeat=5))
    assert r.status == "ok", r.message
    assert r.check_ok, (r.error, r.tolerance)
    assert r.conditions["timer"] == "CUDA events"


@pytest.mark.parametrize("workload", sorted(w for w in SMALL if w != "autograd"))
def test_cupy_matches_float64(workload):
    pytest.importorskip("cupy")
    r = run(RunSpec.make(workload, SMALL[workload], backend="cupy", device="cuda:0", warmup=1, repeat=5))
    assert r.status == "ok", r.message
    assert r.check_ok, (r.error, r.tolerance)


@pytest.mark.parametrize("amp, compute", [("bf16", "bfloat16"), ("fp16", "float16")])
def test_amp_lowers_matmul_precision_on_cuda(amp, compute):
    r = run(RunSpec.make("matmul", {"n": 1024}, backend="torch", device="cuda:0", amp=amp, repeat=5))
    assert r.status == "ok" and r.compute_dtype == compute and r.check_ok


def test_tf32_is_visible_in_the_error():
    fp32 = run(RunSpec.make("matmul", {"n": 2048}, backend="torch", device="cuda:0", repeat=3))
    tf32 = run(RunSpec.make("matmul", {"n": 2048}, backend="torch", device="cuda:0", tf32=True, repeat=3))
    assert tf32.error > 10 * fp32.error


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_compile_on_cuda(mode):
    r = run(
        RunSpec.make("elementwise", {"n": 1 << 20}, backend="torch", device="cuda:0", compile=mode, repeat=10)
    )
    assert r.status == "ok" and r.failure == "" and r.compile_s > max(r.samples) and r.check_ok


def test_cuda_graphs_replay_gives_the_same_result():
    r = run(
        RunSpec.make(
            "heat", {"n": 256, "steps": 20}, backend="torch", device="cuda:0", cuda_graphs=True, repeat=10
        )
    )
    assert r.status == "ok" and r.check_ok


def test_transfers_make_steps_slower():
    base = RunSpec.make("elementwise", {"n": 1 << 22}, backend="torch", device="cuda:0", repeat=10)
    on_device = run(base)
    with_copies = run(base.replace(transfers=True))
    assert with_copies.median > on_device.median and with_copies.conditions["transfers_timed"]


def test_nvml_reads_the_gpu_and_the_run_window():
    from gpuplay.core.measure import telemetry

    assert telemetry.nvml_status() == ""
    g = telemetry.query_gpu(0)
    assert g.name and g.mem_total and g.util_gpu is not None
    r = run(
        RunSpec.make("matmul", {"n": 4096}, backend="torch", device="cuda:0", budget_s=2.0),
        telemetry=telemetry.RunTelemetry(),
    )
    gpu = r.telemetry["gpu"]
    assert gpu["util_mean_percent"] > 50 and gpu["energy_per_step_j"] > 0
