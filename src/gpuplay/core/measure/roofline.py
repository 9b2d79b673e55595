"""The roofline: each device's measured peaks, cached per device, and where a result sits under them.

Peaks are measured here, never taken from a spec sheet:
- memory bandwidth the STREAM way: copy and triad over arrays at least 4x the last-level
  cache, best of N, counting the bytes each implementation really reads and writes;
- compute: a square matmul per dtype (float64, float32, TF32 on CUDA, bfloat16, float16),
  grown until one call is long enough to time, then best of N, so a dtype the CPU only
  emulates (half precision: 100-500x slower) is recorded at the size it could afford.
The budget is the whole calibration's (per device), spread over its probes: each probe gets
what is left over the probes left, and a matmul stops growing before a size that would not fit.

They are cached as JSON in the state folder, one file per device, and read by every result
(`roof_for`). Nothing here calibrates implicitly: a device without a cache is "not calibrated".
This module imports neither NumPy nor torch at import time (the UI reads the cache).
"""

from __future__ import annotations

import datetime as _dt
import functools
import json
import math
import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gpuplay.core.hw.system import cpu_count, cpu_name, package_version
from gpuplay.core.storage.config import state_dir
from gpuplay.core.storage.safeload import FileReadError, json_loads, read_text_file
from gpuplay.core.storage.safetext import visible

SCHEMA = 1
NOT_CALIBRATED = "not calibrated: run gpuplay calibrate"
STALE = "stale"  # roof.status of a result above its stored roof: the roof was measured low
CPU_DTYPES = ("float64", "float32", "bfloat16", "float16")
CUDA_DTYPES = ("float64", "float32", "tf32", "bfloat16", "float16")
# Seconds of measuring per device when --budget is not given: all of its probes together.
DEFAULT_BUDGET_S = 5.0


# -- the roof math (plain numbers) ---------------------------------------------------
@dataclass(frozen=True)
class RoofPoint:
    intensity: float  # FLOP per byte moved
    achieved_gflops: float | None  # None when the workload counts no FLOPs
    achieved_gbs: float
    bound: str  # "memory" or "compute"
    roof_gflops: float | None  # the attainable rate at this intensity (None: memory roof only)
    ridge: float | None  # FLOP/byte where the memory slope meets the compute roof
    fraction: float  # achieved / attainable, on the bound's own axis


def ridge_point(peak_gflops: float, bandwidth_gbs: float) -> float:
    """The arithmetic intensity (FLOP/byte) above which the compute roof is the limit."""
    return peak_gflops / bandwidth_gbs


def place(
    flops: float, nbytes: float, seconds: float, peak_gflops: float | None, bandwidth_gbs: float
) -> RoofPoint | None:
    """Where one measurement sits; None when it moves no bytes or took no time."""
    if nbytes <= 0 or seconds <= 0 or bandwidth_gbs <= 0:
        return None
    intensity = flops / nbytes
    gbs = nbytes / seconds / 1e9
    if flops <= 0 or not peak_gflops:
        # No FLOPs (a copy) or no compute peak for this dtype: only the memory roof applies.
        return RoofPoint(intensity, None, gbs, "memory", None, None, gbs / bandwidth_gbs)
    gflops = flops / seconds / 1e9
    ridge = ridge_point(peak_gflops, bandwidth_gbs)
    roof = min(peak_gflops, intensity * bandwidth_gbs)
    bound = "memory" if intensity < ridge else "compute"
    return RoofPoint(intensity, gflops, gbs, bound, roof, ridge, gflops / roof)


# -- measured peaks -----------------------------------------------------------------
@dataclass
class Measurement:
    kind: str  # "memory" or "compute"
    name: str  # copy, triad (memory); the dtype (compute)
    library: str  # numpy | torch
    value: float  # GB/s or GFLOP/s
    size: str  # what was measured: "3 x 256 MiB arrays", "n=2048"
    best_s: float
    repeats: int
    counted: str = ""  # what the figure counts (bytes read+written, 2n^3 FLOPs)

    @property
    def unit(self) -> str:
        return "GB/s" if self.kind == "memory" else "GFLOP/s"


@dataclass
class DevicePeaks:
    device: str  # cpu, cuda:0, ...
    name: str
    fingerprint: dict[str, Any]
    measured_at: str
    calibration_s: float
    measurements: list[Measurement] = field(default_factory=list)
    noise: dict[str, Any] = field(default_factory=dict)  # what else ran during calibration
    schema: int = SCHEMA
    partial: bool = False  # an interrupted calibration: only the probes that finished
    # The peaks this calibration could not measure, and why (never stored as a roof): each
    # {"kind", "name", "library", "reason": "budget" | "busy", "why": words}.
    refused: list[dict[str, str]] = field(default_factory=list)

    def bandwidth(self) -> Measurement | None:
        """The memory roof: the best STREAM kernel any library reached."""
        mem = [m for m in self.measurements if m.kind == "memory"]
        return max(mem, key=lambda m: m.value) if mem else None

    def compute(self, dtype: str) -> Measurement | None:
        """The compute roof for a dtype: the best any library reached."""
        got = [m for m in self.measurements if m.kind == "compute" and m.name == dtype]
        return max(got, key=lambda m: m.value) if got else None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DevicePeaks:
        """Peaks from a cache file, every field checked: a value that is not a positive finite
        number would otherwise fail later, in roof_for, after a run had measured (ValueError)."""
        return cls(
            device=str(d["device"]),
            name=str(d["name"]),
            fingerprint=dict(d["fingerprint"]),
            measured_at=str(d["measured_at"]),
            calibration_s=float(d["calibration_s"]),
            measurements=[_measurement(m) for m in d["measurements"]],
            noise=dict(d.get("noise") or {}),
            schema=int(d.get("schema", 0)),
            partial=bool(d.get("partial", False)),
            refused=[{k: str(v) for k, v in dict(r).items()} for r in d.get("refused") or []],
        )

    def refusal(self, kind: str, name: str) -> dict[str, str] | None:
        """Why this calibration stored no `kind` peak `name` (memory: any STREAM kernel), if it refused one."""
        return next(
            (
                r
                for r in self.refused
                if r.get("kind") == kind and (kind == "memory" or r.get("name") == name)
            ),
            None,
        )


def _measurement(m: Any) -> Measurement:
    got = Measurement(**m)
    if got.kind not in ("memory", "compute"):
        raise ValueError(f"measurement kind {got.kind!r}")
    for name in ("value", "best_s"):
        v = getattr(got, name)
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v <= 0:
            raise ValueError(f"measurement {name} {v!r} is not a positive number")
    if not all(isinstance(getattr(got, k), str) for k in ("name", "library", "size", "counted")):
        raise ValueError("measurement name, library, size and counted must be text")
    return got


# -- the cache, one file per device --------------------------------------------------
def cache_dir() -> Path:
    return state_dir() / "roofline"


def normalize_device(device: str) -> str:
    return {"cuda": "cuda:0", "xpu": "xpu:0"}.get(device, device)


def cache_path(device: str) -> Path:
    slug = re.sub(r"[^A-Za-z0-9_.-]", "_", normalize_device(device))
    return cache_dir() / f"{slug}.json"


# The libraries whose installed versions a fingerprint holds (cli/output.warm_for_results reads them early).
LIBRARIES = ("numpy", "torch")


def fingerprint(device: str, name: str) -> dict[str, Any]:
    """What must not change for cached peaks to stay valid: the device and the libraries.

    A GPU's peaks belong to one board under one driver, CUDA runtime, power limit, clock and MIG
    profile: the name alone would hand an H100's peaks to another H100 (or the same one after a
    power cap or a MIG split). Values this process cannot read are None and are not compared.
    """
    fp: dict[str, Any] = {"name": name, **{lib: package_version(lib) for lib in LIBRARIES}}
    if normalize_device(device) == "cpu":
        fp["cores"] = cpu_count()
    elif normalize_device(device).startswith("cuda"):
        fp.update(gpu_fingerprint(normalize_device(device)))
    elif normalize_device(device) == "mps" or device.startswith("xpu"):
        from gpuplay.core.hw.roofs import identity

        fp.update(identity(normalize_device(device)))
    return fp


def gpu_fingerprint(device: str) -> dict[str, Any]:
    """The board behind `device` as NVML sees it, matched by UUID (telemetry's mapping)."""
    from gpuplay.core.measure import telemetry

    nvml = telemetry.nvml
    driver = nvml.call("nvmlSystemGetDriverVersion")  # None without NVML: then not compared
    fp: dict[str, Any] = {
        "cuda_runtime": _cuda_runtime(),
        "driver": driver.decode() if isinstance(driver, bytes) else driver,
    }
    # Which board (or MIG instance): its UUID as telemetry spells it (32 hex digits), whether
    # torch, CuPy, CUDA_VISIBLE_DEVICES or NVML told it, so every process writes it alike.
    uuids = telemetry.cuda_device_uuids() or []
    index = int(device.split(":")[1]) if ":" in device else 0
    fp["uuid"] = uuids[index] if index < len(uuids) else None
    target = telemetry.nvml_handle_for_cuda_device(device)
    if target is None:
        return fp
    limit = nvml.call("nvmlDeviceGetEnforcedPowerLimit", target.handle)
    clock = nvml.call(
        "nvmlDeviceGetApplicationsClock", target.handle, getattr(nvml.module, "NVML_CLOCK_SM", 1)
    )
    profile = nvml.call("nvmlDeviceGetName", target.mig_handle) if target.mig else "off"
    fp.update(
        power_limit_w=round(limit / 1000.0) if isinstance(limit, int | float) else None,
        sm_app_clock_mhz=clock if isinstance(clock, int) else None,
        mig_profile=profile.decode() if isinstance(profile, bytes) else profile,
    )
    return fp


def _cuda_runtime() -> str | None:
    """The CUDA runtime torch was built with: torch.version.cuda where torch is loaded, else the
    wheel's local version tag (2.13.0+cu130 → 13.0), so the front end never imports torch."""
    import sys

    torch = sys.modules.get("torch")
    version = getattr(getattr(torch, "version", None), "cuda", None)
    if isinstance(version, str):
        return version
    m = re.search(r"\+cu(\d+)(\d)$", package_version("torch") or "")
    return f"{m.group(1)}.{m.group(2)}" if m else None


def save_peaks(peaks: DevicePeaks) -> Path:
    from gpuplay.core.storage.atomicfile import write_atomic

    path = cache_path(peaks.device)
    write_atomic(path, json.dumps(peaks.to_dict(), indent=2) + "\n")
    _cached.cache_clear()
    return path


def invalidate(device: str) -> bool:
    """Forget one device's peaks; True when there was a cache to remove."""
    _cached.cache_clear()
    try:
        cache_path(device).unlink()
        return True
    except FileNotFoundError:
        return False


@dataclass
class Lookup:
    peaks: DevicePeaks | None
    problem: str  # '' when peaks is usable


def load_peaks(device: str, name: str | None = None) -> Lookup:
    """The cached peaks of `device`, or why there are none usable (never an exception).

    With `name` (the device name a result reports), peaks measured on another device
    or with other library versions are refused as stale.
    """
    path = cache_path(device)
    try:
        mtime = path.stat().st_mtime_ns
    except OSError:
        return Lookup(None, NOT_CALIBRATED)
    return _cached(str(path), mtime, normalize_device(device), name)


def unreadable(path: str | Path, exc: BaseException) -> str:
    why = exc.strerror if isinstance(exc, FileReadError) else type(exc).__name__  # a FIFO, too big, not UTF-8
    return f"calibration cache {path} unreadable ({why}): re-run gpuplay calibrate"


@functools.lru_cache(maxsize=32)
def _cached(path: str, _mtime: int, device: str, name: str | None) -> Lookup:
    try:
        peaks = DevicePeaks.from_dict(json_loads(read_text_file(path)))
    except (
        OSError,
        UnicodeDecodeError,
        ValueError,
        KeyError,
        TypeError,
        AttributeError,
        RecursionError,
    ) as exc:
        return Lookup(None, unreadable(path, exc))
    if peaks.schema != SCHEMA or peaks.device != device:
        return Lookup(None, f"roofline cache {path} is from another gpuplay version: run gpuplay calibrate")
    if name is not None:
        stale = stale_keys(peaks.fingerprint, fingerprint(device, name))
        if stale:
            return Lookup(None, f"peaks of {device} are stale ({stale}): run gpuplay calibrate")
    return Lookup(peaks, "")


def stale_keys(cached: dict[str, Any], now: dict[str, Any]) -> str:
    """What changed since the peaks were measured, in words ('' when nothing did). A value this
    process cannot read now (None) is not compared; one the cache lacks (an older cache) is."""
    changed = [k for k, v in now.items() if v is not None and cached.get(k) != v]
    return ", ".join(f"{k} {safe_value(cached.get(k))} → {safe_value(now[k])}" for k in changed)


def safe_value(v: Any) -> str:
    return visible(str(v), one_line=True)[:80]


def summary(device: str) -> dict[str, Any]:
    """One device's cached roofs in brief (for `gpuplay info`), or why there are none."""
    lookup = load_peaks(device)
    if lookup.peaks is None:
        return {"device": normalize_device(device), "calibrated": False, "problem": lookup.problem}
    p = lookup.peaks
    bw = p.bandwidth()
    dtypes = (*CUDA_DTYPES, *(d for d in CPU_DTYPES if d not in CUDA_DTYPES))
    return {
        "device": p.device,
        "calibrated": True,
        "measured_at": p.measured_at,
        "bandwidth_gbs": bw.value if bw else None,
        "gflops": {d: c.value for d in dtypes if (c := p.compute(d)) is not None},
        # what changed since (another board, driver, power limit, MIG profile...): '' when nothing
        "stale": stale_keys(p.fingerprint, fingerprint(p.device, p.name)),
    }


def peak_dtype(device: str, compute_dtype: str, tf32: bool) -> str:
    """Which compute roof applies: TF32 is float32 matmul on tensor cores."""
    if tf32 and compute_dtype == "float32" and normalize_device(device).startswith("cuda"):
        return "tf32"
    return compute_dtype


def roof_for(
    *,
    device: str,
    device_name: str | None,
    compute_dtype: str,
    tf32: bool,
    flops: float,
    nbytes: float,
    seconds: float | None,
) -> dict[str, Any]:
    """The `roof` fields of one result: intensity, bound, fraction of roof, and the peaks used.

    Never raises: a calibration cache is a file anyone can edit, and the measurement it would
    annotate must not be lost to it (the run reports "not calibrated" and why)."""
    try:
        return _roof_for(device=device, device_name=device_name, compute_dtype=compute_dtype, tf32=tf32,
                         flops=flops, nbytes=nbytes, seconds=seconds)  # fmt: skip
    except Exception as exc:  # a cache that loaded but does not add up
        return {"status": "not calibrated", "note": unreadable(cache_path(device), exc)}


def _roof_for(
    *,
    device: str,
    device_name: str | None,
    compute_dtype: str,
    tf32: bool,
    flops: float,
    nbytes: float,
    seconds: float | None,
) -> dict[str, Any]:
    out: dict[str, Any] = {"intensity_flop_per_byte": flops / nbytes if nbytes > 0 else None}
    if not seconds or nbytes <= 0:
        out.update(status="n/a", note="no timed steps or no byte count: cannot place on the roofline")
        return out
    lookup = load_peaks(device, device_name)
    if lookup.peaks is None:
        out.update(status="not calibrated", note=lookup.problem)
        return out
    peaks = lookup.peaks
    bw = peaks.bandwidth()
    if bw is None:
        why = _refused_words(peaks.refusal("memory", "copy"))
        out.update(
            status="not calibrated", note=f"no memory bandwidth measured for {device}{why}: {NOT_CALIBRATED}"
        )
        return out
    dtype = peak_dtype(device, compute_dtype, tf32)
    comp = peaks.compute(dtype)
    refused = peaks.refusal("compute", dtype) if comp is None else None
    point = place(flops, nbytes, seconds, comp.value if comp else None, bw.value)
    if point is None:
        out.update(status="n/a", note="cannot place on the roofline")
        return out
    out.update(
        status="ok",
        bound=point.bound,
        fraction=point.fraction,
        ridge_flop_per_byte=point.ridge,
        roof_gflops=point.roof_gflops,
        achieved_gflops=point.achieved_gflops,
        achieved_gbs=point.achieved_gbs,
        peak_gflops=comp.value if comp else None,
        peak_dtype=dtype,
        peak_source=f"{comp.library} matmul {comp.size}" if comp else None,
        bandwidth_gbs=bw.value,
        bandwidth_source=f"{bw.library} {bw.name}",
        calibrated_at=peaks.measured_at,
        note=""
        if comp
        else f"no {dtype} compute peak measured on {device}{_refused_words(refused)}: memory roof only",
    )
    return checked(out)


REFUSED_WORDS = {"budget": "the calibration's budget was too short", "busy": "the machine was busy"}


def _refused_words(refused: dict[str, str] | None) -> str:
    """' (not stored: the machine was busy)' for a peak the calibration refused, else ''."""
    if not refused:
        return ""
    return f" (not stored: {REFUSED_WORDS.get(refused.get('reason', ''), safe_value(refused.get('reason')))})"


def checked(roof: dict[str, Any]) -> dict[str, Any]:
    """`roof` as it may be shown: a result above its roof (fraction over 1) is not a fraction of
    it. A peak is a maximum, so such a roof was measured low (a busy machine, a short calibration,
    a size too small to reach it): its status is then "stale", its fraction is withdrawn (kept as
    `above_roof`, the ratio to the stored roof) and its note says to calibrate again. A result
    file written before this rule is read through it too (`RunResult.roof_fields`)."""
    fraction = roof.get("fraction")
    if roof.get("status") != "ok" or not isinstance(fraction, int | float) or not fraction > 1.0:
        return roof
    out = dict(roof)
    out.update(
        status=STALE,
        fraction=None,
        above_roof=float(fraction),
        note=(
            f"stale roof: this result reaches {100 * fraction:.0f}% of the {roof.get('bound', '')} roof "
            f"stored at {safe_value(roof.get('calibrated_at'))}, and a roof is a maximum: that "
            "calibration read low (a busy machine or too short a budget); rerun gpuplay calibrate "
            "on a quiet machine"
        ),
    )
    return out


def roof_text(roof: dict[str, Any] | None) -> str:
    """One short phrase: '34% of compute roof' or why there is none."""
    if not roof:
        return NOT_CALIBRATED
    if roof.get("status") != "ok":
        return str(roof.get("note") or roof.get("status"))
    return f"{_pct(roof['fraction'])} of {roof['bound']} roof"


def roof_cell(roof: dict[str, Any] | None) -> str:
    """The narrow table cell: '34% C', '71% M', 'stale' (a result above its roof), or '—'."""
    if roof and roof.get("status") == STALE:
        return "stale"
    if not roof or roof.get("status") != "ok":
        return "—"
    return f"{_pct(roof['fraction'])} {roof['bound'][0].upper()}"


def _pct(fraction: float) -> str:
    return "<1%" if 0 < fraction < 0.005 else f"{100 * fraction:.0f}%"


# -- measuring ------------------------------------------------------------------------
Timed = Callable[[], float]  # runs one operation, returns its seconds


class CalibrationStopped(Exception):
    """A stop was asked for between two probes (SIGINT, SIGTERM): the finished ones are kept."""


# A matmul's rate has reached its peak when doubling n raised it by no more than this.
PLATEAU = 1.1
# One call shorter than this is timer and dispatch, not the peak (a CPU's perf_counter call costs
# ~0.1 µs, a GPU event pair a few µs): a flat rate of calls this short is not a plateau.
MIN_CALL_S = {"cpu": 2e-3, "gpu": 5e-4}
MIN_TRIALS = 3  # a STREAM peak is the best of at least this many timed passes


@dataclass
class Probes:
    """One calibration's probes as they finish: a stop asked for is honoured before the next one
    starts, and what finished is kept (`keep_partial`), so an interrupted calibration loses only
    the probe in progress. A probe that could not measure its peak (too short a share of the
    budget, a machine busy during it) is refused, with the reason, and never stored as a roof."""

    stop: threading.Event | None = None
    on_probe: Callable[[Measurement], None] | None = None
    on_refused: Callable[[dict[str, str]], None] | None = None
    done: list[Measurement] = field(default_factory=list)
    refused: list[dict[str, str]] = field(default_factory=list)
    name: str = ""  # the device's name, once the calibration has read it
    started: float = field(default_factory=time.perf_counter)
    budget_s: float = math.inf  # the whole calibration's seconds, spread over its probes
    planned: int = 1
    watch_host: bool = True  # refuse a probe during which other processes used the CPU

    def plan(self, budget_s: float, planned: int) -> None:
        """The budget counts from here: what was loaded before (torch) is start-up, said apart."""
        self.budget_s, self.planned, self.started = budget_s, planned, time.perf_counter()

    @property
    def finished(self) -> int:
        return len(self.done) + len(self.refused)

    def share(self) -> float:
        """Seconds the next probe may take: what is left of the budget over the probes left, so
        a probe that finished early leaves its time to the others and one that ran over takes it
        from them (a user reads --budget as how long they wait, not as a figure per probe)."""
        left = self.budget_s - (time.perf_counter() - self.started)
        return max(left, 0.0) / max(self.planned - self.finished, 1)

    def check(self) -> None:
        if self.stop is not None and self.stop.is_set():
            raise CalibrationStopped

    def add(self, m: Measurement) -> None:
        self.done.append(m)
        if self.on_probe is not None:
            self.on_probe(m)

    def refuse(self, kind: str, name: str, library: str, reason: str, why: str) -> None:
        self.refused.append({"kind": kind, "name": name, "library": library, "reason": reason, "why": why})
        if self.on_refused is not None:
            self.on_refused(self.refused[-1])

    def measure(self, kind: str, name: str, library: str, probe: Callable[[], Measurement | str]) -> None:
        """Run one probe: its peak is kept when it was measured (the probe returns why not, in
        words, when its share of the budget could not reach it) on a machine quiet during it."""
        self.check()
        from gpuplay.core.measure import noise

        mark = noise.host_mark(listing=True) if self.watch_host else None
        got = probe()
        if isinstance(got, str):
            self.refuse(kind, name, library, "budget", got)
            return
        busy = noise.host_warnings(noise.host_noise(mark, noise.host_mark(mark)), during="the probe")
        if busy:
            self.refuse(kind, name, library, "busy",
                        f"machine busy: {'; '.join(busy)}; its {got.value:,.1f} {got.unit} would read low: "
                        "calibrate on a quiet machine")  # fmt: skip
            return
        self.add(got)


def planned_probes(device: str, libraries: Iterable[str] = ("numpy", "torch")) -> int:
    """How many probes a calibration of `device` runs (STREAM copy and triad, a matmul per dtype)."""
    if normalize_device(device) != "cpu":
        return 2 + len(CUDA_DTYPES)
    libs = [lib for lib in libraries if lib != "torch" or package_version("torch")]
    return ("numpy" in libs) * (2 + 3) + ("torch" in libs) * (2 + len(CPU_DTYPES))


def keep_partial(device: str, probes: Probes) -> Path | None:
    """Cache the probes that finished before a stop (no peak measured: nothing written). Marked
    partial: a roof the cache lacks reads "not calibrated" for that dtype, as for a device never measured."""
    if not probes.done:
        return None
    device = normalize_device(device)
    name = probes.name or (cpu_name() if device == "cpu" else device)
    peaks = DevicePeaks(device, name, fingerprint(device, name), _now(), time.perf_counter() - probes.started,
                        list(probes.done), partial=True, refused=list(probes.refused))  # fmt: skip
    return save_peaks(peaks)


def _best(
    run_once: Timed, budget_s: float, max_repeats: int = 10, min_repeats: int = MIN_TRIALS
) -> tuple[float, int] | str:
    """Best of N (STREAM reports the best of its repetitions), N bounded by time: a repetition
    starts only while one more fits in `budget_s`, past the first `min_repeats`. Why not, in
    words, when `budget_s` cannot hold `min_repeats` passes (then no more than one runs)."""
    t_start = time.perf_counter()
    t_end = t_start + budget_s
    run_once()  # first touch, page faults, lazy init: not part of the figure
    best = run_once()
    need = time.perf_counter() - t_start + (min_repeats - 1) * best
    if need > budget_s:
        return (
            f"budget too short: one pass takes {best * 1e3:.3g} ms and the best of {min_repeats} (after a "
            f"first touch) needs ~{need:.2g} s, this probe's share was {budget_s:.2g} s; give calibrate a "
            "longer --budget"
        )
    n = 1
    while n < max_repeats:
        t0 = time.perf_counter()
        best = min(best, run_once())
        n += 1
        if n >= min_repeats and time.perf_counter() + (time.perf_counter() - t0) > t_end:
            break
    return best, n


def _matmul_peak(
    make: Callable[[int], Timed],
    n0: int,
    n_max: int,
    long_enough_s: float,
    budget_s: float,
    min_call_s: float = MIN_CALL_S["cpu"],
) -> tuple[float, int, float, int] | str:
    """The best 2n³/t over growing sizes, then best of N at the last: (GFLOP/s, n, seconds, calls),
    all within `budget_s` but for the first size (the least a figure needs); or why the peak was
    not reached, in words (a rate still rising when the budget ran out is no peak).

    Sizes double until one call takes `long_enough_s` and the rate stopped rising, or the next
    size would not fit in what is left of the budget (it costs ~8x this one's calls and ~4x its
    inputs). The peak is reached when the rate stopped rising (within PLATEAU) at calls long
    enough to time, or at the largest size allowed. A dtype the CPU emulates runs no faster at
    larger sizes and stops small; a slow call whose rate still rose (a busy moment, a thread pool
    waking) does not stop it.
    """
    t_end = time.perf_counter() + budget_s
    best = (0.0, n0, math.inf)
    n, calls, previous, call_s = n0, 0, 0.0, 0.0
    while True:
        t0 = time.perf_counter()
        op = make(n)
        made_s = time.perf_counter() - t0
        op()  # the first call at a size pays one-off costs (thread pools, packing)
        t1 = time.perf_counter()
        t = min(op(), op())  # two: one busy moment must not end the growth
        call_s = (time.perf_counter() - t1) / 2  # wall per call (a GPU timer counts only the kernel)
        calls += 2
        rate = 2 * n**3 / t / 1e9
        if rate > best[0]:
            best = (rate, n, t)
        flat = previous > 0 and rate <= PLATEAU * previous
        if n * 2 > n_max:
            break  # the largest size allowed: its rate is the peak there is
        if t >= long_enough_s and flat:
            break
        if time.perf_counter() + 4 * made_s + 3 * 8 * call_s > t_end:
            why = _not_a_peak(n, rate, previous, t, min_call_s)
            if why:
                return why
            break
        previous = max(previous, rate)
        n *= 2
    for _ in range(20):  # the growth already timed this size twice
        if time.perf_counter() + call_s > t_end:
            break
        t = op()
        calls += 1
        if 2 * n**3 / t / 1e9 > best[0]:
            best = (2 * n**3 / t / 1e9, n, t)
    return best[0], best[1], best[2], calls


def _not_a_peak(n: int, rate: float, previous: float, t: float, min_call_s: float) -> str:
    """Why the last size's rate is no peak, when the budget ends the growth there ('' when it is)."""
    if not (previous > 0 and rate <= PLATEAU * previous):
        return (
            f"budget too short: the rate was still rising at n={n} ({rate:.3g} GFLOP/s"
            + (f", up from {previous:.3g}" if previous else ", the first size")
            + "); give calibrate a longer --budget"
        )
    if t < min_call_s:
        return (
            f"budget too short: a call at n={n} takes {t * 1e3:.2g} ms, too short to be a peak; "
            "give calibrate a longer --budget"
        )
    return ""


def last_level_cache_bytes() -> int:
    sizes = []
    for f in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = f.read_text().strip().upper()
        m = re.fullmatch(r"(\d+)([KMG]?)", text)
        if m:
            sizes.append(int(m.group(1)) * {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}[m.group(2)])
    return max(sizes, default=32 * 2**20)


def _stream_elements(itemsize: int, available: int, llc: int) -> int:
    """STREAM's rule: each array at least 4x the largest cache; three arrays must fit easily."""
    want = max(4 * llc, 64 * 2**20)
    return int(min(want, available // 8) // itemsize)


def _clock(fn: Callable[[], Any]) -> Timed:
    def once() -> float:
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0

    return once


def _stream_probe(
    probes: Probes, library: str, name: str, timed: Timed, bytes_per_pass: float, size: str, counted: str,
    **best_kw: Any,
) -> None:  # fmt: skip
    """One STREAM kernel, best of N passes within its share, as a memory probe."""

    def probe() -> Measurement | str:
        got = _best(timed, probes.share(), **best_kw)
        if isinstance(got, str):
            return got
        best, reps = got
        return Measurement("memory", name, library, bytes_per_pass / best / 1e9, size, best, reps, counted)

    probes.measure("memory", name, library, probe)


def _cpu_stream(libs: Sequence[str], probes: Probes) -> None:
    """STREAM copy and triad on the host; the arrays are freed when this returns."""
    import numpy as np
    import psutil

    n = _stream_elements(8, psutil.virtual_memory().available, last_level_cache_bytes())
    size = f"3 x {n * 8 / 2**20:.0f} MiB float64 arrays"
    a, b, c = np.ones(n), np.full(n, 2.0), np.full(n, 0.5)

    def stream(library: str, name: str, op: Callable[[], Any], arrays: int, counted: str) -> None:
        _stream_probe(probes, library, name, _clock(op), arrays * n * 8, size, counted)

    if "numpy" in libs:
        stream("numpy", "copy", lambda: np.copyto(b, a), 2, "1 read + 1 write per element")
        # NumPy has no fused triad: a = b + s*c runs as two passes (5 array traffics), counted as such.
        stream(
            "numpy",
            "triad",
            lambda: (np.multiply(c, 3.0, out=a), np.add(a, b, out=a)),
            5,
            "two passes: 3 reads + 2 writes per element",
        )
    if "torch" in libs:
        import torch

        ta, tb, tc = (torch.from_numpy(x) for x in (a, b, c))  # same memory, torch's threads
        stream("torch", "copy", lambda: tb.copy_(ta), 2, "1 read + 1 write per element")
        stream(
            "torch", "triad", lambda: torch.add(tb, tc, alpha=3.0, out=ta), 3, "2 reads + 1 write per element"
        )


def _matmul_probe(
    probes: Probes, library: str, dtype: str, make: Callable[[int], Timed], n0: int, n_max: int,
    long_enough_s: float | None, min_call_s: float,
) -> None:  # fmt: skip
    """One dtype's matmul peak as a compute probe (`long_enough_s` None: an eighth of its share)."""

    def probe() -> Measurement | str:
        share = probes.share()
        got = _matmul_peak(make, n0, n_max, share / 8 if long_enough_s is None else long_enough_s, share,
                           min_call_s)  # fmt: skip
        if isinstance(got, str):
            return got
        rate, n_used, best, calls = got
        return Measurement("compute", dtype, library, rate, f"n={n_used}", best, calls, "2n³ FLOP")

    probes.measure("compute", dtype, library, probe)


def measure_cpu(
    budget_s: float = DEFAULT_BUDGET_S,
    libraries: Iterable[str] = ("numpy", "torch"),
    probes: Probes | None = None,
) -> DevicePeaks:
    """The CPU's peaks, in about `budget_s` seconds of measuring in all. Each probe refused
    (too short a share, a busy machine) is said in `refused`, not stored as a peak."""
    import numpy as np

    t_start = time.perf_counter()
    probes = probes or Probes()
    libs = [lib for lib in libraries if lib != "torch" or package_version("torch")]  # torch is optional here
    probes.plan(budget_s, planned_probes("cpu", libs))
    _cpu_stream(libs, probes)
    torch: Any = None
    if "torch" in libs:
        import torch

    def matmul(library: str, dtype: str, make: Callable[[int], Timed]) -> None:
        _matmul_probe(probes, library, dtype, make, 64, 4096, None, MIN_CALL_S["cpu"])

    if "numpy" in libs:
        rng = np.random.default_rng(0)
        for dtype in ("float64", "float32", "float16"):  # NumPy has no bfloat16

            def make_np(k: int, dt: str = dtype) -> Timed:
                x = rng.standard_normal((k, k)).astype(dt)
                y = rng.standard_normal((k, k)).astype(dt)
                return _clock(lambda: x @ y)

            matmul("numpy", dtype, make_np)
    if torch is not None:
        for dtype in CPU_DTYPES:

            def make_t(k: int, dt: str = dtype) -> Timed:
                x = torch.randn(k, k, dtype=getattr(torch, dt))
                y = torch.randn(k, k, dtype=getattr(torch, dt))
                return _clock(lambda: torch.matmul(x, y))

            matmul("torch", dtype, make_t)
    name = cpu_name()
    fp = fingerprint("cpu", name)
    fp["threads"] = {"torch": torch.get_num_threads() if torch is not None else None}
    return DevicePeaks("cpu", name, fp, _now(), time.perf_counter() - t_start, list(probes.done),
                       refused=list(probes.refused))  # fmt: skip


def _gpu_stream(torch: Any, api: Any, probes: Probes) -> None:
    """STREAM copy and triad on one GPU; the arrays are freed when this returns."""
    free = api.free_bytes()
    n = int(min(max(4 * api.cache_bytes(), 1 << 30), free // 8) // 4)  # float32 elements per array
    size = f"3 x {n * 4 / 2**20:.0f} MiB float32 arrays"
    dev = torch.device(api.device)
    a = torch.ones(n, device=dev)
    b = torch.full((n,), 2.0, device=dev)
    c = torch.full((n,), 0.5, device=dev)
    for name, op, arrays, counted in (
        ("copy", lambda: b.copy_(a), 2, "1 read + 1 write per element"),
        ("triad", lambda: torch.add(b, c, alpha=3.0, out=a), 3, "2 reads + 1 write per element"),
    ):
        _stream_probe(probes, "torch", name, api.timer(op), arrays * n * 4, size, counted,
                      max_repeats=20, min_repeats=5)  # fmt: skip


def measure_gpu(device: str, budget_s: float = DEFAULT_BUDGET_S, probes: Probes | None = None) -> DevicePeaks:
    """Peaks of one GPU (cuda:N, xpu:N or mps) with torch, timed by that device's events around
    each call: the same probes on every vendor, only torch's module differs (core/hw/roofs.py);
    about `budget_s` seconds of measuring in all."""
    import torch

    from gpuplay.core.hw.roofs import device_api

    device = normalize_device(device)
    t_start = time.perf_counter()
    api = device_api(torch, device)
    dev = torch.device(device)
    probes = probes or Probes()
    probes.name = api.name
    # A GPU's kernels do not share the host's cores: other host processes leave its peaks alone.
    probes.watch_host = False
    probes.plan(budget_s, 2 + len(api.dtypes))
    _gpu_stream(torch, api, probes)
    api.empty_cache()
    free = api.free_bytes()

    # TF32 through both of the installed torch's precision APIs, set alike: torch 2.9+ raises
    # when a legacy getter is read after only the new API was set.
    from gpuplay.core.backends.torch_backend import fp32_matmul_precision

    for dtype in api.dtypes:
        tdt = torch.float32 if dtype == "tf32" else getattr(torch, dtype)

        def make(k: int, tdt: Any = tdt) -> Timed:
            x = torch.randn(k, k, device=dev, dtype=tdt)
            y = torch.randn(k, k, device=dev, dtype=tdt)
            return api.timer(lambda: torch.matmul(x, y))

        itemsize = torch.tensor([], dtype=tdt).element_size()
        n_max = 16384 if 3 * 16384**2 * itemsize < free // 2 else 8192
        with fp32_matmul_precision(torch, dtype == "tf32"):
            _matmul_probe(probes, "torch", dtype, make, 1024, n_max, 0.005, MIN_CALL_S["gpu"])
        api.empty_cache()
    return DevicePeaks(device, api.name, fingerprint(device, api.name), _now(), time.perf_counter() - t_start,
                       list(probes.done), refused=list(probes.refused))  # fmt: skip


class NothingMeasured(Exception):
    """A calibration that measured no peak at all: the cache is left as it was."""

    def __init__(self, peaks: DevicePeaks) -> None:
        self.peaks = peaks
        super().__init__(f"no peak of {peaks.device} could be measured")


def calibrate(device: str, budget_s: float | None = None, probes: Probes | None = None) -> DevicePeaks:
    """Measure one device's peaks and cache them (replacing what was there). With `probes`, each
    finished probe is reported there, and a stop it carries ends the calibration between two
    probes (CalibrationStopped; `keep_partial` then caches what finished). A peak that could not
    be measured is not stored (`DevicePeaks.refused` says why); when none could, NothingMeasured
    is raised and the cache is left as it was."""
    from gpuplay.core.measure import noise

    device = normalize_device(device)
    before = noise.host_mark()
    probes = probes or Probes()
    budget_s = DEFAULT_BUDGET_S if budget_s is None else budget_s  # this device's, all probes together
    peaks = measure_cpu(budget_s, probes=probes) if device == "cpu" else measure_gpu(device, budget_s, probes)
    peaks.noise = noise.host_noise(before, noise.host_mark(before))
    if not peaks.measurements:
        raise NothingMeasured(peaks)
    save_peaks(peaks)
    return peaks


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
