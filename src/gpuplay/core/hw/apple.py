"""Apple silicon through torch.mps: the chip's name and the memory Metal holds for torch.

MPS has no float64, no CUDA graphs and no TF32 (the planner refuses them with these reasons),
and torch gives no utilisation or power for it (powermetrics needs root): those read n/a.
Timing waits on torch.mps events, as CUDA's does on CUDA events. Verified against a fake
torch.mps only (tests/unit/test_mps.py); no Mac has run this yet.
"""

from __future__ import annotations

import platform
import subprocess
from typing import Any

from gpuplay.core.hw.accelerator import Accelerator, number

NO_FLOAT64 = "MPS has no float64: Metal GPUs compute in float32 at most"
NO_GRAPHS = "MPS has no CUDA graphs: torch captures graphs on CUDA (and ROCm) only"
NO_UTILISATION = "torch.mps gives memory only: utilisation and power need powermetrics (root)"


def mps(torch: Any) -> Any:
    """torch.mps when the MPS device is there, else None."""
    backend = getattr(getattr(torch, "backends", None), "mps", None)
    try:
        return getattr(torch, "mps", None) if backend is not None and backend.is_available() else None
    except Exception:
        return None


def chip_name() -> str:
    """'Apple M2 Pro' from the kernel's brand string; 'Apple silicon' where it cannot be read."""
    if platform.system() == "Darwin":
        try:
            out = subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True,
                                 text=True, timeout=2, check=False).stdout.strip()  # fmt: skip
            if out:
                return out
        except (OSError, subprocess.SubprocessError):
            pass
    return "Apple silicon"


def torch_devices(torch: Any) -> list[Accelerator]:
    if mps(torch) is None:
        return []
    return [Accelerator("mps", "Apple", chip_name(), "", "MPS", None, "", {"fp64": False})]


def memory(torch: Any) -> dict[str, int | None]:
    """Bytes torch holds on the GPU (allocated tensors) and Metal's driver holds for the process."""
    mod = mps(torch)

    def read(name: str) -> int | None:
        try:
            v = number(getattr(mod, name)())
        except Exception:
            return None
        return int(v) if v is not None else None

    return {
        "mem_allocated_bytes": read("current_allocated_memory"),
        "driver_allocated_bytes": read("driver_allocated_memory"),
    }


class RunWindow:
    """Memory over a run's timed steps on `mps` (in the engine process, where torch lives)."""

    def __init__(self, device: str) -> None:
        import torch

        self.torch = torch
        self.note = "" if mps(torch) is not None else "torch sees no MPS device"

    def end(self, seconds: float) -> dict[str, Any] | None:
        if mps(self.torch) is None:
            return None
        return {
            "vendor": "Apple", "index": 0, "name": chip_name(), **memory(self.torch),
            "util_mean_percent": None, "power_mean_w": None, "util_note": NO_UTILISATION,
            "activity": {"reason": "GPM n/a: GPM counters are NVIDIA's (NVML)"},
        }  # fmt: skip
