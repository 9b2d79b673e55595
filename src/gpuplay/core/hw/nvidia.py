"""NVIDIA GPM (GPU Performance Monitoring) counters through NVML: what the hardware did.

NVML's "utilisation" only says that some kernel ran during its sample window; GPM says what the
SMs, the tensor cores and DRAM did. A GPM figure is the average between two samples of the GPU's
counters (`nvmlGpmSampleGet` twice, then `nvmlGpmMetricsGet` over the pair), so a window is
bracketed by two samples and nothing is read inside it: a run's timed loop is never touched.
GPM exists on Hopper and later GPUs with an R520+ driver; anywhere else every function here
answers with the reason (`GpmReading.reason`) instead of raising.

The NVML wrapper (`core.telemetry.nvml`: `ensure()`, `call()`, `module`) is passed in, so this
module sits below telemetry and imports nothing of it.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field
from typing import Any, NamedTuple


@dataclass(frozen=True)
class GpmMetric:
    key: str  # the field name in results, JSON and CSV
    nvml_id: str  # pynvml's constant
    label: str
    unit: str  # "%" or "MiB/s" (NVML's unit for the *_PER_SEC metrics)


GPM_METRICS: tuple[GpmMetric, ...] = (
    GpmMetric("sm_active", "NVML_GPM_METRIC_SM_UTIL", "SM activity", "%"),
    GpmMetric("sm_occupancy", "NVML_GPM_METRIC_SM_OCCUPANCY", "SM occupancy", "%"),
    GpmMetric("tensor_active", "NVML_GPM_METRIC_ANY_TENSOR_UTIL", "tensor-core activity", "%"),
    # HMMA carries fp16, bf16 and TF32 tensor work; IMMA int8; DFMA the fp64 tensor pipe (DMMA).
    GpmMetric("hmma_active", "NVML_GPM_METRIC_HMMA_TENSOR_UTIL", "HMMA (fp16/bf16/TF32)", "%"),
    GpmMetric("imma_active", "NVML_GPM_METRIC_IMMA_TENSOR_UTIL", "IMMA (int8)", "%"),
    GpmMetric("dmma_active", "NVML_GPM_METRIC_DFMA_TENSOR_UTIL", "DMMA (fp64)", "%"),
    GpmMetric("dram_active", "NVML_GPM_METRIC_DRAM_BW_UTIL", "DRAM bandwidth", "%"),
    GpmMetric("pcie_tx_mibs", "NVML_GPM_METRIC_PCIE_TX_PER_SEC", "PCIe TX", "MiB/s"),
    GpmMetric("pcie_rx_mibs", "NVML_GPM_METRIC_PCIE_RX_PER_SEC", "PCIe RX", "MiB/s"),
    GpmMetric("nvlink_tx_mibs", "NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC", "NVLink TX", "MiB/s"),
    GpmMetric("nvlink_rx_mibs", "NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC", "NVLink RX", "MiB/s"),
)
BY_KEY = {m.key: m for m in GPM_METRICS}
# A rate above this is a counter glitch (a wrapped or reset counter), not traffic: 10 TiB/s.
MAX_RATE_MIBS = 10 * 2**20
# NVML's GPM documentation: the interval between the two nvmlGpmSampleGet calls "must be greater
# than 100 ms due to the internal sample refresh rate". Closer samples hold the same counters, and
# their "metrics" read as an idle GPU: a shorter window is n/a, not 0 %.
MIN_WINDOW_S = 0.1
# How well a window's length must be known to turn its rates into counts. GPM's rates are over the
# driver's own interval and hold whatever the host did; a sample's time is read on the host around
# the driver's call, and a host held up inside it (0.16 s on the loaded 2-core machine) made a 1.21 s
# window read 1.37 s: a cold run, which multiplies the rates by the window to take its flushes out,
# read the steps' DRAM activity 38 % for 16 % in the simulated ledger. Such a window says so.
MAX_CLOCK_SHARE = 0.02


def now() -> float:
    """The clock a GPM window is timed on (module-level so a fake GPU can lend its own)."""
    return time.monotonic()


class GpmSample(NamedTuple):
    """A GPM sample buffer and when it was taken: the middle of the host clock's readings just
    before and after the driver's call, which took `spread` seconds."""

    buffer: Any
    t: float
    spread: float = 0.0


@dataclass
class GpmReading:
    """GPM figures over one window, or the reason there are none."""

    values: dict[str, float | None] = field(default_factory=dict)
    window_s: float | None = None
    reason: str = ""
    # Seconds the window's length may be off, where over MAX_CLOCK_SHARE of it (else 0): the
    # rates stand, a count made from them does not.
    unsure_s: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.reason and bool(self.values)

    def to_dict(self) -> dict[str, Any]:
        if not self.ok:
            return {"reason": self.reason or "GPM: the first sample opens the window; figures from the next"}
        unsure = {"window_unsure_s": self.unsure_s} if self.unsure_s else {}
        return {**self.values, "window_s": self.window_s, **unsure, "source": "NVML GPM"}


def bounded(key: str, value: Any) -> float | None:
    """A finite figure inside its metric's range, else None (a glitch is n/a, not a number)."""
    if isinstance(value, bool):  # float(True) is 1.0: a flag is not a reading
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(v) or v < 0:
        return None
    metric = BY_KEY.get(key)
    if metric is not None and metric.unit == "%":
        return min(v, 100.0)  # GPM rounds a busy pipe to slightly above 100
    return v if v <= MAX_RATE_MIBS else None


def _error_name(exc: BaseException) -> str:
    return type(exc).__name__


def unavailable(nvml: Any, handle: Any, name: str | None = None, mig_handle: Any = None) -> str:
    """'' when GPM can sample this GPU (or MIG instance); otherwise why not, as one line."""
    status = nvml.ensure()
    if status:
        return f"GPM n/a: {status}"
    pm = nvml.module
    if not all(hasattr(pm, f) for f in ("nvmlGpmSampleAlloc", "nvmlGpmSampleGet", "nvmlGpmMetricsGet")):
        return "GPM n/a: this nvidia-ml-py has no GPM calls (pip install -U nvidia-ml-py)"
    try:
        support = pm.nvmlGpmQueryDeviceSupport(handle)
    except Exception as exc:
        if "FunctionNotFound" in _error_name(exc):
            return "GPM n/a: the NVIDIA driver's NVML has no GPM (it needs driver R520 or newer)"
        return f"GPM n/a: the driver refused the GPM query ({_error_name(exc)})"
    if not getattr(support, "isSupportedDevice", 0):
        return f"GPM n/a: {name or 'this GPU'} has no GPM counters (they start with Hopper: H100, H200, B200)"
    if mig_handle is not None and _gpu_instance_id(nvml, mig_handle) is None:
        return "GPM n/a: this MIG instance's GPU-instance id cannot be read (no per-instance GPM here)"
    return ""


def _gpu_instance_id(nvml: Any, mig_handle: Any) -> int | None:
    gi = nvml.call("nvmlDeviceGetGpuInstanceId", mig_handle)
    return int(gi) if isinstance(gi, int) else None


class GpmSampler:
    """Samples one GPU's (or one MIG instance's) GPM counters; `between` turns two into figures.

    A sample is a buffer NVML allocates: each is freed once used (`free`), so a monitor that
    runs for hours holds two at most.
    """

    def __init__(self, nvml: Any, handle: Any, name: str | None = None, mig_handle: Any = None) -> None:
        self.nvml, self.handle, self.mig_handle = nvml, handle, mig_handle
        self.reason = unavailable(nvml, handle, name, mig_handle)
        self._gi = _gpu_instance_id(nvml, mig_handle) if mig_handle is not None and not self.reason else None

    def sample(self) -> GpmSample | str:
        """A GPM sample and its time, or the reason none could be taken."""
        if self.reason:
            return self.reason
        pm = self.nvml.module
        try:
            s = pm.nvmlGpmSampleAlloc()
        except Exception as exc:
            return f"GPM n/a: no sample buffer ({_error_name(exc)})"
        before = now()
        try:
            if self._gi is None:
                pm.nvmlGpmSampleGet(self.handle, s)
            else:
                pm.nvmlGpmMigSampleGet(self.handle, self._gi, s)
        except Exception as exc:
            self.free(s)
            what = "this MIG instance" if self._gi is not None else "this GPU"
            return f"GPM n/a: the driver gives no GPM sample for {what} ({_error_name(exc)})"
        after = now()
        return GpmSample(s, (before + after) / 2, max(0.0, after - before))

    def free(self, s: Any) -> None:
        try:
            self.nvml.module.nvmlGpmSampleFree(s)
        except Exception:
            pass  # freeing a buffer the driver already dropped: nothing left to do

    def between(self, first: GpmSample, second: GpmSample) -> GpmReading:
        """The figures over the window from `first` to `second` (both samples stay allocated)."""
        window = second.t - first.t
        if window <= MIN_WINDOW_S:
            return GpmReading(
                reason=f"GPM n/a: the window lasted {max(window, 0.0) * 1000:.0f} ms; GPM needs over "
                f"{MIN_WINDOW_S * 1000:.0f} ms between its samples (NVML's counter refresh)"
            )
        unsure = (first.spread + second.spread) / 2  # each sample's time is known to ± spread/2
        pm = self.nvml.module
        wanted = [(m.key, getattr(pm, m.nvml_id, None)) for m in GPM_METRICS]
        wanted = [(k, i) for k, i in wanted if isinstance(i, int)]  # an older binding lacks some ids
        try:
            mg = pm.c_nvmlGpmMetricsGet_t()
            mg.version = pm.NVML_GPM_METRICS_GET_VERSION
            mg.numMetrics = len(wanted)
            mg.sample1, mg.sample2 = first.buffer, second.buffer
            for slot, (_, metric_id) in enumerate(wanted):
                mg.metrics[slot].metricId = metric_id
            pm.nvmlGpmMetricsGet(mg)
        except Exception as exc:
            return GpmReading(
                reason=f"GPM n/a: the driver could not compute the metrics ({_error_name(exc)})"
            )
        values: dict[str, float | None] = {}
        for slot, (key, _) in enumerate(wanted):
            m = mg.metrics[slot]
            # A metric this GPU lacks (NVLink on a PCIe card) has its own error code: n/a alone.
            values[key] = bounded(key, m.value) if int(getattr(m, "nvmlReturn", 0)) == 0 else None
        return GpmReading(
            values, max(0.0, window), unsure_s=unsure if unsure > MAX_CLOCK_SHARE * window else 0.0
        )


class GpmWindow:
    """Two samples bracketing one window (a run's timed phase): `open()` before, `close()` after."""

    def __init__(self, sampler: GpmSampler) -> None:
        self.sampler = sampler
        self._first: GpmSample | str = sampler.sample()

    def close(self) -> GpmReading:
        if isinstance(self._first, str):
            return GpmReading(reason=self._first)
        second = self.sampler.sample()
        try:
            if isinstance(second, str):
                return GpmReading(reason=second)
            try:
                return self.sampler.between(self._first, second)
            finally:
                self.sampler.free(second.buffer)
        finally:
            self.sampler.free(self._first.buffer)


class GpmStream:
    """The latest figures per GPU for a view that polls (the Telemetry tab, `gpuplay monitor`):
    each `read` returns the window since the previous read of that GPU and keeps one sample."""

    def __init__(self, nvml: Any) -> None:
        self.nvml = nvml
        self._lock = threading.Lock()
        self._samplers: dict[int, GpmSampler] = {}
        self._last: dict[int, GpmSample] = {}
        self._shown: dict[int, GpmReading] = {}  # the latest figures per GPU
        self._closed = False

    def read(self, index: int, handle: Any, name: str | None = None) -> GpmReading:
        with self._lock:
            if self._closed:  # closed by the view while a snapshot was under way: keep no sample
                return GpmReading(reason="GPM: no view shows it now")
            sampler = self._samplers.get(index)
            if sampler is None:
                sampler = self._samplers[index] = GpmSampler(self.nvml, handle, name)
            taken = sampler.sample()
            if isinstance(taken, str):
                return GpmReading(reason=taken)
            previous = self._last.get(index)
            if previous is not None and taken.t - previous.t <= MIN_WINDOW_S:
                # Polled again within NVML's refresh: the counters have not moved. The window
                # stays open from the earlier sample, and the view keeps its last figures.
                sampler.free(taken.buffer)
                return self._shown.get(index, GpmReading())
            self._last[index] = taken
            if previous is None:
                return GpmReading()  # the first sample opens the window: figures from the next
            try:
                reading = self._shown[index] = sampler.between(previous, taken)
                return reading
            finally:
                sampler.free(previous.buffer)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            for index, taken in self._last.items():
                self._samplers[index].free(taken.buffer)
            self._last.clear()


def summary(activity: dict[str, Any] | None) -> str:
    """'tensor cores 71 % · SM 93 % · DRAM 12 %' from a result's or a reading's figures; '' if none."""
    if not activity or activity.get("reason"):
        return ""
    parts = []
    for key, label in (("tensor_active", "tensor cores"), ("sm_active", "SM"), ("dram_active", "DRAM")):
        v = bounded(key, activity.get(key))
        if v is not None:
            parts.append(f"{label} {v:.0f} %")
    return " · ".join(parts)


def pipes(activity: dict[str, Any] | None) -> str:
    """The tensor pipes GPM splits out: 'HMMA 70 % · IMMA 0 % · DMMA 0 %'; '' if none."""
    if not activity or activity.get("reason"):
        return ""
    out = []
    for key, short in (("hmma_active", "HMMA"), ("imma_active", "IMMA"), ("dmma_active", "DMMA")):
        v = bounded(key, activity.get(key))
        if v is not None:
            out.append(f"{short} {v:.0f} %")
    return " · ".join(out)


def links(activity: dict[str, Any] | None) -> str:
    """'PCIe 12/3 MiB/s · NVLink n/a' (TX/RX) from GPM's link rates; '' if none."""
    if not activity or activity.get("reason"):
        return ""

    def pair(tx: str, rx: str) -> str:
        a, b = bounded(tx, activity.get(tx)), bounded(rx, activity.get(rx))
        if a is None and b is None:
            return "n/a"
        return f"TX {'n/a' if a is None else f'{a:.0f}'} RX {'n/a' if b is None else f'{b:.0f}'} MiB/s"

    return f"PCIe {pair('pcie_tx_mibs', 'pcie_rx_mibs')} · NVLink {pair('nvlink_tx_mibs', 'nvlink_rx_mibs')}"


def gpm_condition(activity: dict[str, Any], window: str = "timed steps") -> str:
    """A result's condition: 'tensor cores 71 % · SM 93 % · DRAM 12 % (GPM, timed steps)' or the
    reason; `window` names the steps the figures are over where they are not the timed ones."""
    text = summary(activity)
    return f"{text} (GPM, {window})" if text else str(activity.get("reason") or "GPM n/a")


def activity_change(now: dict[str, Any] | None, before: dict[str, Any] | None, flipped: str) -> str:
    """After a lever flip (AMP, TF32): did tensor-core activity rise? '' when either run lacks it."""
    a = bounded("tensor_active", (now or {}).get("tensor_active")) if now and not now.get("reason") else None
    b = (
        bounded("tensor_active", (before or {}).get("tensor_active"))
        if before and not before.get("reason")
        else None
    )
    if a is None or b is None:
        return ""
    # Below 2 points the counters' own jitter decides; say "unchanged" rather than guess a direction.
    verdict = "rose" if a - b >= 2 else "fell" if b - a >= 2 else "did not change"
    return f"tensor-core activity {verdict} after {flipped}: {b:.0f} % → {a:.0f} %"
