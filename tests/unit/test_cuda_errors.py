"""Out of memory read by type and status (core/measure/cuda_errors.py): a library's workspace that
did not fit (cuFFT, cuBLAS, the CUDA runtime) is out of memory with its size and what was free; other
statuses are not. Driven through `runner.run` on a fake "cuda:0" (tests/unit/gpu_fakes.py)."""

from __future__ import annotations

import pytest

from gpuplay.core.spec import RunSpec
from tests.unit.gpu_fakes import (
    FakeCuda,
    install_cuda_run,
)

GIB = 2**30


def _run_on_cuda(**kw):
    from gpuplay.core.runner import run

    params = kw.pop("params", {"n": 4096})
    workload = kw.pop("workload", "elementwise")
    kw = {"repeat": 5, "warmup": 1, **kw}
    return run(RunSpec.make(workload, params, backend="torch", device="cuda:0", **kw))


# -- out of memory by type and status --------------------------------------------------------------
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


@pytest.mark.gpu_fake
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
    r = _run_on_cuda()
    assert r.status == "failed" and r.failure == "out-of-memory", r.message
    assert what in r.message and "3.00 GiB free on cuda:0" in r.message
    assert size in r.message
    assert cuda.emptied >= 1  # the caches were emptied before free memory was read


@pytest.mark.gpu_fake
def test_torchs_oom_names_the_size_that_did_not_fit(monkeypatch):
    import torch

    def fail(call):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has ...")

    install_cuda_run(monkeypatch, FakeCuda(1), on_step=fail)
    r = _run_on_cuda()
    assert r.failure == "out-of-memory" and "could not allocate 2.00 GiB" in r.message


@pytest.mark.gpu_fake
@pytest.mark.parametrize("error", [CuFFTError(5), CUBLASError(14), CUDARuntimeError(999)])
def test_other_library_statuses_are_not_out_of_memory(monkeypatch, error):
    from gpuplay.core.backends.cupy_backend import CupyBackend

    install_cuda_run(monkeypatch, FakeCuda(1), on_step=lambda call: (_ for _ in ()).throw(error))
    r = _run_on_cuda()
    assert r.status == "failed" and r.failure == "error" and type(error).__name__ in r.message
    assert not CupyBackend().is_out_of_memory(error)
    assert CupyBackend().is_out_of_memory(
        type(error)(2 if isinstance(error, CuFFTError | CUDARuntimeError) else 3)
    )
