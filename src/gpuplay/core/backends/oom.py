"""Out of memory, recognised by the error's type and status, not only by its words.

A library's workspace allocation fails with the library's own error: cuFFT's plan answers
CUFFT_ALLOC_FAILED, cuBLAS's handle CUBLAS_STATUS_ALLOC_FAILED, cuSOLVER's
CUSOLVER_STATUS_ALLOC_FAILED, the CUDA runtime cudaErrorMemoryAllocation. CuPy raises them as
CuFFTError (`.result`), CUBLASError / CUSOLVERError / CUDARuntimeError (`.status`); torch wraps
them in a RuntimeError whose text carries the status name. torch's and CuPy's own allocators
raise OutOfMemoryError. Each reads "out of memory" here, with what failed to allocate and how
large it was where the error says so. Classes are matched by name along the MRO, so nothing
here imports torch or CuPy.
"""

from __future__ import annotations

import contextlib
import math
import re
from dataclasses import dataclass
from typing import Any

# (class name, status attribute) -> the status values meaning "could not allocate"
_STATUS_ALLOC_FAILED: dict[tuple[str, str], dict[int, str]] = {
    ("CuFFTError", "result"): {2: "cuFFT workspace (CUFFT_ALLOC_FAILED)"},
    ("CUBLASError", "status"): {3: "cuBLAS workspace (CUBLAS_STATUS_ALLOC_FAILED)"},
    ("CUSOLVERError", "status"): {2: "cuSOLVER workspace (CUSOLVER_STATUS_ALLOC_FAILED)"},
    ("CUSPARSEError", "status"): {2: "cuSPARSE workspace (CUSPARSE_STATUS_ALLOC_FAILED)"},
    ("CUDARuntimeError", "status"): {2: "CUDA runtime allocation (cudaErrorMemoryAllocation)"},
    ("CUDADriverError", "status"): {2: "CUDA driver allocation (CUDA_ERROR_OUT_OF_MEMORY)"},
}
# The status names torch's RuntimeErrors carry in their text (it has no typed error for them).
_STATUS_NAMES = {
    "CUFFT_ALLOC_FAILED": "cuFFT workspace (CUFFT_ALLOC_FAILED)",
    "CUBLAS_STATUS_ALLOC_FAILED": "cuBLAS workspace (CUBLAS_STATUS_ALLOC_FAILED)",
    "CUSOLVER_STATUS_ALLOC_FAILED": "cuSOLVER workspace (CUSOLVER_STATUS_ALLOC_FAILED)",
    "CUSPARSE_STATUS_ALLOC_FAILED": "cuSPARSE workspace (CUSPARSE_STATUS_ALLOC_FAILED)",
    "CUDNN_STATUS_ALLOC_FAILED": "cuDNN workspace (CUDNN_STATUS_ALLOC_FAILED)",
    "cudaErrorMemoryAllocation": "CUDA runtime allocation (cudaErrorMemoryAllocation)",
    "CUDA_ERROR_OUT_OF_MEMORY": "CUDA driver allocation (CUDA_ERROR_OUT_OF_MEMORY)",
}
_ALLOCATOR_CLASSES = ("OutOfMemoryError", "MemoryError")
_UNITS = {"": 1, "B": 1, "BYTES": 1, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40,
          "KB": 10**3, "MB": 10**6, "GB": 10**9}  # fmt: skip
# torch: "Tried to allocate 2.00 GiB"; CuPy: "Out of memory allocating 1,073,741,824 bytes";
# NumPy: "Unable to allocate 7.45 GiB for an array"
_SIZE = re.compile(
    r"(?:tried to allocate|allocating|unable to allocate)\s+([\d,]+(?:\.\d+)?)\s*([KMGT]i?B|bytes|B)?", re.I
)


@dataclass(frozen=True)
class OutOfMemory:
    what: str  # what failed to allocate, in words
    requested_bytes: int | None  # the size that did not fit, where the error says


def _classes(exc: BaseException) -> list[str]:
    return [c.__name__ for c in type(exc).__mro__]


def out_of_memory(exc: BaseException) -> OutOfMemory | None:
    """What ran out of memory in `exc`, or None when it is another error."""
    names = _classes(exc)
    for (cls, attr), statuses in _STATUS_ALLOC_FAILED.items():
        if cls in names:
            status = getattr(exc, attr, None)
            if isinstance(status, int) and status in statuses:
                return OutOfMemory(statuses[status], requested_bytes(exc))
    text = str(exc)
    for status_name, what in _STATUS_NAMES.items():
        if status_name in text:
            return OutOfMemory(what, requested_bytes(exc))
    if any(n in names for n in _ALLOCATOR_CLASSES):
        return OutOfMemory("the allocator", requested_bytes(exc))
    lower = text.lower()
    # CPU torch: a RuntimeError from DefaultCPUAllocator; older torch: "CUDA out of memory" text.
    if "out of memory" in lower or "can't allocate memory" in lower:
        return OutOfMemory("the allocator", requested_bytes(exc))
    return None


def requested_bytes(exc: BaseException) -> int | None:
    """The size the failed allocation asked for, read from the error where it says."""
    m = _SIZE.search(str(exc))
    if m is None:
        return None
    try:
        value = float(m.group(1).replace(",", ""))
    except ValueError:
        return None
    scale = _UNITS.get((m.group(2) or "").upper(), 1)
    return int(value * scale) if value >= 0 else None


def fmt_bytes(n: float) -> str:
    """A byte count in words; a count that is no count (NaN, inf, negative: a glitch) reads n/a."""
    if not isinstance(n, int | float) or isinstance(n, bool) or not math.isfinite(n) or n < 0:
        return "n/a"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{int(n)} B"


def oom_message(oom: OutOfMemory, device: str, size: str, free: int | None) -> str:
    """The refusal's words: what did not fit, how large, and what was free afterwards."""
    asked = f" {fmt_bytes(oom.requested_bytes)}" if oom.requested_bytes is not None else ""
    free_text = f"; {fmt_bytes(free)} free on {device} after emptying the caches" if free is not None else ""
    return (
        f"out of memory on {device} at {size}: {oom.what} could not allocate{asked}{free_text}: "
        "choose a smaller size"
    )


def describe_oom(backend: Any, device: str, size: str, exc: BaseException) -> str:
    """The out-of-memory message for `exc`, with the memory free once the backend's caches are
    emptied (read then: free memory before emptying counts the caching allocator's blocks)."""
    found = out_of_memory(exc) or OutOfMemory("the allocator", None)
    free = None
    with contextlib.suppress(Exception):
        backend.free_memory(device)
        free = backend.device_memory_free(device)
    return oom_message(found, device, size, free)
