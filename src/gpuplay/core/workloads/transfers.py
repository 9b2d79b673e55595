"""The cost of moving data: host→device, device→host, and copies overlapped with compute.

`op`: h2d / d2h copy one buffer across the bus (GB/s is the figure); `serial`
and `overlap` run a chunked upload → GELU → download pipeline on one stream or
alternating two, so copies of one chunk overlap the compute of another; `copy`
copies memory to memory on the run's own device (host memory on the CPU, device
memory on a GPU): the reference bandwidth, and the one figure a CPU-only machine has.
`memory`: pageable or pinned (page-locked) host buffers; only pinned memory lets
a copy run asynchronously, so `non_blocking` and the overlap need it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from gpuplay.core.process.lazynumpy import lazy_numpy
from gpuplay.core.workloads.base import EPS, Param, Workload
from gpuplay.core.workloads.fused import gelu_ops

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_numpy(globals())

DEVICE_OPS = ("h2d", "d2h", "serial", "overlap")


def memory_copy(xp: Any, src: Any, dst: Any) -> Any:
    xp.copyto(dst, src)
    return dst


def memory_copy_torch(torch: Any, src: Any, dst: Any) -> Any:
    return dst.copy_(src)


def h2d_torch(torch: Any, host: Any, dev: Any, non_blocking: bool) -> Any:
    return dev.copy_(host, non_blocking=non_blocking)


def d2h_torch(torch: Any, dev: Any, host: Any, non_blocking: bool) -> Any:
    return host.copy_(dev, non_blocking=non_blocking)


def pipeline_torch(torch: Any, host_in: Any, host_out: Any, dev_in: Any, streams: Any, chunks: int) -> Any:
    # Chunk i goes up, through the GELU and back down on streams[i % len(streams)]:
    # with two streams one chunk's copies overlap the other's compute (pinned memory only).
    current = torch.cuda.current_stream(dev_in.device)
    step = math.ceil(host_in.shape[0] / chunks)
    for i, lo in enumerate(range(0, host_in.shape[0], step)):
        stream = streams[i % len(streams)]
        stream.wait_stream(current)
        with torch.cuda.stream(stream):
            d = dev_in[lo : lo + step]
            d.copy_(host_in[lo : lo + step], non_blocking=True)
            host_out[lo : lo + step].copy_(gelu_ops(torch, d), non_blocking=True)
    for stream in streams:
        current.wait_stream(stream)
    return host_out


def h2d_cupy(cupy: Any, host: Any, dev: Any, non_blocking: bool) -> Any:
    dev.set(host, stream=cupy.cuda.get_current_stream() if non_blocking else None)
    return dev


def d2h_cupy(cupy: Any, dev: Any, host: Any, non_blocking: bool) -> Any:
    return dev.get(out=host, stream=cupy.cuda.get_current_stream(), blocking=not non_blocking)


def pipeline_cupy(cupy: Any, host_in: Any, host_out: Any, dev_in: Any, streams: Any, chunks: int) -> Any:
    current = cupy.cuda.get_current_stream()
    step = math.ceil(host_in.shape[0] / chunks)
    for i, lo in enumerate(range(0, host_in.shape[0], step)):
        stream = streams[i % len(streams)]
        stream.wait_event(current.record())
        with stream:
            d = dev_in[lo : lo + step]
            d.set(host_in[lo : lo + step], stream=stream)
            gelu_ops(cupy, d).get(out=host_out[lo : lo + step], stream=stream, blocking=False)
    for stream in streams:
        current.wait_event(stream.record())
    return host_out


_KERNELS: dict[tuple[str, str], Callable[..., Any]] = {
    ("torch", "copy"): memory_copy_torch,
    ("numpy", "copy"): memory_copy,
    ("cupy", "copy"): memory_copy,
    ("torch", "h2d"): h2d_torch,
    ("torch", "d2h"): d2h_torch,
    ("torch", "serial"): pipeline_torch,
    ("torch", "overlap"): pipeline_torch,
    ("cupy", "h2d"): h2d_cupy,
    ("cupy", "d2h"): d2h_cupy,
    ("cupy", "serial"): pipeline_cupy,
    ("cupy", "overlap"): pipeline_cupy,
}


def _cuda_ordinal(device: str) -> int:
    return int(device.split(":")[1]) if ":" in device else 0


def _host_buffers(backend: str, x: Any, pinned: bool) -> tuple[Any, Any]:
    """A host copy of device array `x` and an empty host buffer like it, page-locked if asked."""
    if backend == "torch":
        import torch

        host = x.cpu()  # torch, not NumPy: bfloat16 has no NumPy dtype
        host = host.pin_memory() if pinned else host
        return host, torch.empty(host.shape, dtype=host.dtype, pin_memory=pinned)
    like = x.get()
    if not pinned:
        return like, np.empty_like(like)
    import cupyx

    host, empty = cupyx.empty_pinned(like.shape, like.dtype), cupyx.empty_pinned(like.shape, like.dtype)
    host[...] = like
    return host, empty


class Transfers(Workload):
    name = "transfers"
    title = "Transfers: host↔device bandwidth, pinned memory, stream overlap"
    category = "data movement"
    params = (
        Param("n", int, 64 * 2**20, "elements", minimum=1024, maximum=1 << 34, size=True),
        Param(
            "op",
            str,
            "h2d",
            "h2d, d2h, serial, overlap (2 streams), copy (memory copy on the device itself)",
            choices=("h2d", "d2h", "serial", "overlap", "copy"),
        ),
        Param("memory", str, "pinned", "host buffers: pageable or pinned", choices=("pageable", "pinned")),
        Param("non_blocking", str, "on", "asynchronous copies (need pinned memory)", choices=("off", "on")),
        Param("chunks", int, 8, "pipeline chunks (serial/overlap)", minimum=1, maximum=1024),
    )
    compile_safe = False
    graph_safe = False  # pageable copies synchronise with the host
    half_ok = True

    def size_label(self, p: Mapping[str, Any]) -> str:
        label = f"{p['n']:,} {p['op']}"
        return label if p["op"] == "copy" else f"{label} {p['memory']}"

    def inputs(self, p: Mapping[str, Any], rng: np.random.Generator) -> tuple[np.ndarray, ...]:
        return (rng.standard_normal(p["n"]),)

    def kernel_function(self, backend: str, p: Mapping[str, Any]) -> Callable[..., Any]:
        return _KERNELS[(backend, p["op"])]

    def helper_functions(self, backend: str, p: Mapping[str, Any]) -> list[Callable[..., Any]]:
        return [gelu_ops] if p["op"] in ("serial", "overlap") else []

    def kernel_kwargs(self, p: Mapping[str, Any]) -> dict[str, Any]:
        if p["op"] in ("h2d", "d2h"):
            return {"non_blocking": p["non_blocking"] == "on"}
        if p["op"] in ("serial", "overlap"):
            return {"chunks": p["chunks"]}
        return {}

    def prepare(
        self, backend: str, device: str, args: tuple[Any, ...], p: Mapping[str, Any]
    ) -> tuple[Any, ...]:
        (x,) = args
        op, pinned = p["op"], p["memory"] == "pinned"
        if op == "copy":
            return x, x.clone() if backend == "torch" else x.copy()
        host, empty_host = _host_buffers(backend, x, pinned)
        if op == "h2d":
            return host, x.clone() if backend == "torch" else x.copy()
        if op == "d2h":
            return x, empty_host
        # The streams belong to the run's device, whichever device is current: a stream of
        # cuda:0 would order nothing on cuda:N (and a copy to cuda:N queued on it is an error).
        streams: list[Any]
        if backend == "torch":
            import torch

            cuda = torch.cuda
            streams = (
                [cuda.current_stream(device)]
                if op == "serial"
                else [cuda.Stream(device=device) for _ in range(2)]
            )
            return host, empty_host, torch.empty_like(x), streams
        import cupy

        with cupy.cuda.Device(_cuda_ordinal(device)):
            streams = (
                [cupy.cuda.get_current_stream()]
                if op == "serial"
                else [cupy.cuda.Stream(non_blocking=True) for _ in range(2)]
            )
        return host, empty_host, cupy.empty_like(x), streams

    def reference(self, p: Mapping[str, Any], inputs: tuple[np.ndarray, ...]) -> np.ndarray:
        x = inputs[0]
        return np.asarray(gelu_ops(np, x)) if p["op"] in ("serial", "overlap") else x

    def flops(self, p: Mapping[str, Any]) -> float:
        return 9.0 * p["n"] if p["op"] in ("serial", "overlap") else 0.0

    def bytes_moved(self, p: Mapping[str, Any], itemsize: int) -> float:
        # Bytes across the bus for h2d/d2h; both ways for the pipeline; read + write for a host copy.
        return (1.0 if p["op"] in ("h2d", "d2h") else 2.0) * p["n"] * itemsize

    def footprint_elements(self, p: Mapping[str, Any]) -> float:
        return 4.0 * p["n"]

    def tolerance(self, compute_dtype: str, p: Mapping[str, Any]) -> float:
        return 8.0 * EPS[compute_dtype]

    def unsupported(self, backend: str, device: str, dtype: str, p: Mapping[str, Any]) -> str | None:
        op = p["op"]
        if op in DEVICE_OPS and not device.startswith("cuda"):
            return (
                f"op={op} moves data between host and GPU memory: on {device} there is no device memory "
                "to copy to (a CUDA device is needed); op=copy measures host memory copy bandwidth, the reference"
            )
        if backend == "cupy" and dtype == "bfloat16":
            return "CuPy has no bfloat16"
        return None

    def notes(self, backend: str, device: str, dtype: str, p: Mapping[str, Any]) -> list[str]:
        op = p["op"]
        if op == "copy":
            where = "host" if device == "cpu" else f"{device} device"
            return [f"{where} memory copy: GB/s counts the read and the write (as STREAM's copy does)"]
        notes = [f"host buffers: {p['memory']}"]
        if p["memory"] == "pageable" and (p["non_blocking"] == "on" or op == "overlap"):
            notes.append(
                "pageable memory: the driver stages each copy through a pinned buffer and the copy "
                "is synchronous, so non_blocking and stream overlap cannot take effect"
            )
        if op in ("serial", "overlap"):
            streams = "one stream" if op == "serial" else "two streams alternating"
            notes.append(f"pipeline: {p['chunks']} chunks, upload → GELU → download, {streams}")
        return notes


WORKLOADS: list[Callable[[], Workload]] = [Transfers]
