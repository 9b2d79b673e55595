"""Inference runtimes: who runs a torch.nn model's forward pass (the `runtime` lever).

One module per runtime (eager, torchscript, onnxruntime, tensorrt), each with
`available(device) -> reason | None` (cheap: no import of the runtime's package, so the
front end's planner can ask it), `CAPTURABLE` (whether torch's CUDA graph capture records
its kernels) and `build(model, example, dtype, device, tf32) -> (callable, build_seconds,
conditions)`. `tf32` is the run's tf32 lever as torch's flags hold it during the run: ONNX
Runtime and TensorRT run their own kernels, which never read torch's flags and default to TF32,
so each is told. This registry adds what they share: the refusal words, the notes, and a cache of
what was built, per model, shapes, dtype, device, runtime and the settings it fixed at build
time (ONNX Runtime's threads, TF32), for the life of the engine process (an ONNX export takes
seconds; a second run of the same configuration reuses the session, and says so).
"""

from __future__ import annotations

import importlib
import importlib.util
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

RUNTIMES = ("eager", "torchscript", "onnxruntime", "tensorrt")
CACHE_SIZE = 4  # a model and its session each: a compare of four runtimes keeps all four


@dataclass(frozen=True)
class Built:
    """A runtime's forward pass, ready to call on the example's shapes."""

    run: Callable[[Any], Any]  # x → output tensor (on the run's device)
    build_s: float  # export + build, measured when it was built
    conditions: dict[str, Any] = field(default_factory=dict)  # what the runtime decided (providers, …)
    notes: tuple[str, ...] = ()
    cached: bool = False  # reused from an earlier run in this engine process


def module(name: str) -> ModuleType:
    if name not in RUNTIMES:
        raise ValueError(f"runtime must be one of {', '.join(RUNTIMES)}; got {name!r}")
    return importlib.import_module(f"gpuplay.core.runtimes.{name}")


def refusal(name: str, device: str, dtype: str) -> str | None:
    """Why `name` cannot run a model in `dtype` on `device` here (the package or device missing)."""
    return module(name).available(device) or module(name).dtype_refusal(dtype)


class Unavailable(RuntimeError):
    """The runtime cannot run in this engine (its package missing, or installed but broken): a
    refusal, with the reason and the install line, not a failed measurement."""


# The packages each runtime imports when it builds: installed is not enough, they must import.
PACKAGES = {"onnxruntime": ("onnxruntime", "onnx", "onnxscript"), "tensorrt": ("torch_tensorrt",)}
TENSORRT_INSTALL = "pip install torch-tensorrt (a CUDA build of torch to match; from a checkout: pip install -e '.[tensorrt]')"


def _install_line(name: str, device: str) -> str:
    if name == "onnxruntime":
        mod = module(name)
        return str(mod.EXTRA_GPU if device.startswith("cuda") else mod.EXTRA_CPU)
    return TENSORRT_INSTALL


def import_failure(name: str, device: str) -> str | None:
    """Why `name`'s packages, though installed, cannot be imported here ('' → None when they can):
    a missing shared library (libcudnn, libnvinfer), a wheel for another Python or CUDA. It
    imports them, so the engine alone asks, just before it builds; the front end's planner asks
    `available` (installed or not, no import)."""
    for package in PACKAGES.get(name, ()):
        try:
            importlib.import_module(package)
        except Exception as exc:  # ImportError, OSError from a loader, anything an import raises
            first = (str(exc).splitlines() or [""])[0][:200]
            return (
                f"{package} is installed but cannot be imported ({type(exc).__name__}: {first}); "
                f"reinstall it: {_install_line(name, device)}"
            )
    return None


def capture_refusal(name: str) -> str | None:
    """Why torch's CUDA graph capture cannot record `name`'s kernels, None if it can."""
    mod = module(name)
    return None if getattr(mod, "CAPTURABLE", True) else str(getattr(mod, "NOT_CAPTURABLE", name))


def torch_tf32(device: str) -> bool:
    """Whether the run allows TF32 for float32 matmuls, as its tf32 lever set torch's flags
    (TorchBackend.configured); False off CUDA, where the lever does not exist."""
    if not device.startswith("cuda"):
        return False
    import torch

    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision"):
        return bool(matmul.fp32_precision == "tf32")
    return bool(torch.get_float32_matmul_precision() != "highest")


def installed(package: str) -> bool:
    """Whether `package` can be imported, without importing it (the front end asks this)."""
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False


class _Cache:
    def __init__(self, size: int) -> None:
        self.size, self.data = size, OrderedDict[Hashable, Built]()
        self.lock = threading.Lock()

    def get(self, key: Hashable) -> Built | None:
        with self.lock:
            if key in self.data:
                self.data.move_to_end(key)
                return self.data[key]
        return None

    def put(self, key: Hashable, built: Built) -> None:
        with self.lock:
            self.data[key] = built
            while len(self.data) > self.size:
                self.data.popitem(last=False)

    def clear(self) -> None:
        with self.lock:
            self.data.clear()


_cache = _Cache(CACHE_SIZE)


def build(
    name: str, key: Hashable, make_model: Callable[[], Any], example: Any, dtype: str, device: str
) -> Built:
    """`name`'s forward pass of the model `make_model` builds, for `example`'s shapes; cached per
    `key` (the caller's model identity), shapes, dtype, device and runtime in this process."""
    mod = module(name)
    # and what the runtime fixed at build time from the run's settings (ONNX Runtime's threads, TF32)
    settings = mod.build_settings() if hasattr(mod, "build_settings") else None
    tf32 = torch_tf32(device)
    full_key = (name, key, tuple(example.shape), dtype, device, settings, tf32)
    hit = _cache.get(full_key)
    if hit is not None:
        return Built(hit.run, hit.build_s, dict(hit.conditions), hit.notes, cached=True)
    why = refusal(name, device, dtype) or import_failure(name, device)
    if why:  # the planner refused it already; an engine whose packages differ (or break) says so here
        raise Unavailable(why)
    run, build_s, conditions = mod.build(make_model(), example, dtype, device, tf32)
    built = Built(run, build_s, conditions, tuple(mod.notes(device, conditions)))
    _cache.put(full_key, built)
    return built


def clear_cache() -> None:
    _cache.clear()
