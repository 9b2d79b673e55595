"""The data pipeline: each step is one batch as a training or inference loop gets it.

A torch DataLoader decodes N JPEG images (made in memory at set-up with Pillow from the seeded
pixels: nothing is downloaded), normalises and stacks them; the step copies the batch to the
device and runs a small model's forward pass (average-pool to 16×16, then the inference
workload's MLP). The step times its own phases (waiting for the batch, the host→device copy,
the model) beside the step's total, so whether the loader or the model is the bottleneck is
seen, and what `workers` and `pin` change.

Workers are started once, when the run is set up (persistent_workers: not per step, not per
epoch), die with the loader when the run is over, and, on Linux, with the engine process
if it is killed (PR_SET_PDEATHSIG), so none outlives it.
"""

from __future__ import annotations

import io
import itertools
import math
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from gpuplay.core.process.lazynumpy import lazy_numpy
from gpuplay.core.workloads.base import EPS, Param, SetupReport, Workload
from gpuplay.core.workloads.inference import build_torch_model, mlp_forward, model_weights

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_numpy(globals())

POOL = 16  # the model sees each image average-pooled to 16×16×3 = 768 features
FEATURES = 3 * POOL * POOL
MEAN_RGB = (0.485, 0.456, 0.406)  # ImageNet's, as torchvision's Normalize is used (× 255)
STD_RGB = (0.229, 0.224, 0.225)
QUALITY = 90


def torchvision_refusal() -> str | None:
    """Why torchvision cannot decode here: not installed, or it does not load beside this torch
    (the package index's torchvision is built for a CUDA torch); None when it imports."""
    import importlib.util

    if importlib.util.find_spec("torchvision") is None:
        return "decode=torchvision needs torchvision (a build matching this torch), not installed: use decode=pillow"
    if "torch" not in sys.modules:
        return None  # decided in the engine, where torch is loaded; never imported in the front end
    try:
        import torchvision.io  # noqa: F401
    except Exception as exc:  # an operator library built for another torch fails in many ways
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        return (
            f"torchvision does not load beside this torch ({type(exc).__name__}: {first}): use decode=pillow"
        )
    return None


def jpeg_files(pixels: np.ndarray) -> list[bytes]:
    """Each image (H×W×3, values 0..255) encoded as a JPEG file's bytes, in memory."""
    from PIL import Image

    files = []
    for img in np.clip(np.rint(pixels), 0, 255).astype(np.uint8):
        buf = io.BytesIO()
        Image.fromarray(img, "RGB").save(buf, format="JPEG", quality=QUALITY)
        files.append(buf.getvalue())
    return files


def decode(data: bytes) -> np.ndarray:
    """One JPEG file's pixels, H×W×3 uint8 (Pillow's libjpeg: the same bytes, the same pixels)."""
    from PIL import Image

    with Image.open(io.BytesIO(data)) as im:
        return np.asarray(im.convert("RGB"))


def decode_torchvision(data: bytes) -> np.ndarray:
    """One JPEG file's pixels by torchvision.io.decode_jpeg (libjpeg-turbo on the CPU)."""
    import torch
    import torchvision

    raw = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    return torchvision.io.decode_jpeg(raw).permute(1, 2, 0).numpy()


class JpegImages:
    """A map-style dataset: image i decoded and normalised to float32 C×H×W (what collate stacks)."""

    def __init__(self, files: list[bytes], decoder: str = "pillow") -> None:
        self.files = files
        self.decode = decode_torchvision if decoder == "torchvision" else decode
        self.mean = (np.array(MEAN_RGB) * 255).astype(np.float32)
        self.inv_std = (1.0 / (np.array(STD_RGB) * 255)).astype(np.float32)

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int) -> np.ndarray:
        x = (self.decode(self.files[i]).astype(np.float32) - self.mean) * self.inv_std
        return np.ascontiguousarray(x.transpose(2, 0, 1))


class Forever:
    """A sampler: 0..n-1 again and again, so every batch is the same N images (and checkable)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self) -> Iterator[int]:
        return itertools.cycle(range(self.n))


def die_with_parent(_worker_id: int) -> None:
    """A worker's first act: ask Linux to kill it when the engine that started it dies."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1


class PhaseSplit:
    """Where each step's time went: waiting for the batch, the copy to the device, the model.

    On the CPU, perf_counter marks; on a GPU (cuda, xpu, mps), the device's own events on the
    current stream (torch.cuda / torch.xpu / torch.mps.Event), read after the timed loop, so the
    step never waits for the device to report them. The launches are asynchronous there: a
    perf_counter around them would time the launches, not the copy or the model."""

    def __init__(self, torch: Any, device: str) -> None:
        kind = device.split(":")[0]
        self.on_device = kind in ("cuda", "xpu", "mps")
        mod = getattr(torch, kind) if self.on_device else None
        self.event = (lambda: mod.Event(enable_timing=True)) if mod is not None else None
        self.torch = torch
        self.rows: list[tuple[float, Any, Any, Any]] = []

    def mark(self) -> Any:
        if self.event is None:
            return time.perf_counter()
        e = self.event()
        e.record()
        return e

    def record(self, waited: float, copy: Any, model: Any, end: Any) -> None:
        self.rows.append((waited, copy, model, end))

    def reset(self) -> None:
        self.rows = []

    def take(self) -> dict[str, list[float]]:
        if self.on_device and self.rows:
            self.rows[-1][3].synchronize()

        def span(a: Any, b: Any) -> float:
            return float(a.elapsed_time(b)) / 1e3 if self.on_device else float(b - a)

        out = {
            "data_wait_s": [w for w, _, _, _ in self.rows],
            "h2d_s": [span(c, m) for _, c, m, _ in self.rows],
            "model_s": [span(m, e) for _, _, m, e in self.rows],
        }
        self.rows = []
        return out


class Batches:
    """The loader's iterator and what the step needs beside it (prepared once per run)."""

    def __init__(self, loader: Any, split: PhaseSplit, workers: int) -> None:
        self.loader, self.split, self.workers = loader, split, workers
        self.iterator = iter(loader)  # starts the workers, once

    def worker_pids(self) -> tuple[int, ...]:
        """The workers' PIDs, for the noise check to count as the run's own CPU. torch keeps its
        worker processes (multiprocessing.Process) in the iterator's `_workers`, its one record
        of them; without it (another torch) none are named, and the test of this says so."""
        procs = getattr(self.iterator, "_workers", None) or []
        return tuple(int(p.pid) for p in procs if getattr(p, "pid", None) is not None)

    def __next__(self) -> Any:
        return next(self.iterator)


def loader_step(torch: Any, batches: Batches, model: Any, device: str, dtype: Any, pin: bool) -> Any:
    split = batches.split
    t0 = time.perf_counter()
    images = next(batches)  # waits for a batch: decoded here (workers=0) or by the workers
    waited = time.perf_counter() - t0
    copy = split.mark()
    # Moved as the loader made it (asynchronous only from pinned memory), then converted on the
    # device: `.to(device, dtype)` in one call converts on the host first, into pageable memory,
    # and the copy from there waits for the host whatever `pin` says.
    x = images.to(device=device, non_blocking=pin).to(dtype=dtype)
    start = split.mark()
    with torch.inference_mode():
        out = model(x)
    split.record(waited, copy, start, split.mark())
    return out


def build_model(torch: Any, w: Mapping[str, Any]) -> Any:
    pool = torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(POOL), torch.nn.Flatten())
    return torch.nn.Sequential(pool, build_torch_model(torch, "mlp", w))


def pooled(x: np.ndarray) -> np.ndarray:
    """N×3×H×W averaged over 16×16 blocks of (H/16)×(W/16) pixels, flattened: the model's input."""
    n, c, h, w = x.shape
    return x.reshape(n, c, POOL, h // POOL, POOL, w // POOL).mean(axis=(3, 5)).reshape(n, c * POOL * POOL)


class DataLoaderWorkload(Workload):
    name = "dataloader"
    title = "Data pipeline: JPEG decode → batch → device → model"
    category = "models"
    params = (
        Param("batch", int, 32, "images per batch (each step decodes them all)", minimum=1, maximum=1024),
        Param("size", int, 128, "image side in pixels (a multiple of 16)", minimum=16, maximum=1024),
        Param(
            "workers", int, 0, "DataLoader num_workers: 0 decodes in the step itself", minimum=0, maximum=64
        ),
        Param("pin", str, "off", "pinned host memory for the batch (pin_memory)", choices=("off", "on")),
        Param("decode", str, "pillow", "JPEG decoder", choices=("pillow", "torchvision")),
    )
    compile_safe = False  # next() on a loader is Python the compiler cannot trace
    graph_safe = False  # a fresh batch every step: nothing a CUDA graph could replay
    half_ok = True
    tol_scale = 10.0

    def resolve(self, given: Mapping[str, Any] | None = None) -> dict[str, Any]:
        p = super().resolve(given)
        if p["size"] % POOL:
            raise ValueError(f"size must be a multiple of {POOL}; got {p['size']}")
        return p

    def size_label(self, p: Mapping[str, Any]) -> str:
        return f"{p['batch']}×{p['size']}² JPEG, workers={p['workers']}, pin={p['pin']}"

    def inputs(self, p: Mapping[str, Any], rng: np.random.Generator) -> tuple[np.ndarray, ...]:
        # Smooth colour gradients with noise: a JPEG of pure noise is not what a loader decodes.
        n, s = p["batch"], p["size"]
        ramp = np.linspace(0.0, 1.0, s)
        base = rng.uniform(0, 255, (n, 1, 1, 3)) * ramp[None, :, None, None] * ramp[None, None, :, None]
        # whole numbers: exact in every dtype the runner converts them to (bfloat16 included)
        return (np.clip(np.rint(base + rng.normal(0, 20, (n, s, s, 3))), 0, 255),)

    def kernel_function(self, backend: str, p: Mapping[str, Any]) -> Callable[..., Any]:
        return loader_step

    def helper_functions(self, backend: str, p: Mapping[str, Any]) -> list[Callable[..., Any]]:
        return [JpegImages.__getitem__, decode, build_model]

    def kernel(self, backend: str, xp: Any, p: Mapping[str, Any]) -> Callable[..., Any]:
        return lambda batches, model, device, dtype: loader_step(
            xp, batches, model, device, dtype, p["pin"] == "on"
        )

    def prepare(
        self, backend: str, device: str, args: tuple[Any, ...], p: Mapping[str, Any]
    ) -> tuple[Any, ...]:
        import torch

        (pixels,) = args
        files = jpeg_files(pixels.detach().cpu().numpy())
        workers = p["workers"]
        loader: Any = torch.utils.data.DataLoader(
            JpegImages(files, p["decode"]),  # type: ignore[arg-type]
            batch_size=p["batch"],
            sampler=Forever(len(files)),
            num_workers=workers,
            pin_memory=p["pin"] == "on",
            persistent_workers=workers > 0,
            worker_init_fn=die_with_parent if workers else None,
        )
        w = model_weights("mlp", FEATURES, 1)
        model = build_model(torch, w).to(device=pixels.device, dtype=pixels.dtype).eval()
        return Batches(loader, PhaseSplit(torch, device), workers), model, pixels.device, pixels.dtype

    def setup_report(self, args: tuple[Any, ...]) -> SetupReport | None:
        batches = args[0] if args else None
        if not isinstance(batches, Batches):
            return None
        conditions = {"loader_workers": batches.workers, "loader_pin_memory": bool(batches.loader.pin_memory)}
        return SetupReport(conditions=conditions, split=batches.split, own_pids=batches.worker_pids())

    def needs_backend(self, p: Mapping[str, Any]) -> str | None:
        return "torch"

    def reference(self, p: Mapping[str, Any], inputs: tuple[np.ndarray, ...]) -> np.ndarray:
        images = np.stack([decode(f) for f in jpeg_files(inputs[0])]).astype(np.float64)
        x = ((images - np.array(MEAN_RGB) * 255) / (np.array(STD_RGB) * 255)).transpose(0, 3, 1, 2)
        w = model_weights("mlp", FEATURES, 1)
        return np.asarray(mlp_forward(np, w, pooled(x)))

    def flops(self, p: Mapping[str, Any]) -> float:
        # the model's (pooling and the MLP); decoding is not counted as FLOPs
        return p["batch"] * (3.0 * p["size"] ** 2 + 16.0 * FEATURES * FEATURES)

    def bytes_moved(self, p: Mapping[str, Any], itemsize: int) -> float:
        return p["batch"] * 3.0 * p["size"] ** 2 * itemsize + 8.0 * FEATURES * FEATURES * itemsize

    def footprint_elements(self, p: Mapping[str, Any]) -> float:
        return 4.0 * p["batch"] * 3 * p["size"] ** 2 + 8.0 * FEATURES * FEATURES

    def tolerance(self, compute_dtype: str, p: Mapping[str, Any]) -> float:
        # The loader normalises in float32, as loaders do, whatever dtype the model runs in: a float64
        # run differs from the float64 reference by float32's rounding. The pool sums size²/256
        # values, the MLP dots 768 and 3072.
        eps = max(EPS[compute_dtype], EPS["float32"])
        return self.tol_scale * eps * math.log2(max(2, p["size"] ** 2 * 4 * FEATURES))

    def unsupported(self, backend: str, device: str, dtype: str, p: Mapping[str, Any]) -> str | None:
        if backend != "torch":
            return "the data pipeline is torch's DataLoader: use backend torch"
        if p["decode"] == "torchvision":
            return torchvision_refusal()
        cores = os.cpu_count() or 1
        if p["workers"] > cores:
            return f"workers={p['workers']} is more than this machine's {cores} cores: choose 0 to {cores}"
        if p["pin"] == "on" and device == "cpu":
            return "pinned memory speeds copies to an accelerator; this run is on cpu: use pin=off"
        return None

    def notes(self, backend: str, device: str, dtype: str, p: Mapping[str, Any]) -> list[str]:
        return [
            "split: each step times its own wait for the batch, the copy to the device and the model "
            "(data_wait_s, h2d_s, model_s in the JSON)"
        ]


WORKLOADS: list[Callable[[], Workload]] = [DataLoaderWorkload]
