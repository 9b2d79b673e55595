"""Issue 32's GPU-path fixes on a real GPU: one timing convention (item 2), the run's own peak
memory (item 4), out of memory from library workspaces (item 5). The fakes in
tests/unit/test_gpu_fakes_round2.py pin the logic; these check it against real torch and CuPy.

Skipped where there is no CUDA device. Written without a GPU at hand (from the torch and CuPy
documentation); the GPU verification kit runs them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from gpuplay.core.runner import run
from gpuplay.core.spec import RunSpec

pytestmark = pytest.mark.gpu
MIB = 2**20


# -- item 2: warm and cold steps timed alike ----------------------------------------------------------
@pytest.mark.parametrize("n", [1 << 12, 1 << 20])  # launch-bound, then about L2-sized
def test_a_cold_step_is_not_faster_than_the_warm_one(n):
    spec = RunSpec.make("elementwise", {"n": n}, backend="torch", device="cuda:0", repeat=60, warmup=10)
    warm, cold = run(spec), run(spec.replace(cache="cold"))
    assert warm.status == cold.status == "ok", (warm.message, cold.message)
    assert "idle GPU" in warm.conditions["timing"] and cold.conditions["cache"].startswith("cold:")
    # Same start state, host dispatch included in both: cold can only add the cache misses.
    # 3 % of slack for run-to-run noise; before the fix a launch-bound cold step read ~5x faster.
    assert cold.median >= 0.97 * warm.median, (cold.median, warm.median)


# -- item 4: the run's own peak memory -------------------------------------------------------------------
def test_torch_reports_the_runs_peak_allocated_memory():
    n = 4096
    r = run(RunSpec.make("matmul", {"n": n}, backend="torch", device="cuda:0", repeat=5, warmup=2))
    assert r.status == "ok" and r.peak_memory is not None, r.message
    three_matrices = 3 * n * n * 4  # two float32 inputs and the output, alive in the timed step
    assert three_matrices <= r.peak_memory["bytes"] < 4 * three_matrices + 256 * MIB
    assert "max_memory_allocated" in r.peak_memory["source"]


def test_cupy_says_its_pool_counts_no_peak_and_what_it_holds():
    pytest.importorskip("cupy")
    n = 4096
    r = run(RunSpec.make("matmul", {"n": n}, backend="cupy", device="cuda:0", repeat=5, warmup=2))
    assert r.status == "ok" and r.peak_memory is not None, r.message
    # total_bytes() holds set-up and warm-up blocks too: no peak of the timed steps, never a figure
    assert r.peak_memory["bytes"] is None and r.peak_memory["source"].startswith("n/a: CuPy's memory pool")


# -- item 5: out of memory, library workspaces included ---------------------------------------------------
@contextlib.contextmanager
def nearly_full(device: str = "cuda:0", leave: int = 8 * MIB) -> Iterator[None]:
    """Hold all but `leave` bytes of the device's free memory in one torch buffer."""
    import torch

    torch.cuda.empty_cache()
    free, _total = torch.cuda.mem_get_info(device)
    blocker = torch.empty(max(0, free - leave), dtype=torch.uint8, device=device)
    try:
        yield
    finally:
        del blocker
        torch.cuda.empty_cache()


def test_a_torch_fft_without_room_for_its_workspace_reads_out_of_memory():
    import torch

    from gpuplay.core.backends import get_backend
    from gpuplay.core.backends.oom import describe_oom

    backend = get_backend("torch")
    x = torch.randn(1 << 22, device="cuda:0")
    # OutOfMemoryError, or cuFFT's CUFFT_ALLOC_FAILED for the plan's workspace
    with nearly_full(), pytest.raises(Exception) as caught:
        torch.fft.fft(x)
        torch.cuda.synchronize()
    assert backend.is_out_of_memory(caught.value), repr(caught.value)
    message = describe_oom(backend, "cuda:0", "n=4194304", caught.value)
    assert "out of memory on cuda:0" in message and "free on cuda:0" in message


def test_a_cupy_fft_without_room_for_its_plan_reads_out_of_memory():
    cupy = pytest.importorskip("cupy")

    from gpuplay.core.backends import get_backend

    backend = get_backend("cupy")
    x = cupy.random.standard_normal(1 << 22, dtype=cupy.float32)
    cupy.fft.config.get_plan_cache().clear()  # a new plan: its workspace must be allocated
    # CuFFTError(CUFFT_ALLOC_FAILED) for the plan's workspace, or OutOfMemoryError
    with nearly_full(), pytest.raises(Exception) as caught:
        cupy.fft.fft(x)
        cupy.cuda.get_current_stream().synchronize()
    assert backend.is_out_of_memory(caught.value), repr(caught.value)


def test_a_run_that_does_not_fit_says_out_of_memory_and_what_was_free():
    with nearly_full(leave=64 * MIB):
        r = run(RunSpec.make("fft1d", {"n": 1 << 24}, backend="torch", device="cuda:0", repeat=3, warmup=1))
    # Refused by the preflight, or failed in the step: either way out of memory, with the free memory.
    assert r.failure == "out-of-memory" and "free" in r.message, (r.status, r.message)
