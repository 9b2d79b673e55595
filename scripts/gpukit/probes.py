"""GPU probes, each run in a child process (`python probes.py NAME ARGS`) so a hang, a crash or a
sticky CUDA error ends that probe only. Each prints one JSON object on its last stdout line.

cuda      torch / CuPy / NVML versions and devices, and gpuplay's CUDA→NVML mapping against UUIDs
rawkernel [DEVICE]         a CuPy RawKernel compiled by NVRTC and checked
compile [DEVICE]           a torch.compile smoke test (cuda:0 by default; cpu in the rehearsal)
parity BACKEND DTYPE PRESET BUDGET DEVICE SCENARIO…
                           gpuplay's median against triton's do_bench / cupyx's benchmark
overhead CODE [DEVICE]     an empty step through gpuplay's runner against do_bench of a no-op
gpm [DEVICE]               GPM activity over a bf16 matmul (tensor cores busy) and an element-wise
                           add (DRAM busy, tensor cores idle), each bracketed by gpuplay's
                           RunTelemetry as a run's timed steps are

The JSON has an `error` key only when the probe itself broke (a code error: its trace is kept).
A probe that cannot run here because an optional piece is absent (CuPy, triton, NVML, a CUDA
device) says so under `refused`, naming what is missing under `not_installed`: that is expected
on the CPU machine, and the rehearsal (scripts/gpu-verify rehearse) lists it as such.
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


class Refused(Exception):
    """The probe cannot run here: an optional piece is absent. Not a code error."""

    def __init__(self, message: str, missing: list[str] | None = None) -> None:
        super().__init__(message)
        self.missing = missing or []


# The optional modules a probe may need; anything else that fails to import is a code error.
OPTIONAL = {"cupy": "CuPy", "cupyx": "CuPy", "triton": "triton", "pynvml": "nvidia-ml-py (NVML)"}


def _need(module: str) -> Any:
    """Import `module`; its absence (and only its own, not a module it imports) is a refusal."""
    import importlib

    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        top = module.split(".")[0]
        if (exc.name or "").split(".")[0] != top or top not in OPTIONAL:
            raise
        raise Refused(f"{OPTIONAL[top]} is not installed", [OPTIONAL[top]]) from None


def _absent(exc: BaseException) -> str:
    """An optional library's failure as words: "not installed" for a missing module or driver."""
    if isinstance(exc, ModuleNotFoundError) and (exc.name or "").split(".")[0] in OPTIONAL:
        return f"{OPTIONAL[(exc.name or '').split('.')[0]]} is not installed"
    text = f"{type(exc).__name__}: {exc}"
    if "LibraryNotFound" in text or "libnvidia-ml" in text:
        return f"the NVIDIA driver's NVML library is not installed ({text})"
    return text


def _cuda_device(device: str) -> None:
    """Refuse a CUDA device where torch sees none (the CPU machine), before touching it."""
    import torch

    if device.startswith("cuda") and not torch.cuda.is_available():
        raise Refused(f"no CUDA device here (torch {torch.__version__})", ["CUDA"])


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
                        "pci": _pci(p),
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
        out["cupy_error"] = _absent(exc)
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
        out["nvml_error"] = _absent(exc)
    out["mapping"] = _mapping(out)
    out["not_installed"] = [
        name
        for name, absent in (
            ("CUDA", not out.get("cuda_available")),
            ("CuPy", "not installed" in out.get("cupy_error", "")),
            ("NVML (NVIDIA driver)", "not installed" in out.get("nvml_error", "")),
        )
        if absent
    ]
    return out


def _pci(p: Any) -> str | None:
    """The PCI id torch reports (not in its type stubs, and absent from older builds)."""
    ids = [getattr(p, k, None) for k in ("pci_domain_id", "pci_bus_id", "pci_device_id")]
    return None if None in ids else f"{ids[0]:08x}:{ids[1]:02x}:{ids[2]:02x}.0"


def _str(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


# Where gpuplay keeps its CUDA→NVML mapping; the first that exists is used (the name has moved).
MAPPING_CANDIDATES = (
    ("gpuplay.core.measure.telemetry", "cuda_nvml_mapping"),  # rows for every cuda:N (by UUID)
    ("gpuplay.core.measure.telemetry", "nvml_index_for"),
    ("gpuplay.core.measure.telemetry", "cuda_to_nvml"),
    ("gpuplay.core.measure.telemetry", "nvml_index"),
    ("gpuplay.core.reports.devices_compare", "nvml_index"),
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


def probe_rawkernel(device: str = "cuda:0") -> dict[str, Any]:
    if not device.startswith("cuda"):
        raise Refused(f"a CUDA RawKernel cannot run on {device}", ["CUDA"])
    cp = _need("cupy")
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


def probe_compile(device: str = "cuda:0") -> dict[str, Any]:
    import torch

    _cuda_device(device)
    if device.startswith("cuda"):
        _need("triton")  # inductor's GPU code generator

    def f(x: Any) -> Any:
        return torch.sin(x) * torch.exp(-x * x)

    x = torch.randn(1 << 20, device=device)
    t0 = time.perf_counter()
    g = torch.compile(f)
    y = g(x)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    cold = time.perf_counter() - t0
    ok = bool(torch.allclose(y, f(x), atol=1e-5))
    return {"ok": ok, "device": device, "cold_compile_s": round(cold, 2), "triton": _version("triton")}


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
    from gpuplay.core.catalogue.scenarios import load_scenarios
    from gpuplay.core.runner import build_step, device_inputs, plan_run
    from gpuplay.core.runner import run as gp_run
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
            plan = plan_run(spec)
            if res.status != "ok" or isinstance(plan, Refusal):
                rows.append(row)  # refused or failed: gpuplay's own message says why
                continue
            step = build_step(plan, device_inputs(plan))
            row.update(_reference_times(backend, device, step))
            for key in ("do_bench_ms", "warm_ms"):
                if row.get(key) and row.get("gpuplay_ms"):
                    row[key.replace("_ms", "_ratio")] = row["gpuplay_ms"] / row[key]
        except Refused as exc:  # the reference tool is absent here: gpuplay's figure stands alone
            row.update(status="refused", message=str(exc), not_installed=exc.missing)
        except Exception as exc:
            row.update(
                status="error", message=f"{type(exc).__name__}: {exc}", trace=traceback.format_exc()[-1500:]
            )
        row["goal_class"] = PARITY.get(name, "other")
        rows.append(row)
    return {"rows": rows}


def _cpu_median(fn: Any, reps: int) -> float:
    """Median milliseconds of `fn` on a plain clock (the CPU stand-in for do_bench)."""
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1e3


def _reference_times(backend: str, device: str, step: Any) -> dict[str, Any]:
    if device == "cpu":  # how the kit is rehearsed without a GPU: the same step, a plain clock
        median = _cpu_median(step, 20)
        return {"reference": "perf_counter (cpu)", "do_bench_ms": median, "warm_ms": median}
    _cuda_device(device)
    if backend == "torch":
        import torch

        do_bench = _need("triton.testing").do_bench

        step()
        torch.cuda.synchronize()
        flushed = do_bench(step, warmup=25, rep=200, return_mode="median")  # flushes L2 before each rep
        warm = _events_median(step, torch.cuda.synchronize, lambda: torch.cuda.Event(enable_timing=True), 50)
        return {"reference": "triton.testing.do_bench", "do_bench_ms": flushed, "warm_ms": warm}
    cp = _need("cupy")
    benchmark = _need("cupyx.profiler").benchmark

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


def probe_overhead(code_file: str, device: str = "cuda:0") -> dict[str, Any]:
    import torch

    from gpuplay.core.catalogue.scenarios import scenario_for
    from gpuplay.core.runner import run as gp_run
    from gpuplay.core.spec import RunSpec
    from gpuplay.core.workloads import get_workload

    _cuda_device(device)
    do_bench = _need("triton.testing").do_bench if device.startswith("cuda") else None
    sc = scenario_for(code_file)
    params = get_workload(sc.workload).resolve(sc.preset_params(None))
    spec = RunSpec.make(sc.workload, params, scenario=sc.name, backend="torch", device=device, budget_s=1.0)
    res = gp_run(spec)
    x = torch.zeros(1, device=device)
    if do_bench is not None:
        noop = do_bench(lambda: x, warmup=25, rep=200, return_mode="median")
    else:  # the rehearsal on the CPU: a no-op on a plain clock, the same arithmetic after it
        noop = _cpu_median(lambda: x, 200)
    gp = _ms(res.median)
    return {
        "status": res.status,
        "device": device,
        "message": res.message,
        "gpuplay_empty_step_us": None if gp is None else gp * 1e3,
        "do_bench_noop_us": noop * 1e3,
        "overhead_us": None if gp is None else (gp - noop) * 1e3,
    }


def probe_gpm(device: str = "cuda:0", seconds: float = 2.0) -> dict[str, Any]:
    """What GPM said about two kernels whose hardware use is known: a bf16 matmul and an add."""
    import torch

    from gpuplay.core.measure.telemetry import RunTelemetry

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


USAGE = {
    "cuda": "cuda",
    "rawkernel": "rawkernel [DEVICE]",
    "compile": "compile [DEVICE]",
    "parity": "parity BACKEND DTYPE PRESET BUDGET DEVICE SCENARIO…",
    "overhead": "overhead CODE_FILE [DEVICE]",
    "gpm": "gpm [DEVICE]",
}


def main(argv: list[str]) -> int:
    name, args = (argv[0], argv[1:]) if argv else ("", [])
    try:
        # Any probe (a new one too) asked for a CUDA device where there is none says so in words.
        if name != "parity" and f"probe_{name}" in globals():
            for arg in args:
                if arg.startswith("cuda"):
                    _cuda_device(arg)
        if name == "cuda" and not args:
            out = probe_cuda()
        elif name in ("rawkernel", "compile") and len(args) <= 1:
            out = (probe_rawkernel if name == "rawkernel" else probe_compile)(*args)
        elif name == "parity" and len(args) >= 6:
            backend, dtype, preset, budget, device, *scenarios = args
            out = probe_parity(scenarios, backend, dtype, preset, float(budget), device)
        elif name == "overhead" and 1 <= len(args) <= 2:
            out = probe_overhead(*args)
        elif name == "gpm" and len(args) <= 1:
            out = probe_gpm(*args)
        else:
            out = {"error": "usage: probes.py " + " | ".join(USAGE.values())}
    except Refused as exc:
        out = {"refused": str(exc), "not_installed": exc.missing}
    except Exception as exc:
        out = {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()[-2000:]}
    _emit(out)
    return 0 if "error" not in out else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
