"""What a result ran with: gpuplay, Python, NumPy, torch (and its CUDA or HIP runtime), CuPy, the
driver, and the device's UUID.

Recorded in the engine process beside every result (runner/plan.py `conditions`), so a result
file read back months later still says which versions produced it, and `gpuplay compare --from
old.json new.json` can say which of them differ (core/reports/crossversion.py). Nothing is imported for
this: a library's version is read from its installed metadata (core/storage/installed.py, without
importing importlib.metadata: ~11 ms of a NumPy run's engine start), and torch's runtime
only where the run already loaded torch (a NumPy run must not import it).
"""

from __future__ import annotations

import functools
import platform
import sys
from typing import Any

from gpuplay.core.measure import telemetry
from gpuplay.core.storage import installed as installed_dists

# (key in the record, distribution names to try in order)
PACKAGES = (
    ("numpy", ("numpy",)),
    ("torch", ("torch",)),
    ("cupy", ("cupy-cuda13x", "cupy-cuda12x", "cupy-cuda11x", "cupy")),
    ("nvidia_ml_py", ("nvidia-ml-py",)),
)


def package_version(names: tuple[str, ...]) -> str | None:
    for name in names:
        try:
            version = installed_dists.version(name)
        except Exception:  # a broken install's metadata: say nothing rather than fail the run
            return None
        if version is not None:
            return version
    return None


@functools.cache
def installed() -> tuple[tuple[str, str], ...]:
    """Read once per process (5 ms: every run of a sweep would pay it): what this process loaded
    stays what it loaded, even if a newer version is installed under it meanwhile. The engine
    reads them while it waits for its first request (engine/server.py `warm_runner`)."""
    found = ((key, package_version(names)) for key, names in PACKAGES)
    return tuple((key, v) for key, v in found if v)


def software() -> dict[str, Any]:
    """The versions this process runs with; a library that is not installed is absent."""
    from gpuplay import __version__

    out: dict[str, Any] = {"gpuplay": __version__, "python": platform.python_version(), **dict(installed())}
    torch = sys.modules.get("torch")  # loaded by this run, or not at all
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


def versions(device_id: str) -> dict[str, Any]:
    """Everything above for one result: software, then the device's driver and UUID."""
    return {**software(), **device(device_id)}
