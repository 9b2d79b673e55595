"""Intel GPUs through torch.xpu: the devices, their memory, and what torch does not give.

torch.xpu mirrors torch.cuda's device, memory, stream and event API. It gives no utilisation,
power or energy (xpu-smi and Level Zero's Sysman do, and gpuplay does not read them): those
figures read n/a with that reason. Verified against a fake torch.xpu only (tests/unit/test_xpu.py).
"""

from __future__ import annotations

from typing import Any

from gpuplay.core.hw.accelerator import Accelerator, number

NO_UTILISATION = (
    "torch.xpu gives memory only: utilisation, power and energy need xpu-smi, which gpuplay does not read"
)


def xpu(torch: Any) -> Any:
    """torch.xpu when this torch has it and sees a device, else None."""
    mod = getattr(torch, "xpu", None)
    try:
        return mod if mod is not None and mod.is_available() else None
    except Exception:
        return None


def torch_devices(torch: Any) -> list[Accelerator]:
    mod = xpu(torch)
    if mod is None:
        return []
    out = []
    for i in range(mod.device_count()):
        p = mod.get_device_properties(i)
        total = number(getattr(p, "total_memory", None))
        out.append(
            Accelerator(
                f"xpu:{i}", "Intel", str(getattr(p, "name", "Intel GPU")), "", "XPU",
                int(total) if total else None, "",
                # Arc and Flex GPUs emulate or lack float64: torch reports it per device.
                {"fp64": bool(getattr(p, "has_fp64", True)), "driver": str(getattr(p, "driver_version", ""))},
            )
        )  # fmt: skip
    return out


class RunWindow:
    """Memory over a run's timed steps on `xpu:N`: allocated at the end and the peak (torch's
    own counters, reset at the start), in the engine process where torch lives."""

    def __init__(self, device: str) -> None:
        import torch  # the engine's: a run on xpu has imported it already

        self.device, self.mod = device, xpu(torch)
        if self.mod is not None:
            try:
                self.mod.reset_peak_memory_stats(device)
            except Exception:
                pass  # an older torch.xpu: the peak then covers the whole process
        self.note = "" if self.mod is not None else "torch.xpu sees no device"

    def end(self, seconds: float) -> dict[str, Any] | None:
        if self.mod is None:
            return None
        index = int(self.device.split(":")[1]) if ":" in self.device else 0

        def read(name: str) -> int | None:
            try:
                v = number(getattr(self.mod, name)(self.device))
            except Exception:
                return None
            return int(v) if v is not None else None

        props = self.mod.get_device_properties(index)
        return {
            "vendor": "Intel", "index": index, "name": str(getattr(props, "name", "Intel GPU")),
            "mem_allocated_bytes": read("memory_allocated"), "mem_reserved_bytes": read("memory_reserved"),
            "mem_peak_bytes": read("max_memory_allocated"), "util_mean_percent": None, "power_mean_w": None,
            "util_note": NO_UTILISATION, "activity": {"reason": "GPM n/a: GPM counters are NVIDIA's (NVML)"},
        }  # fmt: skip
