"""Every accelerator torch reports, each described by its vendor's module; and, per vendor, why
a library finds nothing (`gpuplay info`). Nothing here imports torch: the caller hands it in."""

from __future__ import annotations

from typing import Any

from gpuplay.core.hw import amd, apple, intel
from gpuplay.core.hw.accelerator import Accelerator


def torch_accelerators(torch: Any) -> list[Accelerator]:
    """torch's GPUs: CUDA devices as NVIDIA's or, on a ROCm build, AMD's; then XPU, then MPS."""
    out: list[Accelerator] = []
    try:
        if torch.cuda.is_available():
            if getattr(torch.version, "hip", None):
                out.extend(amd.torch_devices(torch))
            else:
                for i in range(torch.cuda.device_count()):
                    p = torch.cuda.get_device_properties(i)
                    out.append(Accelerator(f"cuda:{i}", "NVIDIA", str(p.name), f"sm_{p.major}{p.minor}",
                                           f"CUDA {torch.version.cuda}", int(p.total_memory), str(getattr(p, "uuid", "")),
                                           {"capability": f"{p.major}.{p.minor}", "sms": p.multi_processor_count}))  # fmt: skip
    except Exception:
        pass  # a broken CUDA runtime: torch's own probe says why
    out.extend(intel.torch_devices(torch))
    out.extend(apple.torch_devices(torch))
    return out


def vendor_notes(torch: Any | None, accelerators: list[Accelerator]) -> list[str]:
    """Per vendor whose library is here but finds nothing, or whose device torch reports without
    its library: why, in one line. A machine with neither (plain CPU) gets none."""
    notes = []
    has_amd = any(a.vendor == "AMD" for a in accelerators)
    if has_amd and amd.status():
        notes.append(f"AMD: {amd.status()}: no telemetry or energy for the AMD GPUs")
    elif not has_amd and amd.installed():
        reason = amd.status()
        found = len(amd.gpus()) if not reason else 0
        if reason or found == 0:
            notes.append(
                f"AMD: amdsmi is installed but finds no GPU ({reason or 'no AMD GPU on this machine'})"
            )
        elif torch is not None and not getattr(getattr(torch, "version", None), "hip", None):
            notes.append(
                f"AMD: amdsmi sees {found} GPU(s) but this PyTorch is not a ROCm build: install torch for ROCm"
            )
    return notes


def run_window(device: str) -> Any:
    """The vendor's run-window reader for `device`, or None where NVML (NVIDIA) or the CPU serve."""
    if device.startswith("cuda") and amd.rocm_torch() is not None:
        return amd.RunWindow(device)
    if device.startswith("xpu"):
        return intel.RunWindow(device)
    if device == "mps":
        return apple.RunWindow(device)
    return None
