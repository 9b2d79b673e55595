"""What gpuplay asks of any accelerator, whoever made it: one small record per device.

A vendor module (nvidia, amd, intel, apple) describes torch's devices as `Accelerator`s and
answers telemetry as the same plain fields as NVML's (`core.telemetry.GpuSnapshot`); whatever it
cannot give is a reason string, never an exception. The rest of gpuplay (the planner, results,
Compare, exports, `gpuplay info`) reads these records and names no vendor library.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Accelerator:
    torch_device: str  # "cuda:0" (NVIDIA, or AMD under ROCm), "xpu:0", "mps"
    vendor: str  # "NVIDIA" | "AMD" | "Intel" | "Apple"
    name: str  # the device's own name ("AMD Instinct MI300X")
    arch: str = ""  # "gfx942", "sm_90", …
    runtime: str = ""  # "ROCm 6.2.41133", "XPU", "MPS"
    memory_bytes: int | None = None
    key: str = ""  # UUID or PCI bus id where known: what telemetry maps the device by
    extra: dict[str, Any] = field(default_factory=dict)  # capability, fp64, …

    def label(self) -> str:
        """The name results, Compare and exports carry: 'AMD Instinct MI300X (gfx942, ROCm 6.2)'."""
        detail = ", ".join(x for x in (self.arch, self.runtime) if x)
        return f"{self.name} ({detail})" if detail else self.name


def number(value: Any) -> float | None:
    """A library's field as a finite float, or None ('N/A', a missing key, NaN, a negative reading)."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) and v >= 0 else None
