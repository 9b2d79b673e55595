"""What a roofline probe needs from one GPU through torch, per vendor: its module's events,
free memory, cache size and identity. CUDA and ROCm (torch.cuda), Intel (torch.xpu) and Apple
(torch.mps) differ only here, so `gpuplay calibrate` runs the same STREAM and matmul probes on
each. XPU and MPS were verified against fake torch.xpu / torch.mps only (tests/unit/test_xpu.py,
tests/unit/test_mps.py): no Intel GPU or Mac has run them yet.
"""

from __future__ import annotations

import platform
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpuplay.core.hw import amd, apple, intel
from gpuplay.core.hw.accelerator import number

# The float32 tensor-core format is NVIDIA's; Intel and Apple calibrate the dtypes their torch
# computes (float64 only where the device has it: Arc/Flex and Metal do not).
GPU_DTYPES = ("float64", "float32", "tf32", "bfloat16", "float16")


@dataclass
class DeviceApi:
    """torch's module for one device ('cuda', 'xpu' or 'mps') and what the probes read from it."""

    device: str
    kind: str
    mod: Any
    name: str
    dtypes: tuple[str, ...]

    def timer(self, fn: Callable[[], Any]) -> Callable[[], float]:
        """Seconds of one call, between two device events; the end event's wait is the sync
        (torch.cuda, torch.xpu and torch.mps share this Event API)."""
        start, end = self.mod.Event(enable_timing=True), self.mod.Event(enable_timing=True)

        def once() -> float:
            start.record()
            fn()
            end.record()
            end.synchronize()
            return float(start.elapsed_time(end)) / 1e3

        return once

    def free_bytes(self) -> int:
        """Memory the probes may fill. MPS shares the host's memory: Metal's recommended working
        set less what the driver already holds for this process."""
        if self.kind == "mps":
            limit = number(_call(self.mod, "recommended_max_memory"))
            held = number(_call(self.mod, "driver_allocated_memory")) or 0
            return int(limit - held) if limit else 4 * 2**30
        free, _total = self.mod.mem_get_info(int(self.device.split(":")[1]) if ":" in self.device else 0)
        return int(free)

    def cache_bytes(self) -> int:
        """The last-level cache the STREAM arrays must dwarf (64 MiB where torch does not say)."""
        if self.kind == "mps":
            return 64 * 2**20
        index = int(self.device.split(":")[1]) if ":" in self.device else 0
        props = self.mod.get_device_properties(index)
        return int(number(getattr(props, "L2_cache_size", 0)) or 64 * 2**20)

    def empty_cache(self) -> None:
        self.mod.empty_cache()


def result_name(torch: Any, device: str, fallback: str) -> str:
    """The device's name as results carry it (the torch backend's probe): an NVIDIA board's own
    name, the others' labels ('… (XPU)', '… (MPS)', '… (gfx942, ROCm 6.2)'). A result finds its
    peaks by this name, so the cache must hold the same one, not torch's bare device name."""
    from gpuplay.core.hw.devices import torch_accelerators

    for a in torch_accelerators(torch):
        if a.torch_device == device:
            return a.name if a.vendor == "NVIDIA" else a.label()
    return fallback


def device_api(torch: Any, device: str) -> DeviceApi:
    """The API of `device` (cuda:N, xpu:N or mps); ValueError when torch does not see it."""
    if device == "mps":
        if apple.mps(torch) is None:
            raise ValueError("torch sees no MPS device")
        name = result_name(torch, device, apple.chip_name())
        return DeviceApi(device, "mps", torch.mps, name, ("float32", "bfloat16", "float16"))
    if device.startswith("xpu"):
        mod = intel.xpu(torch)
        index = int(device.split(":")[1]) if ":" in device else 0
        if mod is None or index >= mod.device_count():
            raise ValueError(f"torch.xpu sees no device {device}")
        mod.set_device(index)
        props = mod.get_device_properties(index)
        fp64 = bool(getattr(props, "has_fp64", True))
        dtypes = tuple(d for d in GPU_DTYPES if d != "tf32" and (fp64 or d != "float64"))
        return DeviceApi(
            device, "xpu", mod, result_name(torch, device, str(getattr(props, "name", ""))), dtypes
        )
    index = int(device.split(":")[1]) if ":" in device else 0
    torch.cuda.set_device(index)
    name = result_name(torch, device, torch.cuda.get_device_name(index))
    dtypes = GPU_DTYPES
    if getattr(torch.version, "hip", None):  # ROCm: TF32 only where the GPU has it (MI300 on)
        arch = amd.arch_of(torch.cuda.get_device_properties(index))
        dtypes = tuple(d for d in GPU_DTYPES if d != "tf32" or not amd.tf32_refusal(arch, name))
    return DeviceApi(device, "cuda", torch.cuda, name, dtypes)


def identity(device: str) -> dict[str, Any]:
    """Which XPU or Mac the peaks belong to, as a GPU's UUID, driver and power limit say it for
    CUDA: read from the torch this process has loaded (None, so not compared, where it has not:
    the front end never imports torch)."""
    torch = sys.modules.get("torch")
    if device == "mps":
        mac = platform.mac_ver()[0] if platform.system() == "Darwin" else ""
        return {"chip": apple.chip_name(), "macos": mac or None}
    mod = intel.xpu(torch) if torch is not None else None
    index = int(device.split(":")[1]) if ":" in device else 0
    try:
        props = mod.get_device_properties(index) if mod is not None else None
    except Exception:
        props = None

    def prop(name: str) -> Any:
        v = getattr(props, name, None)
        return str(v) if v is not None and not isinstance(v, int | float) else v

    return {
        "uuid": prop("uuid"),
        "driver": prop("driver_version"),
        "total_memory": prop("total_memory"),
        "compute_units": prop("max_compute_units"),
    }


def _call(mod: Any, name: str) -> Any:
    try:
        return getattr(mod, name)()
    except Exception:  # an older torch.mps without it
        return None
