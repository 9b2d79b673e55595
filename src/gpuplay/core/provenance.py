"""What a result ran with: gpuplay, Python, NumPy, the backend's library (torch and its CUDA or HIP
runtime, CuPy), NVML's bindings on an NVIDIA GPU, the driver, and the device's UUID.

Recorded in the engine process beside every result (runner/plan.py `conditions`), so a result
file read back months later still says which versions produced it, and `gpuplay compare --from
old.json new.json` can say which of them differ (core/crossversion.py). A result names the
libraries its configuration runs with (`libraries_for`), whatever else the engine has loaded or
the environment has installed (a file's `environment` says those: core/report.py). Nothing is
imported for this: a library the run loaded says its version itself (`__version__`); one without
it is read from its installed metadata.
"""

from __future__ import annotations

import functools
import platform
import sys
from typing import Any

from gpuplay.core import telemetry

# (key in the record, the module a run loads, distribution names to try in order)
PACKAGES = (
    ("numpy", "numpy", ("numpy",)),
    ("torch", "torch", ("torch",)),
    ("cupy", "cupy", ("cupy-cuda13x", "cupy-cuda12x", "cupy-cuda11x", "cupy")),
    ("nvidia_ml_py", "pynvml", ("nvidia-ml-py",)),
)
_PACKAGES = {key: (module, names) for key, module, names in PACKAGES}


def package_version(names: tuple[str, ...]) -> str | None:
    """The first of `names` installed, from its metadata (core/installed.py: found as
    importlib.metadata finds it, without importing it)."""
    from gpuplay.core import installed

    for name in names:
        try:
            version = installed.version(name)
        except Exception:  # a broken install's metadata: say nothing rather than fail the run
            return None
        if version is not None:
            return version
    return None


def libraries_for(backend: str, device: str) -> tuple[str, ...]:
    """The libraries a run of `backend` on `device` runs with: NumPy always (its inputs, float64
    reference and check), the backend's own, and NVML's bindings for an NVIDIA GPU's telemetry."""
    keys = ["numpy"]
    if backend in _PACKAGES and backend != "numpy":
        keys.append(backend)
    if device.startswith("cuda"):
        keys.append("nvidia_ml_py")
    return tuple(keys)


@functools.cache
def library_version(key: str) -> str | None:
    """One library's version, once per process (every run of a sweep asks): what this process
    loaded stays what it loaded, even if a newer version is installed under it meanwhile. The
    loaded module's own `__version__` where it has one (a NumPy run reads no metadata: ~15 ms of
    the engine's start on the 2-core machine, issue 34), else the installed metadata."""
    module, names = _PACKAGES[key]
    version = getattr(sys.modules.get(module), "__version__", None)
    if isinstance(version, str) and version:
        return version
    return package_version(names)


def software(backend: str = "numpy", device: str = "cpu") -> dict[str, Any]:
    """The versions a run of `backend` on `device` runs with; a library that is not installed is
    absent."""
    from gpuplay import __version__

    out: dict[str, Any] = {"gpuplay": __version__, "python": platform.python_version()}
    for key in libraries_for(backend, device):
        version = library_version(key)
        if version:
            out[key] = version
    torch = sys.modules.get("torch") if backend == "torch" else None  # loaded by this run
    version = getattr(torch, "version", None)
    if version is not None:
        if getattr(version, "cuda", None):
            out["torch_cuda"] = str(version.cuda)
        if getattr(version, "hip", None):
            out["torch_hip"] = str(version.hip)
    return out


def device(device_id: str) -> dict[str, Any]:
    """The GPU's driver and UUID for a CUDA device ('' facts are left out); nothing for the CPU."""
    if not device_id.startswith("cuda"):
        return {}
    out: dict[str, Any] = {}
    driver = telemetry.nvml.call("nvmlSystemGetDriverVersion")
    if driver:
        out["driver"] = driver.decode() if isinstance(driver, bytes) else str(driver)
    index = int(device_id.split(":")[1]) if ":" in device_id else 0
    uuids = telemetry.cuda_device_uuids()
    if uuids and 0 <= index < len(uuids):
        out["device_uuid"] = uuids[index]
    return out


def versions(device_id: str, backend: str = "numpy") -> dict[str, Any]:
    """Everything above for one result: software, then the device's driver and UUID."""
    return {**software(backend, device_id), **device(device_id)}
