"""What the simulation installs in a process at its start (tests/gpu_sim/site/sitecustomize.py).

NVML (`pynvml`) is put in place at once, as a module stand-in; torch is patched when something
imports it (an import hook), so a process that never loads torch (the app, the CLI front end)
stays as light as it is without the simulation.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from typing import Any

# h100: NVIDIA's board (torch.cuda, NVML); mi300: AMD's under ROCm (torch.cuda with torch.version.hip;
# no NVML, as a ROCm machine has amdsmi instead, and amdsmi is not simulated); xpu: an Intel GPU
# (torch.xpu, a queued device whose kernels' time only events or a synchronisation see).
KINDS = ("h100", "mi300", "xpu")


class _PatchAfterImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: wraps the loader of `torch` so the simulation patches it once loaded."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.machinery.PathFinder.find_spec(name, path)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        real_exec = loader.exec_module  # type: ignore[attr-defined]

        def exec_module(module: Any) -> None:
            real_exec(module)
            sys.meta_path[:] = [f for f in sys.meta_path if f is not self]
            from tests.gpu_sim import simtorch

            simtorch.install(module)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def install(kind: str) -> None:
    if kind not in KINDS:
        raise SystemExit(f"GPUPLAY_TEST_SIM={kind!r}: the simulation knows {', '.join(KINDS)}")
    if kind == "h100":  # NVML is NVIDIA's: an AMD or Intel machine has none to load
        from tests.gpu_sim import simnvml

        simnvml.install()
    if "torch" in sys.modules:
        from tests.gpu_sim import simtorch

        simtorch.install(sys.modules["torch"])
    else:
        sys.meta_path.insert(0, _PatchAfterImport())
