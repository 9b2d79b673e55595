"""Every workload, on real NumPy and real PyTorch (CPU), checked against float64."""

from __future__ import annotations

import pytest

from gpuplay.core.runner import run
from gpuplay.core.spec import RunSpec
from gpuplay.core.workloads import get_workload, registry

SMALL = {
    "matmul": {"n": 96},
    "batched_matmul": {"batch": 8, "n": 32},
    "svd": {"n": 48},
    "eigh": {"n": 48},
    "solve": {"n": 64},
    "lstsq": {"m": 96, "n": 32},
    "elementwise": {"n": 50_000},
    "reductions": {"n": 50_000},
    "fft1d": {"n": 4096},
    "fft2d": {"n": 64},
    "heat": {"n": 32, "steps": 5},
    "autograd": {"n": 8},
    "attention": {"batch": 1, "heads": 2, "seq": 32, "dim": 16},
    "inference": {"model": "block", "batch": 2, "seq": 8, "width": 32, "heads": 4},
    "transfers": {"n": 4096, "op": "copy"},
    "fused": {"n": 10_000},
    "sparse": {"n": 64, "density": 0.05},
    "scan": {"n": 50_000},
    "dataloader": {"batch": 4, "size": 32},
}


def test_every_workload_has_a_small_size():
    assert set(SMALL) == set(registry())


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("workload", sorted(SMALL))
def test_result_matches_float64_reference(workload, backend, dtype):
    needed = get_workload(workload).needs_backend(get_workload(workload).resolve(SMALL[workload]))
    if needed not in (None, backend):
        pytest.skip(f"{workload} runs on {needed} only (its refusal is tested beside it)")
    r = run(RunSpec.make(workload, SMALL[workload], backend=backend, dtype=dtype, warmup=1, repeat=3))
    assert r.status == "ok", r.message
    assert len(r.samples) == 3
    assert r.error is not None and r.tolerance is not None
    assert r.check_ok, f"{workload} {backend} {dtype}: error {r.error:.3e} > tolerance {r.tolerance:.3e}"
    assert r.bytes > 0 and r.gbps and r.gbps > 0
    if workload != "transfers":  # a copy does no arithmetic: GB/s is its figure
        assert r.flops > 0 and r.gflops and r.gflops > 0


def test_float32_error_is_larger_than_float64_error():
    e32 = run(RunSpec.make("matmul", {"n": 128}, dtype="float32", repeat=1, warmup=0)).error
    e64 = run(RunSpec.make("matmul", {"n": 128}, dtype="float64", repeat=1, warmup=0)).error
    assert e64 < e32 < 1e-5


def test_check_catches_a_wrong_result(monkeypatch):
    from gpuplay.core.workloads import linalg

    monkeypatch.setattr(linalg.Matmul, "kernel_function", lambda self, b, p: lambda xp, a, b_: a @ b_ + 1e-3)
    r = run(RunSpec.make("matmul", {"n": 64}, repeat=1, warmup=0))
    assert r.status == "ok" and r.check_ok is False


def test_reductions_use_population_std_on_both_backends():
    np_r = run(RunSpec.make("reductions", {"n": 1000}, backend="numpy", dtype="float64", repeat=1, warmup=0))
    th_r = run(RunSpec.make("reductions", {"n": 1000}, backend="torch", dtype="float64", repeat=1, warmup=0))
    # ddof=1 on one side would differ by a factor sqrt(1000/999) ≈ 5e-4, far above float64 rounding
    assert np_r.error < 1e-12 and th_r.error < 1e-12


def test_autograd_runs_both_methods_on_torch_and_fd_is_less_accurate():
    ad = run(RunSpec.make("autograd", {"n": 12, "method": "autograd"}, backend="torch", repeat=2, warmup=0))
    fd = run(RunSpec.make("autograd", {"n": 12, "method": "fd"}, backend="torch", repeat=2, warmup=0))
    assert ad.check_ok and fd.check_ok
    assert fd.error > 10 * ad.error
    assert fd.flops > 0.5 * 12**2 * ad.flops  # 2·n² evaluations against one backward pass


def test_autograd_is_refused_on_numpy_with_reason():
    r = run(RunSpec.make("autograd", {"n": 8, "method": "autograd"}, backend="numpy"))
    assert r.status == "refused" and "autograd needs PyTorch" in r.message


def test_code_view_source_is_the_real_function():
    src = get_workload("heat").source("torch", get_workload("heat").resolve({}))
    assert "def heat(xp, u, steps, alpha):" in src and "roll" in src
    assert "std(correction=0)" in get_workload("reductions").source("torch", {})
    assert "x.std()" in get_workload("reductions").source("numpy", {})


@pytest.mark.parametrize("name", sorted(SMALL))
def test_scaled_probe_is_smaller(name):
    w = get_workload(name)
    p = w.resolve(SMALL[name])
    assert w.flops(w.scaled(p, 0.25)) <= w.flops(p)


def test_bad_parameter_values_are_named():
    w = get_workload("matmul")
    with pytest.raises(ValueError, match="n must be >= 2"):
        w.resolve({"n": 1})
    with pytest.raises(ValueError, match="unknown parameter"):
        w.resolve({"m": 3})
    with pytest.raises(ValueError, match="m must be >= n"):
        get_workload("lstsq").resolve({"m": 4, "n": 8})


def test_scan_check_tells_a_float16_accumulator_from_a_wide_one():
    """NumPy's float16 cumsum adds in float16 and stalls past 2,048; torch's CPU cumsum adds in a
    wider type. The tolerance (float32 accumulation) passes the one and fails the other."""
    n = 20_000
    np_r = run(RunSpec.make("scan", {"n": n}, backend="numpy", dtype="float16", repeat=1, warmup=0))
    th_r = run(RunSpec.make("scan", {"n": n}, backend="torch", dtype="float16", repeat=1, warmup=0))
    assert np_r.check_ok is False and np_r.error > 0.1
    assert th_r.check_ok is True
    assert any("stops growing" in note for note in np_r.notes)


def test_scan_warns_before_a_float16_running_sum_overflows():
    scan = get_workload("scan")
    assert any("past float16's largest" in x for x in scan.notes("torch", "cpu", "float16", {"n": 1_000_000}))
    assert not scan.notes("torch", "cpu", "float16", {"n": 100_000})
    assert not scan.notes("torch", "cpu", "float32", {"n": 1_000_000})


def test_the_add_a_workload_guide_registers_a_workload_where_the_registry_reads_it():
    # The registry is WORKLOAD_MODULES (name → module, imported when first named), not a module
    # list in registry(): a guide that says otherwise leaves a new workload unregistered.
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "architecture.md").read_text()
    step = text[text.index("3. **Register it**") : text.index("4. **A scenario file**")]
    assert "WORKLOAD_MODULES" in step and "to `registry()`" not in step, step
    guide = text[text.index("1. **The kernels**") : text.index("3. **Register it**")]
    assert "lazy_numpy" in guide, "a new workload module must not import NumPy at its top"
