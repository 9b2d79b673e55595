"""AMD GPUs: torch's ROCm build names them `cuda:N`; amdsmi gives their telemetry and energy.

PyTorch built for ROCm reports `torch.version.hip` and exposes the GPUs through the torch.cuda
API, so gpuplay must label them (name, gfx architecture, ROCm version) rather than call them
CUDA. amdsmi (`pip install amdsmi`; the extra `'.[amd]'` from a checkout) numbers GPUs in its own order, so each torch
device is matched to its amdsmi handle by PCI bus id (then UUID), never by index, as NVML's
are by UUID. Every query answers None on failure; without amdsmi, `status()` says why in one line.

Verified against a fake amdsmi only (tests/unit/test_rocm.py); no AMD GPU has run this yet.
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpuplay.core.hw.accelerator import Accelerator, number

INSTALL_HINT = "amdsmi is not installed: pip install amdsmi (from a checkout: pip install -e '.[amd]')"
# TF32 through hipBLASLt exists on CDNA3 (MI300, gfx94x) and later; MI200/MI100 have no TF32.
TF32_ARCHS = ("gfx94", "gfx95")


def rocm_torch() -> Any:
    """The loaded torch when it is a ROCm build, else None (never imports torch)."""
    torch = sys.modules.get("torch")
    version = getattr(torch, "version", None)
    return torch if getattr(version, "hip", None) else None


def arch_of(props: Any) -> str:
    """'gfx942' from torch's gcnArchName 'gfx942:sramecc+:xnack-'."""
    return str(getattr(props, "gcnArchName", "") or "").split(":")[0]


# ATen's allowTF32CuBLAS on ROCm answers False unless this is "1" (c10::utils::check_env counts
# "0" and "1" only), whatever torch's TF32 flag says: without it a --tf32 run on MI300 is plain
# float32. hipBLASLt reads it when its first handle is made, so it belongs in the environment the
# engine process starts with, before torch loads (engine_env).
HIPBLASLT_TF32 = "HIPBLASLT_ALLOW_TF32"


def engine_env(environ: Mapping[str, str]) -> dict[str, str]:
    """What an engine process's environment gains for AMD GPUs: HIPBLASLT_ALLOW_TF32=1 where it is
    unset (a value the user set is kept). It only permits TF32: a run uses it where its tf32 lever
    sets torch's flag, and tf32 off stays IEEE float32 (the flag off)."""
    return {} if HIPBLASLT_TF32 in environ else {HIPBLASLT_TF32: "1"}


def hipblaslt_tf32_refusal(environ: Mapping[str, str]) -> str:
    """'' where TF32 on an AMD GPU can be what it says (the variable 1, or unset: the engine sets
    it), else why a TF32 run would be plain float32."""
    value = environ.get(HIPBLASLT_TF32)
    if value is None or value == "1":
        return ""
    return (
        f"TF32 on AMD GPUs goes through hipBLASLt, which ATen allows only with {HIPBLASLT_TF32}=1; "
        f"this environment sets it to {value[:20]!r}, so float32 matmuls would stay IEEE"
    )


def hipblaslt_tf32_condition(environ: Mapping[str, str]) -> str:
    """The variable as the run's process has it, for the result's conditions."""
    value = environ.get(HIPBLASLT_TF32)
    if value == "1":
        return f"{HIPBLASLT_TF32}=1 in the engine's environment from its start (ATen's TF32 on ROCm needs it)"
    shown = "unset" if value is None else f"{value[:20]!r}"
    return f"{HIPBLASLT_TF32} {shown}: ATen keeps float32 matmuls IEEE on ROCm"


def tf32_refusal(arch: str, name: str) -> str:
    """'' where TF32 exists on this AMD GPU, else why not."""
    if arch.startswith(TF32_ARCHS):
        return ""
    return f"TF32 on AMD GPUs needs CDNA3 (MI300, gfx942) or newer; {name} is {arch or 'an older GPU'}"


def _pci(props: Any) -> str:
    """torch's PCI location of a device as amdsmi spells a BDF: '0000:c1:00.0'."""
    try:
        return f"{int(props.pci_domain_id):04x}:{int(props.pci_bus_id):02x}:{int(props.pci_device_id):02x}.0"
    except (AttributeError, TypeError, ValueError):
        return ""


def torch_devices(torch: Any) -> list[Accelerator]:
    """torch's ROCm devices as AMD accelerators (labels never say CUDA)."""
    out = []
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        out.append(
            Accelerator(
                f"cuda:{i}", "AMD", str(p.name), arch_of(p), f"ROCm {torch.version.hip}",
                int(getattr(p, "total_memory", 0)) or None, _pci(p) or str(getattr(p, "uuid", "")),
                {"capability": f"{p.major}.{p.minor}", "sms": getattr(p, "multi_processor_count", None)},
            )
        )  # fmt: skip
    return out


def hip_version(number: int) -> str:
    """HIP's runtime version as ROCm spells it: HIP_VERSION is major·10⁷ + minor·10⁵ + patch
    (60241133 → 6.2.41133), which CuPy's runtimeGetVersion returns on its ROCm build."""
    return f"{number // 10_000_000}.{number // 100_000 % 100}.{number % 100_000}"


def cupy_devices(cupy: Any) -> list[Accelerator]:
    """CuPy's ROCm build (`cupy.cuda.runtime.is_hip`) names AMD GPUs `cuda:N` as torch's does:
    labelled from hipDeviceProp (name, gcnArchName) and the HIP runtime, never "CUDA"."""
    rt = cupy.cuda.runtime
    try:
        runtime = f"ROCm {hip_version(int(rt.runtimeGetVersion()))}"
    except Exception:
        runtime = "ROCm"
    out = []
    for i in range(rt.getDeviceCount()):
        p = rt.getDeviceProperties(i)

        def text(key: str, p: Any = p) -> str:
            v = p.get(key, b"")
            return (v.decode(errors="replace") if isinstance(v, bytes) else str(v)).strip("\x00 ")

        arch = text("gcnArchName").split(":")[0]
        total = number(p.get("totalGlobalMem"))
        out.append(
            Accelerator(
                f"cuda:{i}", "AMD", text("name") or "AMD GPU", arch, runtime, int(total) if total else None
            )
        )
    return out


# What CuPy's ROCm build lacks that a gpuplay workload would call (CuPy's installation guide,
# "Limitations" for ROCm): said before the run, not as a HIP error from inside it.
CUPY_ROCM_SPARSE = (
    "CuPy's ROCm build does not support sparse matrices (cupyx.scipy.sparse) yet: "
    "CSR products run on NVIDIA GPUs only"
)


# -- amdsmi ---------------------------------------------------------------------------------
class _AMDSMI:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tried = False
        self._error: str | None = None
        self.module: Any = None

    def ensure(self) -> str | None:
        """Initialise once; the reason amdsmi is unusable, or None."""
        with self._lock:
            if not self._tried:
                self._tried = True
                try:
                    import amdsmi

                    amdsmi.amdsmi_init()
                    self.module = amdsmi
                except ImportError:
                    self._error = INSTALL_HINT
                except Exception as exc:  # AmdSmiLibraryException: no driver, no permission…
                    self._error = f"amdsmi cannot start: {type(exc).__name__}: {exc}"
            return self._error

    def call(self, name: str, *args: Any) -> Any:
        if self.ensure() is not None:
            return None
        try:
            return getattr(self.module, name)(*args)
        except Exception:
            return None


smi = _AMDSMI()


def status() -> str:
    """'' when amdsmi works, else one line saying why not."""
    return smi.ensure() or ""


def installed() -> bool:
    """Whether amdsmi can be imported (asked by every telemetry snapshot: the search is cached)."""
    return "amdsmi" in sys.modules or _found()


@functools.cache
def _found() -> bool:
    import importlib.util

    return importlib.util.find_spec("amdsmi") is not None


@dataclass(frozen=True)
class AmdGpu:
    index: int  # amdsmi's order
    handle: Any
    bdf: str
    uuid: str
    name: str


def gpus() -> list[AmdGpu]:
    """Every GPU amdsmi sees, in its order; [] without amdsmi."""
    if smi.ensure() is not None:
        return []
    out = []
    for i, h in enumerate(smi.call("amdsmi_get_processor_handles") or []):
        asic = smi.call("amdsmi_get_gpu_asic_info", h) or {}
        out.append(
            AmdGpu(i, h, str(smi.call("amdsmi_get_gpu_device_bdf", h) or "").lower(),
                   str(smi.call("amdsmi_get_gpu_device_uuid", h) or ""), str(asic.get("market_name") or "AMD GPU"))
        )  # fmt: skip
    return out


def gpu_for_torch_device(device: str) -> AmdGpu | None:
    """The amdsmi GPU behind torch's `cuda:N` on ROCm: by PCI bus id, else UUID; None if no match."""
    torch = rocm_torch()
    if torch is None:
        return None
    index = int(device.split(":")[1]) if ":" in device else 0
    try:
        props = torch.cuda.get_device_properties(index)
    except Exception:
        return None
    bdf, uuid = _pci(props), _uuid_key(getattr(props, "uuid", ""))
    candidates = gpus()
    for g in candidates:
        if bdf and g.bdf == bdf:
            return g
    for g in candidates:
        if uuid and _uuid_key(g.uuid) == uuid:
            return g
    return None


def _uuid_key(text: Any) -> str:
    t = str(text or "").strip().lower()
    for prefix in ("gpu-", "mig-"):
        t = t.removeprefix(prefix)
    return t.replace("-", "")


def _clock(h: Any, kind: str) -> tuple[int | None, int | None]:
    types = getattr(smi.module, "AmdSmiClkType", None)
    info = smi.call("amdsmi_get_clock_info", h, getattr(types, kind)) if types is not None else None
    if not isinstance(info, dict):
        return None, None
    cur = number(info.get("clk", info.get("cur_clk")))
    top = number(info.get("max_clk"))
    return (int(cur) if cur is not None else None), (int(top) if top is not None else None)


def _temperature(h: Any) -> float | None:
    types, metric = (
        getattr(smi.module, "AmdSmiTemperatureType", None),
        getattr(smi.module, "AmdSmiTemperatureMetric", None),
    )
    if types is None or metric is None:
        return None
    for sensor in ("EDGE", "HOTSPOT", "JUNCTION"):  # MI300 has no edge sensor
        t = number(smi.call("amdsmi_get_temp_metric", h, getattr(types, sensor, None), metric.CURRENT))
        if t is not None:
            return t / 1000.0 if t > 1000 else t  # older libraries answer millidegrees
    return None


def _watts(value: Any) -> float | None:
    w = number(value)
    if w is None:
        return None
    return w / 1e6 if w > 100_000 else w  # some versions answer microwatts


def query(g: AmdGpu) -> dict[str, Any]:
    """amdsmi's figures of one GPU as GpuSnapshot's fields (None where the GPU gives none)."""
    h = g.handle
    act = smi.call("amdsmi_get_gpu_activity", h) or {}
    vram = smi.call("amdsmi_get_gpu_vram_usage", h) or {}
    power = smi.call("amdsmi_get_power_info", h) or {}
    used, total = number(vram.get("vram_used")), number(vram.get("vram_total"))
    sm, sm_max = _clock(h, "GFX")
    mem, mem_max = _clock(h, "MEM")
    watts = next((w for k in ("socket_power", "current_socket_power", "average_socket_power")
                  if (w := _watts(power.get(k))) is not None), None)  # fmt: skip
    return {
        "name": g.name,
        "util_gpu": number(act.get("gfx_activity")),
        "util_mem": number(act.get("umc_activity")),
        "mem_used": int(used * 2**20) if used is not None else None,  # amdsmi answers MB
        "mem_total": int(total * 2**20) if total is not None else None,
        "power_w": watts,
        "power_limit_w": _watts(power.get("power_limit")),
        "temp_c": _temperature(h),
        "sm_clock_mhz": sm,
        "sm_clock_max_mhz": sm_max,
        "mem_clock_mhz": mem,
        "mem_clock_max_mhz": mem_max,
        "energy_mj": _energy_mj(h),
    }


def _energy_j(h: Any) -> float | None:
    """The accumulator in joules, at its full resolution (~15 µJ: mJ would round a short window)."""
    e = smi.call("amdsmi_get_energy_count", h)
    if not isinstance(e, dict):
        return None
    ticks = number(e.get("energy_accumulator", e.get("power")))  # older amdsmi names it "power"
    resolution_uj = number(e.get("counter_resolution"))
    if ticks is None or resolution_uj is None:
        return None
    return ticks * resolution_uj * 1e-6


def _energy_mj(h: Any) -> int | None:
    j = _energy_j(h)
    return int(j * 1000) if j is not None else None


class AmdEnergyCounter:
    """amdsmi's energy accumulator as core.energy's EnergyCounter (whole board, ~1 ms ticks)."""

    scope = "the whole AMD GPU (every process on it)"
    source = "amdsmi energy counter"
    update_s = 0.001

    def __init__(self, gpu: AmdGpu) -> None:
        self.gpu = gpu

    def read_j(self) -> float | None:
        return _energy_j(self.gpu.handle)


def energy_counter(device: str) -> tuple[AmdEnergyCounter | None, str]:
    """The energy counter of torch's `cuda:N` on ROCm, or why there is none ('n/a (…)')."""
    reason = status()
    if reason:
        return None, f"n/a ({reason})"
    g = gpu_for_torch_device(device)
    if g is None:
        return None, f"n/a (no amdsmi GPU has {device}'s PCI bus id or UUID)"
    counter = AmdEnergyCounter(g)
    if counter.read_j() is None:
        return None, "n/a (this AMD GPU has no energy counter)"
    return counter, ""


# -- a run's timed window ------------------------------------------------------------------
WINDOW_INTERVAL_S = 0.1
NO_GPM = "GPM n/a: GPM counters are NVIDIA's (NVML); amdsmi has no tensor-core activity here"


class RunWindow:
    """amdsmi's figures over a run's timed steps: sampled every 0.1 s in a thread (amdsmi's
    calls are quick and release the GIL), plus one reading at each end."""

    def __init__(self, device: str, interval: float = WINDOW_INTERVAL_S) -> None:
        self.device = device
        self.note = status()
        self.gpu = gpu_for_torch_device(device) if not self.note else None
        if self.gpu is None and not self.note:
            self.note = (
                f"cannot tell which amdsmi GPU {device} is (no PCI bus id or UUID match): no GPU telemetry"
            )
        self.samples: list[dict[str, Any]] = [query(self.gpu)] if self.gpu is not None else []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if self.gpu is not None:
            self._thread = threading.Thread(
                target=self._loop, args=(interval,), daemon=True, name="gpuplay-amdsmi"
            )
            self._thread.start()

    def _loop(self, interval: float) -> None:
        while not self._stop.wait(interval) and self.gpu is not None:
            self.samples.append(query(self.gpu))

    def end(self, seconds: float) -> dict[str, Any] | None:
        """The run's GPU figures (None without a matched GPU: `note` says why)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(1.0)
        if self.gpu is None:
            return None
        snaps = [*self.samples, query(self.gpu)]

        def mean(key: str) -> float | None:
            vals = [s[key] for s in snaps if s.get(key) is not None]
            return sum(vals) / len(vals) if vals else None

        mems = [s["mem_used"] for s in snaps if s.get("mem_used") is not None]
        out: dict[str, Any] = {
            "vendor": "AMD", "index": self.gpu.index, "cuda_index": int(self.device.split(":")[1]) if ":" in self.device else 0,
            "uuid": self.gpu.uuid, "pci": self.gpu.bdf, "name": self.gpu.name,
            "util_mean_percent": mean("util_gpu"), "power_mean_w": mean("power_w"),
            "mem_peak_bytes": max(mems) if mems else None, "samples": len(snaps), "samples_during": len(snaps) - 2,
            "activity": {"reason": NO_GPM},
        }  # fmt: skip
        e0, e1 = snaps[0].get("energy_mj"), snaps[-1].get("energy_mj")
        if e0 is not None and e1 is not None and e1 >= e0:
            out["energy_j"], out["energy_source"] = (e1 - e0) / 1000.0, "amdsmi energy counter"
        elif out["power_mean_w"] is not None:
            out["energy_j"] = out["power_mean_w"] * seconds
            out["energy_source"] = "mean power × time (no energy counter on this GPU)"
        return out
