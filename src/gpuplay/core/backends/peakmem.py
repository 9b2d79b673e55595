"""A run's own peak device memory, per vendor, from what torch's module for the device offers.

The torch backend asks here (its `reset_peak_memory` and `peak_memory`), so each vendor's calls
sit in one place and the runner stays one line. The torch module is handed in, never imported.

- CUDA (and ROCm, whose torch.cuda is HIP): the caching allocator's `reset_peak_memory_stats`
  and `max_memory_allocated`: this process's tensors on the device, cached free blocks not.
- Intel XPU: torch.xpu documents the same pair, with the same meaning.
- Apple MPS: torch.mps counts no peak. It offers `current_allocated_memory` (tensors now) and
  `driver_allocated_memory` (all the Metal driver holds for the process, caches included), both
  read after the timed steps: a lower bound, not a peak, so the record says n/a and gives them.
"""

from __future__ import annotations

from typing import Any

from gpuplay.core.backends.oom import fmt_bytes

MPS_NO_PEAK = "n/a: torch.mps counts no peak"


def reset(torch: Any, device: str) -> None:
    """Start the device's peak count here (before the timed phase); nothing where there is none."""
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats(device)
    elif device.startswith("xpu"):
        torch.xpu.reset_peak_memory_stats(device)


def read(torch: Any, device: str) -> tuple[int | None, str] | None:
    """(bytes, how they were counted) since `reset`; (None, why none) where the vendor offers no
    peak; None for host memory (no device allocator to ask)."""
    if device.startswith("cuda"):
        return int(torch.cuda.max_memory_allocated(device)), "torch.cuda.max_memory_allocated, timed phase"
    if device.startswith("xpu"):
        return int(torch.xpu.max_memory_allocated(device)), "torch.xpu.max_memory_allocated, timed phase"
    if device == "mps":
        tensors = fmt_bytes(torch.mps.current_allocated_memory())
        driver = fmt_bytes(torch.mps.driver_allocated_memory())
        return (
            None,
            f"{MPS_NO_PEAK}; after the timed steps {tensors} in tensors, {driver} held by the Metal driver",
        )
    return None
