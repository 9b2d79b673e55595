"""The levers' CUDA and CuPy paths: skipped where there is no CUDA device (see conftest).
Written on a CPU-only machine; not yet run on a GPU at the time of writing."""

from __future__ import annotations

import pytest

from gpuplay.core.runner import run
from gpuplay.core.runner.profile import profile_spec
from gpuplay.core.spec import RunSpec

pytestmark = pytest.mark.gpu
N = 1 << 20


def go(workload, params, backend="torch", **kw):
    return run(RunSpec.make(workload, params, backend=backend, device="cuda:0", warmup=2, repeat=5, **kw))


@pytest.mark.parametrize("backend", ["torch", "cupy"])
@pytest.mark.parametrize("op", ["h2d", "d2h", "serial", "overlap", "copy"])
@pytest.mark.parametrize("memory", ["pinned", "pageable"])
def test_transfers_on_cuda_are_correct(backend, op, memory):
    if backend == "cupy":
        pytest.importorskip("cupy")
    r = go("transfers", {"n": N, "op": op, "memory": memory, "chunks": 4}, backend)
    assert r.status == "ok", r.message
    assert r.check_ok and r.gbps > 0


def test_pinned_h2d_is_not_slower_than_pageable():
    pinned = go("transfers", {"n": 1 << 24, "op": "h2d", "memory": "pinned"})
    pageable = go("transfers", {"n": 1 << 24, "op": "h2d", "memory": "pageable"})
    assert pinned.gbps >= 0.9 * pageable.gbps


@pytest.mark.parametrize("sdpa", ["math", "flash", "efficient", "cudnn", "auto"])
def test_attention_backends_run_or_are_refused_with_reason(sdpa):
    r = go("attention", {"batch": 2, "heads": 4, "seq": 256, "dim": 64, "sdpa": sdpa}, dtype="float16")
    assert r.status in ("ok", "refused"), r.message
    if r.status == "ok":
        assert r.check_ok, (r.error, r.tolerance)
    else:
        assert "cannot run here" in r.message


@pytest.mark.parametrize("impl", ["ops", "elementwise", "raw"])
def test_cupy_fused_kernels_and_counts(impl):
    pytest.importorskip("cupy")
    r = go("fused", {"n": N, "impl": impl}, "cupy")
    assert r.status == "ok" and r.check_ok, r.message
    assert any(n.startswith("kernels per step: " + ("9" if impl == "ops" else "1")) for n in r.notes)


def test_torch_cuda_fused_kernel_count_is_measured():
    r = go("fused", {"n": N})
    assert r.status == "ok" and any("CUDA kernels launched" in n for n in r.notes), r.notes


@pytest.mark.parametrize("backend", ["torch", "cupy"])
@pytest.mark.parametrize("fmt", ["csr", "dense"])
def test_sparse_on_cuda(backend, fmt):
    if backend == "cupy":
        pytest.importorskip("cupy")
    r = go("sparse", {"n": 1024, "density": 0.01, "format": fmt}, backend)
    assert r.status == "ok" and r.check_ok, r.message


@pytest.mark.parametrize("mode", ["grad", "no_grad", "inference"])
def test_inference_on_cuda_with_graphs(mode):
    r = go("inference", {"batch": 4, "mode": mode}, cuda_graphs=mode != "grad")
    assert r.status == "ok" and r.check_ok, r.message


def test_profile_on_cuda_lists_kernels_and_overhead(tmp_path):
    data = profile_spec(
        RunSpec.make("fused", {"n": N}, backend="torch", device="cuda:0"), trace=str(tmp_path / "t.json")
    )
    assert data["status"] == "ok", data.get("message")
    assert data["activities"] == ["cpu", "cuda"] and data["top_kernels"]
    assert data["kernels_per_step"] == 9 and 0 <= data["overhead_share"] <= 1
