"""Facts about the host that results carry: CPU model, core count, library versions."""

from __future__ import annotations

import functools
import os
import platform
import sys


@functools.cache
def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def cpu_count() -> int:
    """Cores this process may use (affinity-aware where the OS says)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def package_version(name: str) -> str | None:
    """`name`'s installed version, once per process, as a result's own versions are
    (core/measure/provenance.py), without importing importlib.metadata (core/storage/installed.py)."""
    from gpuplay.core.storage import installed

    return installed.version(name)


def host_description() -> dict[str, object]:
    return {
        "cpu": cpu_name(),
        "cores": cpu_count(),
        "python": sys.version.split()[0],
        "platform": platform.platform(terse=True),
    }
