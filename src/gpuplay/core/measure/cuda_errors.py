"""CUDA errors that poison the context for the life of the process.

After one of these every later CUDA call in the process fails (the CUDA runtime calls them
"sticky"): the only recovery is a new process. Matched in the error's text, case-insensitively,
by the runtime's and the driver API's names and by their messages (cudaGetErrorString), as
PyTorch and CuPy raise them.
"""

from __future__ import annotations

STICKY_CUDA_ERRORS = (
    # messages (cudaGetErrorString)
    "device-side assert",
    "illegal memory access",
    "illegal address",
    "unspecified launch failure",
    "misaligned address",
    "illegal instruction",
    "launch timed out",  # the display watchdog killed a kernel
    "hardware stack error",
    "invalid program counter",
    "uncorrectable ecc",
    "an exception occurred on the device while executing a kernel",
    "tensor memory not completely freed",
    # runtime API names
    "cudaErrorLaunchFailure",
    "cudaErrorIllegalAddress",
    "cudaErrorAssert",
    "cudaErrorIllegalInstruction",
    "cudaErrorMisalignedAddress",
    "cudaErrorLaunchTimeout",
    "cudaErrorHardwareStackError",
    "cudaErrorInvalidAddressSpace",
    "cudaErrorInvalidPc",
    "cudaErrorECCUncorrectable",
    "cudaErrorTensorMemoryLeak",
    # driver API names (CuPy's driver errors)
    "CUDA_ERROR_LAUNCH_FAILED",
    "CUDA_ERROR_ILLEGAL_ADDRESS",
    "CUDA_ERROR_ASSERT",
    "CUDA_ERROR_ILLEGAL_INSTRUCTION",
    "CUDA_ERROR_MISALIGNED_ADDRESS",
    "CUDA_ERROR_LAUNCH_TIMEOUT",
    "CUDA_ERROR_HARDWARE_STACK_ERROR",
    "CUDA_ERROR_INVALID_ADDRESS_SPACE",
    "CUDA_ERROR_INVALID_PC",
    "CUDA_ERROR_ECC_UNCORRECTABLE",
)
_LOWER = tuple(s.lower() for s in STICKY_CUDA_ERRORS)


def is_sticky_cuda_error(text: str) -> bool:
    """Whether an error message names a context-poisoning CUDA error."""
    low = text.lower()
    return any(s in low for s in _LOWER)
