"""What this machine offers gpuplay, and what it does not and why (`gpuplay info`)."""

from __future__ import annotations

import contextlib
from typing import Any

from gpuplay.core.backends import all_backends
from gpuplay.core.config import config_dir, load_config, state_dir
from gpuplay.core.report import environment
from gpuplay.core.telemetry import gpu_count, nvml, nvml_status, query_gpu


def gather(probe_timeout: float = 30.0) -> dict[str, Any]:
    for b in all_backends():
        b.start_probe()  # probe all three at once; CuPy's can be slow
    backends = []
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
        if b.name == "numpy":
            from gpuplay.core.backends.numpy_backend import blas_threads

            entry["blas_threads"] = blas_threads()
        backends.append(entry)
    status = nvml_status()
    gpus = []
    driver = None
    if not status:
        driver = nvml.call("nvmlSystemGetDriverVersion")
        gpus = [vars(query_gpu(i)) for i in range(gpu_count())]
    cfg = load_config()
    from gpuplay.core.roofline import summary

    roof_devices: dict[str, None] = dict.fromkeys(
        ["cpu", *(d["id"] for b in backends for d in b["devices"] if d["id"].startswith("cuda"))]
    )
    return {
        "environment": environment(),
        "backends": backends,
        "nvml": {"status": status or "ok", "driver": driver, "gpus": gpus},
        "paths": {"config": str(config_dir() / "config.toml"), "state": str(state_dir())},
        "config_problems": cfg.problems,
        "roofline": [summary(d) for d in roof_devices],
    }
