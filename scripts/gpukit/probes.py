"""GPU probes, each run in a child process (`python probes.py NAME ARGS`) so a hang, a crash or a
sticky CUDA error ends that probe only. Each prints one JSON object on its last stdout line.

cuda      torch / CuPy / NVML versions and devices, and gpuplay's CUDA→NVML mapping against UUIDs
rawkernel a CuPy RawKernel compiled by NVRTC and checked
compile   a torch.compile smoke test on cuda, checked
parity    gpuplay's median against triton's do_bench / cupyx's benchmark on the same step
overhead  an empty step through gpuplay's runner against do_bench of a no-op
gpm       GPM activity over a bf16 matmul (tensor cores busy) and an element-wise add (DRAM busy,
          tensor cores idle), each bracketed by gpuplay's RunTelemetry as a run's timed steps are
"""

from __future__ import annotations

import json
import statistics
import sys
import time
import traceback
from typing import Any


def _emit(obj: dict[str, Any]) -> None:
    print(json.dumps(obj, default=str))


def probe_cuda() -> dict[str, Any]:
    out: dict[str, Any] = {"python": sys.version.split()[0]}
    try:
        import torch

        out["torch"] = torch.__version__
        out["torch_cuda"] = torch.version.cuda
        out["cuda_available"] = torch.cuda.is_available()
        if out["cuda_available"]:
            out["cudnn"] = torch.backends.cudnn.version()
            devs = []
            for i in range(torch.cuda.device_count()):
                p = torch.cuda.get_device_properties(i)
                devs.append(
                    {
                        "index": i,
                        "name": p.name,
                        "uuid": str(getattr(p, "uuid", "")),
                        "capability": f"{p.major}.{p.minor}",
                        "sms": p.multi_processor_count,
                        "memory_gib": round(p.total_memory / 2**30, 1),
                        "l2_mib": round(getattr(p, "L2_cache_size", 0) / 2**20, 1),
                        "pci": f"{p.pci_domain_id:08x}:{p.pci_bus_id:02x}:{p.pci_device_id:02x}.0",
                    }
                )
            out["torch_devices"] = devs
    except Exception as exc:
        out["torch_error"] = f"{type(exc).__name__}: {exc}"
    try:
        import cupy

        out["cupy"] = cupy.__version__
        out["cupy_runtime"] = cupy.cuda.runtime.runtimeGetVersion()
        out["cuda_driver_api"] = cupy.cuda.runtime.driverGetVersion()
        out["cupy_devices"] = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        out["cupy_error"] = f"{type(exc).__name__}: {exc}"
    try:
        import pynvml as nv

        nv.nvmlInit()
        out["driver"] = _str(nv.nvmlSystemGetDriverVersion())
        out["nvml_cuda_driver"] = nv.nvmlSystemGetCudaDriverVersion_v2()
        gpus = []
        for i in range(nv.nvmlDeviceGetCount()):
            h = nv.nvmlDeviceGetHandleByIndex(i)
            gpus.append(
                {
                    "index": i,
                    "name": _str(nv.nvmlDeviceGetName(h)),
                    "uuid": _str(nv.nvmlDeviceGetUUID(h)),
                    "pci": _str(nv.nvmlDeviceGetPciInfo(h).busId),
                }
            )
        out["nvml_devices"] = gpus
    except Exception as exc:
        out["nvml_error"] = f"{type(exc).__name__}: {exc}"
    out["mapping"] = _mapping(out)
    return out


def _str(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


# Where gpuplay keeps its CUDA→NVML mapping; the first that exists is used (the name has moved).
MAPPING_CANDIDATES = (
    ("gpuplay.core.telemetry", "cuda_nvml_mapping"),  # rows for every cuda:N (by UUID)
    ("gpuplay.core.telemetry", "nvml_index_for"),
    ("gpuplay.core.telemetry", "cuda_to_nvml"),
    ("gpuplay.core.telemetry", "nvml_index"),
    ("gpuplay.core.devices_compare", "nvml_index"),
)


def _mapping(info: dict[str, Any]) -> dict[str, Any]:
    """gpuplay's nvml index for each cuda:N, checked against the device UUIDs (the ground truth)."""
    import importlib

    fn, where = None, None
    for module, name in MAPPING_CANDIDATES:
        try:
            fn = getattr(importlib.import_module(module), name)
            where = f"{module}.{name}"
            break
        except Exception:
            continue
    if fn is None:
        return {"status": "no mapping function found", "tried": [f"{m}.{n}" for m, n in MAPPING_CANDIDATES]}
    by_uuid = {_uuid_key(d["uuid"]): d["index"] for d in info.get("nvml_devices", [])}
    table: dict[str, Any] = {}
    if where and where.endswith("cuda_nvml_mapping"):
        try:
            table = {str(r.get("cuda")): r.get("nvml_index") for r in fn()}
        except Exception as exc:
            table = {"error": f"{type(exc).__name__}: {exc}"}
    rows, ok = [], True
    for d in info.get("torch_devices", []):
        if table:
            got = table.get(f"cuda:{d['index']}", table.get("error"))
        else:
            try:
                got = fn(f"cuda:{d['index']}")
            except Exception as exc:
                got = f"{type(exc).__name__}: {exc}"
        want = by_uuid.get(_uuid_key(d["uuid"]))
        ok = ok and got == want
        rows.append({"cuda": d["index"], "gpuplay_nvml": got, "nvml_by_uuid": want})
    return {
        "function": where,
        "rows": rows,
        "status": "ok" if ok and rows else ("no devices" if not rows else "MISMATCH"),
    }


def _uuid_key(text: Any) -> str:
    """A UUID in any spelling (GPU-…, MIG-…, with or without dashes) as 32 hex digits."""
    t = str(text).strip().lower()
    for prefix in ("gpu-", "mig-"):
        t = t.removeprefix(prefix)
    return t.replace("-", "")


RAW_SRC = r"""
extern "C" __global__ void axpy(const float a, const float* x, float* y, const int n) {
    int i = blockDim.x * blockIdx.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""


def probe_rawkernel() -> dict[str, Any]:
    import cupy as cp
    import numpy as np

    t0 = time.perf_counter()
    kern = cp.RawKernel(RAW_SRC, "axpy")
    kern.compile()
    compile_s = time.perf_counter() - t0
    n = 1 << 20
    x = cp.arange(n, dtype=cp.float32)
    y = cp.ones(n, dtype=cp.float32)
    kern(((n + 255) // 256,), (256,), (np.float32(2.0), x, y, np.int32(n)))
    ok = bool(cp.allclose(y, 2 * cp.arange(n, dtype=cp.float32) + 1))
    return {"ok": ok, "compile_s": round(compile_s, 3), "nvrtc": list(cp.cuda.nvrtc.getVersion())}


def probe_compile() -> dict[str, Any]:
    import torch

    def f(x: Any) -> Any:
        return torch.sin(x) * torch.exp(-x * x)

    x = torch.randn(1 << 20, device="cuda")
    t0 = time.perf_counter()
    g = torch.compile(f)
    y = g(x)
    torch.cuda.synchronize()
    cold = time.perf_counter() - t0
    ok = bool(torch.allclose(y, f(x), atol=1e-5))
    return {"ok": ok, "cold_compile_s": round(cold, 2), "triton": _version("triton")}


def _version(name: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


# Workloads whose step the parity check times both ways, and the goal class of each.
PARITY = {
    "elementwise": "bandwidth",
    "reductions": "bandwidth",
    "matmul": "compute",
    "batched_matmul": "compute",
    "fft1d": "fft",
    "fft2d": "fft",
    "heat": "other",
    "attention": "compute",
}


def _events_median(fn: Any, sync: Any, make_event: Any, reps: int, flush: Any = None) -> float:
    times = []
    for _ in range(reps):
        if flush is not None:
            flush()
        a, b = make_event(), make_event()
        a.record()
        fn()
        b.record()
        sync()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def probe_parity(
    scenarios: list[str], backend: str, dtype: str, preset: str, budget_s: float, device: str = "cuda:0"
) -> dict[str, Any]:
    """Per scenario: gpuplay's median (its runner, as `gpuplay run`), then the very step it built
    timed by the reference tool, warm and after an L2 flush, in this one process."""
    from gpuplay.core.runner import build_step, device_inputs, resolve
    from gpuplay.core.runner import run as gp_run
    from gpuplay.core.scenarios import load_scenarios
    from gpuplay.core.spec import Refusal, RunSpec

    sset = load_scenarios()
    rows = []
    t_end = time.monotonic() + budget_s
    for name in scenarios:
        if time.monotonic() > t_end:
            rows.append({"scenario": name, "status": "skipped: out of time"})
            continue
        row: dict[str, Any] = {"scenario": name, "backend": backend, "dtype": dtype, "preset": preset}
        try:
            sc = sset.get(name)
            spec = RunSpec.make(
                sc.workload,
                sc.preset_params(preset),
                scenario=name,
                backend=backend,
                device=device,
                dtype=dtype,
                budget_s=1.0,
            )
            res = gp_run(spec)
            row.update(status=res.status, message=res.message, gpuplay_ms=_ms(res.median))
            row["roof"] = res.roof_fields() if res.usable else None
            plan = resolve(spec)
            if res.status != "ok" or isinstance(plan, Refusal):
                rows.append(row)  # refused or failed: gpuplay's own message says why
                continue
            step = build_step(plan, device_inputs(plan))
            row.update(_reference_times(backend, device, step))
            for key in ("do_bench_ms", "warm_ms"):
                if row.get(key) and row.get("gpuplay_ms"):
                    row[key.replace("_ms", "_ratio")] = row["gpuplay_ms"] / row[key]
        except Exception as exc:
            row.update(
                status="error", message=f"{type(exc).__name__}: {exc}", trace=traceback.format_exc()[-1500:]
            )
        row["goal_class"] = PARITY.get(name, "other")
        rows.append(row)
    return {"rows": rows}


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1e3


def _reference_times(backend: str, device: str, step: Any) -> dict[str, Any]:
    if device == "cpu":  # how the kit is tested without a GPU: the same step, a plain clock
        times = []
        for _ in range(20):
            t0 = time.perf_counter()
            step()
            times.append((time.perf_counter() - t0) * 1e3)
        return {
            "reference": "perf_counter (cpu)",
            "do_bench_ms": statistics.median(times),
            "warm_ms": statistics.median(times),
        }
    if backend == "torch":
        import torch
        from triton.testing import do_bench

        step()
        torch.cuda.synchronize()
        flushed = do_bench(step, warmup=25, rep=200, return_mode="median")  # flushes L2 before each rep
        warm = _events_median(step, torch.cuda.synchronize, lambda: torch.cuda.Event(enable_timing=True), 50)
        return {"reference": "triton.testing.do_bench", "do_bench_ms": flushed, "warm_ms": warm}
    import cupy as cp
    from cupyx.profiler import benchmark

    l2 = cp.cuda.Device().attributes.get("L2CacheSize", 50 * 2**20)
    junk = cp.empty(4 * l2 // 4, dtype=cp.float32)  # 4× L2: an overwrite evicts what the step left
    bench = benchmark(step, n_repeat=50, n_warmup=5)
    warm = float(statistics.median(bench.gpu_times[0])) * 1e3
    flushed = _events_median(
        step, cp.cuda.Device().synchronize, lambda: cp.cuda.Event(), 30, flush=lambda: junk.fill(0)
    )
    return {"reference": "cupyx.profiler.benchmark", "do_bench_ms": flushed, "warm_ms": warm}


EMPTY_STEP = '''"""The empty step: what gpuplay's harness costs per step."""
TITLE = "empty step"

def inputs(rng, n=1):
    return (rng.random(n),)

def step(xp, x):
    return x
'''


def probe_overhead(code_file: str) -> dict[str, Any]:
    import torch
    from triton.testing import do_bench

    from gpuplay.core.runner import run as gp_run
    from gpuplay.core.spec import RunSpec
    from gpuplay.core.scenarios import scenario_for
    from gpuplay.core.workloads import get_workload

    sc = scenario_for(code_file)
    params = get_workload(sc.workload).resolve(sc.preset_params(None))
    spec = RunSpec.make(sc.workload, params, scenario=sc.name, backend="torch", device="cuda:0", budget_s=1.0)
    res = gp_run(spec)
    x = torch.zeros(1, device="cuda")
    noop = do_bench(lambda: x, warmup=25, rep=200, return_mode="median")
    gp = _ms(res.median)
    return {
        "status": res.status,
        "message": res.message,
        "gpuplay_empty_step_us": None if gp is None else gp * 1e3,
        "do_bench_noop_us": noop * 1e3,
        "overhead_us": None if gp is None else (gp - noop) * 1e3,
    }


def probe_gpm(device: str = "cuda:0", seconds: float = 2.0) -> dict[str, Any]:
    """What GPM said about two kernels whose hardware use is known: a bf16 matmul and an add."""
    import torch

    from gpuplay.core.telemetry import RunTelemetry

    def window(step: Any) -> dict[str, Any]:
        tele = RunTelemetry()
        token = tele.begin(device)
        t_end = time.monotonic() + seconds
        while time.monotonic() < t_end:
            for _ in range(20):
                step()
            torch.cuda.synchronize(device)
        gpu = tele.end(token).get("gpu") or {}
        return gpu.get("activity") or {"reason": "no GPU telemetry for this device"}

    n = 8192
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    x = torch.randn(2**28, device=device)
    y = torch.randn(2**28, device=device)
    return {"device": device, "matmul_bf16": window(lambda: a @ b), "add_fp32": window(lambda: x + y)}


def main(argv: list[str]) -> int:
    name, args = argv[0], argv[1:]
    try:
        if name == "cuda":
            out = probe_cuda()
        elif name == "rawkernel":
            out = probe_rawkernel()
        elif name == "compile":
            out = probe_compile()
        elif name == "parity":
            backend, dtype, preset, budget, device, *scenarios = args
            out = probe_parity(scenarios, backend, dtype, preset, float(budget), device)
        elif name == "overhead":
            out = probe_overhead(args[0])
        elif name == "gpm":
            out = probe_gpm(*args[:1])
        else:
            out = {"error": f"no probe {name!r}"}
    except Exception as exc:
        out = {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()[-2000:]}
    _emit(out)
    return 0 if "error" not in out else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
