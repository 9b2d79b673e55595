"""What this machine offers gpuplay, and what it does not and why (`gpuplay info`)."""

from __future__ import annotations

import contextlib
from typing import Any

from gpuplay.core.backends import all_backends
from gpuplay.core.measure.telemetry import (
    cuda_nvml_mapping,
    gpm_status,
    gpu_count,
    nvml,
    nvml_status,
    query_gpu,
)
from gpuplay.core.reports.report import environment
from gpuplay.core.storage.config import config_dir, load_config, state_dir


def cupy_cuda_major() -> int | None:
    """The CUDA major version CuPy was built for: from its wheel's name (cupy-cuda12x), else its
    runtime; None without CuPy. Reads no device (works without a driver)."""
    from importlib import metadata

    for major in (11, 12, 13, 14):
        with contextlib.suppress(metadata.PackageNotFoundError):
            metadata.version(f"cupy-cuda{major}x")
            return major
    try:
        import cupy
    except ImportError:
        return None
    if getattr(cupy.cuda.runtime, "is_hip", False):  # ROCm's HIP version is no CUDA major
        return None
    with contextlib.suppress(Exception):
        return int(cupy.cuda.runtime.runtimeGetVersion()) // 1000
    return None


def cuda_major_mismatch(torch_cuda: str | None, cupy_major: int | None) -> str:
    """A warning when CuPy and torch were built for different CUDA majors, else ''.

    Two CUDA runtimes in one process: one of them may not match the driver, and the two
    libraries' figures are then not from the same toolkit.
    """
    if not torch_cuda or cupy_major is None:
        return ""
    try:
        torch_major = int(str(torch_cuda).split(".")[0])
    except ValueError:
        return ""
    if torch_major == cupy_major:
        return ""
    extra = "cupy" if torch_major == 13 else f"cupy-cuda{torch_major}"
    return (
        f"CuPy is built for CUDA {cupy_major}, PyTorch for CUDA {torch_cuda}: install the CuPy that "
        f"matches (pip install cupy-cuda{torch_major}x; from a checkout: pip install -e '.[{extra}]')"
    )


def _accelerators(backends: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """Every accelerator torch reports (with its vendor) and amdsmi's telemetry for AMD's; and, per
    vendor whose library finds nothing or is missing for a device torch reports, why."""
    import sys

    from gpuplay.core.hw import amd
    from gpuplay.core.hw.accelerator import Accelerator
    from gpuplay.core.hw.devices import vendor_notes

    torch_entry: dict[str, Any] = next((b for b in backends if b["name"] == "torch"), {"devices": []})
    found = []
    for d in torch_entry["devices"]:
        if d["id"] == "cpu":
            continue
        vendor = d.get("vendor") or ("NVIDIA" if d["id"].startswith("cuda") else "")
        found.append(
            Accelerator(d["id"], vendor, d["name"], str(d.get("arch", "")), str(d.get("runtime", "")))
        )
    rows: list[dict[str, Any]] = [
        {"device": a.torch_device, "vendor": a.vendor, "name": a.name} for a in found
    ]
    if any(a.vendor == "AMD" for a in found) and not amd.status():
        by_pci = {g.bdf: g for g in amd.gpus()}
        for row in rows:
            g = amd.gpu_for_torch_device(row["device"]) if row["vendor"] == "AMD" else None
            if g is not None:
                row["amdsmi"] = {"index": g.index, "pci": g.bdf, **amd.query(by_pci.get(g.bdf, g))}
    return rows, vendor_notes(sys.modules.get("torch"), found)


def gather(probe_timeout: float = 30.0) -> dict[str, Any]:
    for b in all_backends():
        b.start_probe()  # probe all three at once; CuPy's can be slow
    backends = []
    warnings: list[str] = []
    for b in all_backends():
        avail, devices = b.probe(probe_timeout)
        entry: dict[str, Any] = {
            "name": b.name,
            "title": b.title,
            "version": b.version() if avail.ok else None,
            "available": avail.ok,
            "reason": avail.reason,
            "devices": [
                {"id": d.id, "name": d.name, "memory_bytes": d.memory_bytes, **d.extra} for d in devices
            ],
        }
        if b.name == "torch" and avail.ok:
            entry["cuda"] = b.cuda_reason() or "available"  # type: ignore[attr-defined]
            with contextlib.suppress(Exception):
                import torch

                entry["cuda_version"] = torch.version.cuda
                entry["cudnn"] = torch.backends.cudnn.version() if torch.cuda.is_available() else None
                entry["threads"] = torch.get_num_threads()
        if b.name == "cupy":
            entry["cuda_major"] = cupy_cuda_major()
        if b.name == "numpy":
            from gpuplay.core.backends.numpy_backend import blas_threads

            entry["blas_threads"] = blas_threads()
        backends.append(entry)
    torch_cuda = next((e.get("cuda_version") for e in backends if e["name"] == "torch"), None)
    cupy_major = next((e.get("cuda_major") for e in backends if e["name"] == "cupy"), None)
    mismatch = cuda_major_mismatch(torch_cuda, cupy_major)
    if mismatch:
        warnings.append(mismatch)
    status = nvml_status()
    gpus = []
    driver = None
    cuda_map: list[dict[str, Any]] = []
    if not status:
        driver = nvml.call("nvmlSystemGetDriverVersion")
        gpus = [{**vars(query_gpu(i)), "gpm": gpm_status(i) or "available"} for i in range(gpu_count())]
        cuda_map = cuda_nvml_mapping()
    accelerators, vendor_notes = _accelerators(backends)
    cfg = load_config()
    from gpuplay.core.measure.roofline import summary

    roof_devices: dict[str, None] = dict.fromkeys(
        [
            "cpu",
            *(d["id"] for b in backends for d in b["devices"] if d["id"].startswith(("cuda", "xpu", "mps"))),
        ]
    )
    return {
        "environment": environment(),
        "backends": backends,
        "nvml": {"status": status or "ok", "driver": driver, "gpus": gpus, "cuda_to_nvml": cuda_map},
        "accelerators": accelerators,
        "vendor_notes": vendor_notes,
        "warnings": warnings,
        "paths": {"config": str(config_dir() / "config.toml"), "state": str(state_dir())},
        "config_problems": cfg.problems,
        "roofline": [summary(d) for d in roof_devices],
    }
