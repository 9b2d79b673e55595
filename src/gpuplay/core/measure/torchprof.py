"""torch.profiler over a step: operators, kernels and overhead per step, as plain data.

Below the runner (it knows only a step callable and a device), so a workload can count its own
kernels (`kernel_count`) without importing the profiling front door, which builds steps the
runner's way.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

STEP_MARK = "gpuplay step"
# Profiler bookkeeping, not work the user's code asked for.
_BOOKKEEPING = ("ProfilerStep", STEP_MARK, "TorchDynamo Cache Lookup", "Pregraph bytecode")
_COMPILED_CALL = "## Call CompiledFxGraph"
TOP = 12


def _is_bookkeeping(name: str) -> bool:
    return name.startswith(_BOOKKEEPING)


def _device_us(e: Any) -> float:
    """GPU time of an operator (its kernels included), in µs; the API renamed cuda → device in 2.4."""
    for attr in ("device_time_total", "cuda_time_total"):
        v = getattr(e, attr, None)
        if v:
            return float(v)
    return 0.0


def _kernel_us(e: Any) -> float:
    """Duration of one device event (a kernel, a copy) on the GPU's own clock, in µs."""
    span = getattr(e, "time_range", None)
    return float(span.elapsed_us()) if span is not None else _device_us(e)


def _is_device_event(e: Any) -> bool:
    return str(getattr(e, "device_type", "")).endswith(("CUDA", "PrivateUse1"))


def _cpu_ops_in(e: Any) -> int:
    """Operator calls under a step marker: an aten op counts once (its internals are one call);
    a compiled graph counts as the library calls inside it, or one for its generated code."""
    name = e.name
    if name.startswith("aten::"):
        return 1
    children = list(e.cpu_children)
    if name.startswith(_COMPILED_CALL):
        return max(1, sum(_cpu_ops_in(c) for c in children))
    return sum(_cpu_ops_in(c) for c in children)


@contextlib.contextmanager
def _native_stderr_quiet() -> Iterator[None]:
    """Silence what the profiler's C++ side (Kineto) writes to file descriptor 2 at start and stop.

    Its 'USDT … profiler_start' lines are not ours to show; Python-level errors
    still raise as exceptions and are reported normally.
    """
    try:
        saved = os.dup(2)
    except OSError:
        yield
        return
    try:
        with open(os.devnull, "wb") as null:
            sys.stderr.flush()
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def profile_torch(step: Callable[[], Any], device: str, steps: int, trace: str | None) -> dict[str, Any]:
    """torch.profiler over `steps` calls of `step`: per-step wall and busy time, kernels (CUDA) or
    operator calls (CPU) per step, the top operators and kernels; a Chrome trace if asked."""
    import torch

    cuda = device.startswith("cuda")
    prof = _record(step, device, steps, cuda)
    events = list(prof.events())
    marks = [e for e in events if e.name.startswith(STEP_MARK) and not _is_device_event(e)]
    wall_ms = sum(float(e.cpu_time_total) for e in marks) / max(1, len(marks)) / 1e3
    kernels = _kernels(events, steps)
    per_step, busy_ms, counted, definition = (_gpu_busy if cuda else _cpu_busy)(events, marks, kernels, steps)
    out: dict[str, Any] = {
        "tool": f"torch.profiler (PyTorch {torch.__version__})",
        "activities": ["cpu", "cuda"] if cuda else ["cpu"],
        "wall_ms_per_step": wall_ms,
        "busy_ms_per_step": busy_ms,
        "kernels_per_step": per_step,
        "kernels_counted": counted,
        "overhead_share": max(0.0, 1.0 - busy_ms / wall_ms) if wall_ms > 0 else None,
        "overhead_definition": definition,
        "top_ops": _top_ops(prof, steps),
        "top_kernels": [
            {"name": k, **v} for k, v in sorted(kernels.items(), key=lambda kv: -kv[1]["device_ms"])[:TOP]
        ],
        "trace": None,
    }
    if trace:
        out.update(_export_trace(prof, Path(trace).expanduser()))
    return out


def _record(step: Callable[[], Any], device: str, steps: int, cuda: bool) -> Any:
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with _native_stderr_quiet(), profile(activities=activities) as prof:
        for i in range(steps):
            with record_function(f"{STEP_MARK} {i}"):
                step()
                if cuda:  # inside the mark: a step ends when the device is done
                    torch.cuda.synchronize(device)
    return prof


def _top_ops(prof: Any, steps: int) -> list[dict[str, Any]]:
    ops: dict[str, dict[str, float]] = {}
    for avg in prof.key_averages():
        if _is_bookkeeping(avg.key) or str(getattr(avg, "device_type", "")).endswith("CUDA"):
            continue
        ops[avg.key] = {
            "calls": avg.count / steps,
            "self_cpu_ms": avg.self_cpu_time_total / steps / 1e3,
            "cpu_total_ms": avg.cpu_time_total / steps / 1e3,
            "device_ms": _device_us(avg) / steps / 1e3,
        }
    return [{"name": k, **v} for k, v in sorted(ops.items(), key=lambda kv: -kv[1]["self_cpu_ms"])[:TOP]]


def _kernels(events: list[Any], steps: int) -> dict[str, dict[str, float]]:
    """Device events (kernels, copies) by name: calls and GPU time per step."""
    kernels: dict[str, dict[str, float]] = {}
    for e in events:
        if _is_device_event(e):
            k = kernels.setdefault(e.name, {"calls": 0.0, "device_ms": 0.0})
            k["calls"] += 1 / steps
            k["device_ms"] += _kernel_us(e) / steps / 1e3
    return kernels


Busy = tuple[float, float, str, str]  # per step: launches, busy ms; what was counted; the overhead's meaning


def _gpu_busy(events: list[Any], marks: list[Any], kernels: dict[str, dict[str, float]], steps: int) -> Busy:
    launches = [k for k in kernels if not k.startswith(("Memcpy", "Memset"))]
    return (
        sum(kernels[k]["calls"] for k in launches),
        sum(kernels[k]["device_ms"] for k in kernels),
        "CUDA kernels launched",
        "share of the step's wall time the GPU ran no kernel or copy (launch and host overhead)",
    )


def counted_words(n: float | None, words: str) -> str:
    """`kernels_counted`'s words for a count of `n`: "1 operator call", "2 operator calls"."""
    if n == 1:
        return words.replace("operator calls", "operator call", 1).replace(
            "kernels launched", "kernel launched", 1
        )
    return words


def _cpu_busy(events: list[Any], marks: list[Any], kernels: dict[str, dict[str, float]], steps: int) -> Busy:
    work = [e for e in events if e.name.startswith(("aten::", _COMPILED_CALL))]
    return (
        sum(_cpu_ops_in(c) for m in marks for c in m.cpu_children) / max(1, len(marks)),
        sum(float(e.self_cpu_time_total) for e in work) / steps / 1e3,
        "operator calls (a compiled graph's generated code counts as one)",
        "share of the step's wall time spent outside any operator (Python, dispatch, guards)",
    )


def _export_trace(prof: Any, path: Path) -> dict[str, str]:
    """Write the Chrome trace: {"trace": path} or {"trace_error": why}."""
    # Written beside its destination and renamed: an interrupted export never leaves half a
    # trace under the name the user gave (nor replaces a good one with it).
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.open("w").close()  # the exporter logs a failure instead of raising: check first
        with _native_stderr_quiet():
            prof.export_chrome_trace(str(tmp))
        if tmp.stat().st_size == 0:
            raise OSError("the profiler wrote nothing")
        os.replace(tmp, path)
        return {"trace": str(path)}
    except OSError as exc:
        return {"trace_error": f"cannot write the trace to {path}: {exc.strerror or exc}"}
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


def kernel_count(step: Callable[[], Any], device: str) -> tuple[float, str]:
    """Kernels (CUDA) or operator calls (CPU) one step runs, measured with torch.profiler."""
    data = profile_torch(step, device, 1, None)
    return float(data["kernels_per_step"]), str(data["kernels_counted"])
