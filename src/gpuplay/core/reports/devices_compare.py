"""Every device side by side: the same configurations on each cuda:N, and the sick GPU flagged.

A GPU more than 5 % slower than the median of its peers, on the same configuration, is an
outlier; it is shown with what NVML says about it (clocks, temperature, throttle reasons, PCIe
link), the usual reasons one GPU of a node lags its twins.
"""

from __future__ import annotations

import re
import statistics
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuplay.core.result import RunResult
from gpuplay.core.spec import RunSpec

OUTLIER_THRESHOLD = 0.05


class DevicesError(ValueError):
    """A --devices value that names no device here, with what to do."""


class DevicesUsageError(DevicesError):
    """--devices written wrongly (empty, or a word that names no device): a usage error."""


def measure(spec: RunSpec, cancel: threading.Event | None = None) -> RunResult:
    """The one place a device comparison measures: in that device's own engine process."""
    from gpuplay.core.engine.client import client_for, in_process

    if in_process():
        from gpuplay.core.runner import run

        return run(spec, cancel=cancel)
    return client_for(spec.device).run(spec, cancel=cancel, telemetry=True)


# -- which devices ---------------------------------------------------------------------
def cuda_devices(probe_timeout: float | None = 30.0) -> tuple[list[str], str]:
    """The cuda:N ids torch sees here, and why there are none when there are none."""
    from gpuplay.core.backends import get_backend

    torch = get_backend("torch")
    avail, devs = torch.probe(probe_timeout)
    ids = [d.id for d in devs if d.id.startswith("cuda:")]
    if ids:
        return ids, ""
    return [], avail.reason if not avail.ok else torch.cuda_reason()  # type: ignore[attr-defined]


def resolve_devices(text: str, cuda: Sequence[str], why_none: str = "") -> list[str]:
    """'all' → every cuda:N; else a comma list of cpu, cuda:N or N. Raises DevicesError."""
    words = [w.strip() for w in text.split(",") if w.strip()]
    if not words:
        raise DevicesUsageError("no device given: write all, cpu, or a list such as cuda:0,cuda:1")
    out: list[str] = []
    for w in words:
        if w == "all":
            if not cuda:
                raise DevicesError(
                    f"--devices all found no CUDA device ({why_none or 'none visible'}); "
                    "use --devices cpu to run the comparison on the CPU"
                )
            chosen = list(cuda)
        elif w == "cpu":
            chosen = ["cpu"]
        else:
            dev = f"cuda:{w}" if w.isdigit() else ("cuda:0" if w == "cuda" else w)
            if not re.fullmatch(r"cuda:\d+", dev):  # a typo, not a device that is missing here
                raise DevicesUsageError(f"{w!r} is not a device: write all, cpu, cuda, cuda:N or N")
            if dev not in cuda:
                have = ", ".join(cuda) if cuda else f"none ({why_none or 'no CUDA device'})"
                raise DevicesError(f"no device {w!r} here; CUDA devices: {have}")
            chosen = [dev]
        out.extend(d for d in chosen if d not in out)
    return out


def for_devices(specs: Sequence[RunSpec], devices: Sequence[str]) -> list[RunSpec]:
    """The specs that run on one of `devices`, in order (NumPy only where cpu is asked for)."""
    return [s for s in specs if s.device in devices]


def run_devices(
    specs: Sequence[RunSpec],
    *,
    concurrent: bool = False,
    cancel: threading.Event | None = None,
    on_result: Callable[[RunResult], None] | None = None,
    measure_fn: Callable[[RunSpec, threading.Event | None], RunResult] | None = None,
) -> list[RunResult]:
    """Measure every spec: one after another, or one thread per device at once (they then share
    PCIe, host cores and power, which the figures will show). Results come back in spec order."""
    fn = measure_fn or measure
    cancel = cancel or threading.Event()
    results: dict[int, RunResult] = {}
    lock = threading.Lock()

    def work(indices: list[int]) -> None:
        for i in indices:
            if cancel.is_set():
                return
            r = fn(specs[i], cancel)
            with lock:
                results[i] = r
                if on_result:
                    on_result(r)

    if concurrent:
        _in_lockstep(specs, cancel, work)
    else:
        work(list(range(len(specs))))
    return [results[i] for i in sorted(results)]


def _in_lockstep(
    specs: Sequence[RunSpec], cancel: threading.Event, work: Callable[[list[int]], None]
) -> None:
    """Every device runs the same configuration at the same time, and the next starts when all
    have finished. The devices then share the same load, and process-wide levers that a
    configuration sets (TF32, thread counts) are never changed under another device's run."""
    groups: dict[tuple[str, ...], list[int]] = {}
    for i, s in enumerate(specs):
        groups.setdefault(config_key(s), []).append(i)
    for indices in groups.values():
        if cancel.is_set():
            break
        threads = [
            threading.Thread(target=work, args=([i],), name=f"gpuplay-device-{specs[i].device}", daemon=True)
            for i in indices
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()


# -- side by side ---------------------------------------------------------------------
def config_key(spec: RunSpec) -> tuple[str, ...]:
    """What a configuration is, the device left out: the same key on every device."""
    label = spec.label().split(" ", 2)
    rest = label[2] if len(label) > 2 else ""
    return (spec.scenario or spec.workload, str(sorted(spec.params_items)), spec.backend, rest)


@dataclass
class DeviceRow:
    scenario: str
    size: str
    config: str  # the label without the device
    results: dict[str, RunResult] = field(default_factory=dict)
    outliers: dict[str, float] = field(default_factory=dict)  # device → fraction slower than its peers

    @property
    def medians(self) -> dict[str, float | None]:
        return {d: (r.median if r.usable else None) for d, r in self.results.items()}


def side_by_side(results: Sequence[RunResult], threshold: float = OUTLIER_THRESHOLD) -> list[DeviceRow]:
    rows: dict[tuple[str, ...], DeviceRow] = {}
    for r in results:
        key = config_key(r.spec)
        if key not in rows:
            rows[key] = DeviceRow(key[0], r.size, f"{r.spec.backend} {key[3]}".strip())
        rows[key].results[r.spec.device] = r
        rows[key].size = rows[key].size or r.size
    for row in rows.values():
        row.outliers = find_outliers(row.medians, threshold)
    return list(rows.values())


def find_outliers(
    medians: Mapping[str, float | None], threshold: float = OUTLIER_THRESHOLD
) -> dict[str, float]:
    """Devices whose median time is more than `threshold` above the median of the others' medians.

    Each device is compared with its peers, not with a median that includes itself, so with two
    devices the slower one is flagged when it is slower than the other by more than the threshold.
    With an even number of peers the upper median is used, so a device is flagged only when it is
    slower than most of its peers: one unusually fast GPU among three does not brand the two normal
    ones. Devices without a figure neither are flagged nor count as peers.
    """
    have = {d: m for d, m in medians.items() if m is not None and m > 0}
    out: dict[str, float] = {}
    for d, m in have.items():
        peers = [v for k, v in have.items() if k != d]
        if not peers:
            continue
        ref = statistics.median_high(peers)
        if m > ref * (1 + threshold):
            out[d] = m / ref - 1
    return out


# -- what NVML says about a flagged GPU -----------------------------------------------------
# nvmlClocksEventReasons / nvmlClocksThrottleReasons bit masks (nvml.h).
THROTTLE_BITS = {
    0x1: "idle",
    0x2: "applications clocks setting",
    0x4: "software power cap",
    0x8: "hardware slowdown",
    0x10: "sync boost",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "hardware power brake",
    0x100: "display clock setting",
}


def throttle_reasons(mask: int | None) -> list[str]:
    if mask is None:
        return ["n/a"]
    names = [name for bit, name in THROTTLE_BITS.items() if mask & bit]
    unknown = mask & ~sum(THROTTLE_BITS)
    if unknown:
        names.append(f"other (0x{unknown:x})")
    return names or ["none"]


def nvml_index(device: str) -> int | None:
    """The NVML index of cuda:N's GPU, matched by UUID (telemetry.nvml_handle_for_cuda_device)."""
    from gpuplay.core.measure.telemetry import nvml_handle_for_cuda_device

    target = nvml_handle_for_cuda_device(device)
    return target.nvml_index if target is not None else None


def device_health(device: str) -> dict[str, Any]:
    """Clocks, temperature, throttle reasons and PCIe link of a GPU, or why NVML cannot tell."""
    from gpuplay.core.measure.telemetry import nvml, nvml_status, query_gpu

    why = nvml_status()
    if why:
        return {"device": device, "note": why}
    idx = nvml_index(device)
    if idx is None:
        return {"device": device, "note": "not an NVML-visible GPU"}
    g = query_gpu(idx)
    h = nvml.call("nvmlDeviceGetHandleByIndex", idx)
    mask = None
    for name in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"):
        mask = nvml.call(name, h) if h is not None else None
        if mask is not None:
            break
    return {
        "device": device,
        "nvml_index": idx,
        "name": g.name,
        "sm_clock_mhz": g.sm_clock_mhz,
        "sm_clock_max_mhz": g.sm_clock_max_mhz,
        "mem_clock_mhz": g.mem_clock_mhz,
        "temp_c": g.temp_c,
        "power_w": g.power_w,
        "power_limit_w": g.power_limit_w,
        "throttle": throttle_reasons(mask),
        "pcie_gen": g.pcie_gen,
        "pcie_width": g.pcie_width,
        "pcie_gen_max": nvml.call("nvmlDeviceGetMaxPcieLinkGeneration", h) if h is not None else None,
        "pcie_width_max": nvml.call("nvmlDeviceGetMaxPcieLinkWidth", h) if h is not None else None,
    }


def health_text(h: Mapping[str, Any]) -> str:
    if "note" in h:
        return f"{h['device']}: {h['note']}"

    def v(x: Any, unit: str = "") -> str:
        return "n/a" if x is None else f"{x}{unit}"

    return (
        f"{h['device']} ({h.get('name') or '?'}): SM {v(h['sm_clock_mhz'])}/{v(h['sm_clock_max_mhz'])} MHz, "
        f"memory {v(h['mem_clock_mhz'])} MHz, {v(h['temp_c'], ' °C')}, power {v(h['power_w'], ' W')} of "
        f"{v(h['power_limit_w'], ' W')}, throttle: {', '.join(h['throttle'])}, "
        f"PCIe gen{v(h['pcie_gen'])} x{v(h['pcie_width'])} (max gen{v(h['pcie_gen_max'])} x{v(h['pcie_width_max'])})"
    )


# -- output -----------------------------------------------------------------------------
def _cell(r: RunResult | None) -> str:
    from gpuplay.core.reports.report import fmt_time

    if r is None:
        return "—"
    if not r.usable:
        return r.status
    s = r.summary
    assert s is not None
    return f"{fmt_time(s.median)} ±{100 * s.rel_iqr / 2:.1f}%"


def to_markdown(
    rows: Sequence[DeviceRow], devices: Sequence[str], health: Mapping[str, str] | None = None
) -> str:
    head = ["scenario", "size", "configuration", *devices, "flagged"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [_cell(row.results.get(d)) for d in devices]
        flagged = "; ".join(f"{d} +{100 * f:.1f}%" for d, f in row.outliers.items())
        out.append("| " + " | ".join([row.scenario, row.size, row.config, *cells, flagged]) + " |")
    notes = [
        f"Medians ± half the IQR per device. Flagged: more than {100 * OUTLIER_THRESHOLD:.0f} % slower than "
        "the median of the other devices on the same configuration."
    ]
    for d, text in (health or {}).items():
        notes.append(f"- {text}" if text.startswith(d) else f"- {d}: {text}")
    return "\n".join(out) + "\n\n" + "\n".join(notes) + "\n"


def to_dict(rows: Sequence[DeviceRow], devices: Sequence[str], health: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "devices": list(devices),
        "outlier_threshold": OUTLIER_THRESHOLD,
        "rows": [
            {
                "scenario": r.scenario,
                "size": r.size,
                "configuration": r.config,
                "medians_s": r.medians,
                "outliers": r.outliers,
            }
            for r in rows
        ],
        "health": dict(health),
    }
