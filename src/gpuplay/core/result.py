"""A finished (or stopped) measurement: samples, summary, accuracy and conditions."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from gpuplay.core.measure.stats import Summary, summarize
from gpuplay.core.spec import RunSpec


@dataclass
class RunResult:
    spec: RunSpec
    status: str = "ok"  # ok | cancelled | failed | refused
    message: str = ""  # why it failed or was refused, in words
    detail: str = ""  # more lines for the message: a user code file's traceback frames
    failure: str = ""  # out-of-memory | compile | error | not-finite | '' (for tests and exports)
    samples: list[float] = field(default_factory=list)  # timed steps, seconds
    warmup: list[float] = field(default_factory=list)
    setup_s: float | None = None
    compile_s: float | None = None
    build_s: float | None = None  # an inference runtime's export/build (gpuplay.core.runtimes), excluded
    split: dict[str, list[float]] = field(default_factory=dict)  # per-step phases: data wait, h2d, model
    estimate_s: float | None = None  # predicted step time before running
    flops: float = 0.0
    bytes: float = 0.0
    error: float | None = None  # relative error against the float64 reference
    tolerance: float | None = None
    compute_dtype: str = ""
    size: str = ""
    conditions: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    telemetry: dict[str, Any] = field(default_factory=dict)
    roof: dict[str, Any] | None = None  # frozen once read back from a log; else from the cached peaks
    speedup: dict[str, Any] | None = None  # paired with a NumPy baseline (gpuplay.core.runner.paired)
    # The run's own peak device memory over its timed phase: {"bytes": int, "source": str}
    peak_memory: dict[str, Any] | None = None
    started: str = ""
    finished: str = ""

    # The last summary and the samples it was computed from: a result is read many times (median,
    # GFLOP/s, GB/s, the log line, the table) and sorting 25,000 samples costs ~10 ms each time.
    _summary_of: tuple[tuple[float, ...], Summary | None] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    @property
    def summary(self) -> Summary | None:
        key = tuple(self.samples)  # the samples may still grow (a live run): the cache checks them
        if self._summary_of is None or self._summary_of[0] != key:
            self._summary_of = (key, summarize(key))
        return self._summary_of[1]

    @property
    def median(self) -> float | None:
        s = self.summary
        return s.median if s else None

    @property
    def other_mode(self) -> dict[str, Any] | None:
        """The allocation mode that is not the headline, where the two differ: {"mode", "name",
        "median_s", "steps", "faults_per_step", "headline"}. The headline (`median` and all
        derived from it) is the mode a plain loop in a fresh process gets."""
        other = self.conditions.get("alloc_other")
        if not isinstance(other, dict):
            return None
        median = other.get("median_s")
        if (
            not isinstance(median, int | float)
            or not (0 < median < 1e6)
            or not isinstance(other.get("name"), str)
        ):
            return None
        return other

    @property
    def fresh_spread(self) -> dict[str, Any] | None:
        """Where fresh processes' plain loops of this step disagree by more than 10 %: {"loops",
        "min_s", "max_s", "faults_min", "faults_max"}; the headline is then the middle loop's."""
        spread = self.conditions.get("alloc_fresh_spread")
        if not isinstance(spread, dict):
            return None
        lo, hi = (_seconds_of(spread.get(k)) for k in ("min_s", "max_s"))
        loops = spread.get("loops")
        if not isinstance(loops, int) or isinstance(loops, bool) or not 2 <= loops <= 1000:
            return None  # a range is of two fresh processes at least
        return spread if lo and hi and lo <= hi else None  # a step of 0 s is no time read

    @property
    def gflops(self) -> float | None:
        m = self.median
        return self.flops / m / 1e9 if m and self.flops else None

    @property
    def gbps(self) -> float | None:
        m = self.median
        return self.bytes / m / 1e9 if m and self.bytes else None

    @property
    def check_ok(self) -> bool | None:
        if self.error is None or self.tolerance is None:
            return None
        return bool(self.error <= self.tolerance)

    @property
    def usable(self) -> bool:
        """Has timed samples worth showing (a cancelled run keeps what it measured)."""
        return bool(self.samples) and self.status in ("ok", "cancelled")

    def roof_fields(self) -> dict[str, Any]:
        """Arithmetic intensity, bound and fraction of roof against this device's cached peaks.

        Reads the calibration cache only (never measures): without one, says so.
        """
        if self.roof is not None and self.roof.get("status") != "not calibrated":
            from gpuplay.core.measure.roofline import checked

            return checked(self.roof)  # a file written before a roof above 1 read "stale"
        # A measurement logged before its device was calibrated is placed against the calibration
        # made since (history, compare, load): the peaks describe the device, not the session.
        from gpuplay.core.measure.roofline import roof_for

        return roof_for(
            device=self.spec.device,
            device_name=self.conditions.get("device_name"),
            compute_dtype=self.compute_dtype or self.spec.dtype,
            tf32=self.spec.tf32,
            flops=self.flops,
            nbytes=self.bytes,
            seconds=self.median if self.usable else None,
        )

    @property
    def noise_warnings(self) -> list[str]:
        """What else used the machine during the timed window, and an unstable spread, in words."""
        return self.noise_lines()

    def noise_lines(self, advice: bool = True) -> list[str]:
        from gpuplay.core.measure.noise import noise_warnings

        s = self.summary
        return noise_warnings(
            self.telemetry, s.rel_iqr if s else None, s.n if s else 0, s.min if s else None, advice
        )

    @property
    def unstable(self) -> bool:
        from gpuplay.core.measure.noise import stability

        s = self.summary
        return bool(s and stability(s.rel_iqr, s.n))

    def to_dict(self, derived: bool = True) -> dict[str, Any]:
        """The result as JSON-ready data. `derived=False` (the engine's answer on the wire) leaves
        out what `from_dict` recomputes from the rest — the summary, rates, the check's verdict,
        the roof (a calibration-cache read), the noise verdicts — so the engine, whose answer the
        front end waits for, does none of that work."""
        if not derived:
            d = self._fields()
            d["roof"] = self.roof
            return d
        s = self.summary
        d = self._fields()
        d.update(
            summary=s.to_dict() if s else None,
            other_mode=self.other_mode,
            fresh_spread=self.fresh_spread,
            gflops=self.gflops,
            gbps=self.gbps,
            check_ok=self.check_ok,
            roof=self.roof_fields(),
            unstable=self.unstable,
            noise_warnings=self.noise_warnings,
        )
        # Files keep their key order; a field `_fields` gains later follows rather than vanishes.
        return {**{k: d[k] for k in _KEY_ORDER if k in d}, **d}

    def _fields(self) -> dict[str, Any]:
        return {
            "scenario": self.spec.scenario,
            "workload": self.spec.workload,
            "size": self.size,
            "label": self.spec.label(),
            "spec": self.spec.to_dict(),
            "status": self.status,
            "message": self.message,
            "detail": self.detail,
            "failure": self.failure,
            "samples_s": self.samples,
            "warmup_s": self.warmup,
            "setup_s": self.setup_s,
            "compile_s": self.compile_s,
            "build_s": self.build_s,
            "split": split_summary(self.split),
            "estimate_s": self.estimate_s,
            "flops": self.flops,
            "bytes": self.bytes,
            "error": _finite_or_str(self.error),
            "tolerance": self.tolerance,
            "compute_dtype": self.compute_dtype,
            "conditions": self.conditions,
            "notes": self.notes,
            "telemetry": self.telemetry,
            "speedup": self.speedup,
            "peak_memory": self.peak_memory,
            "started": self.started,
            "finished": self.finished,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunResult:
        err = d.get("error")
        return cls(
            spec=RunSpec.from_dict(d["spec"]),
            status=d.get("status", "ok"),
            message=d.get("message", ""),
            detail=d.get("detail", ""),
            failure=d.get("failure", ""),
            samples=list(d.get("samples_s") or []),
            warmup=list(d.get("warmup_s") or []),
            setup_s=d.get("setup_s"),
            compile_s=d.get("compile_s"),
            build_s=_seconds_of(d.get("build_s")),
            split=split_from_dict(d.get("split")),
            estimate_s=d.get("estimate_s"),
            flops=d.get("flops") or 0.0,
            bytes=d.get("bytes") or 0.0,
            error=math.inf if err == "inf" else (math.nan if err == "nan" else err),
            tolerance=d.get("tolerance"),
            compute_dtype=d.get("compute_dtype", ""),
            size=d.get("size", ""),
            conditions=d.get("conditions") or {},
            notes=list(d.get("notes") or []),
            telemetry=d.get("telemetry") or {},
            roof=d.get("roof"),
            speedup=d.get("speedup") if isinstance(d.get("speedup"), dict) else None,
            peak_memory=peak_memory_of(d.get("peak_memory")),
            started=d.get("started", ""),
            finished=d.get("finished", ""),
        )


# The keys of a full to_dict, in the order files have always had them.
_KEY_ORDER = (
    "scenario", "workload", "size", "label", "spec", "status", "message", "detail", "failure", "summary",
    "other_mode", "fresh_spread",
    "samples_s", "warmup_s", "setup_s", "compile_s", "build_s", "split", "estimate_s", "flops", "bytes",
    "gflops", "gbps", "error", "tolerance", "check_ok", "compute_dtype", "conditions", "notes", "telemetry",
    "roof", "unstable", "noise_warnings", "speedup", "peak_memory", "started", "finished",
)  # fmt: skip


def split_summary(split: dict[str, list[float]]) -> dict[str, Any] | None:
    """Each phase's median seconds per step beside its per-step values (`per_step`)."""
    if not split:
        return None
    import statistics  # here: its fractions and decimal are ~3 ms of every process's start

    out: dict[str, Any] = {k: float(statistics.median(v)) if v else None for k, v in split.items()}
    out["per_step"] = {k: list(v) for k, v in split.items()}
    return out


def _seconds_of(x: Any) -> float | None:
    """A duration read back from a file: a finite, non-negative number under a day, or None."""
    if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x) or not 0 <= x < 86_400:
        return None
    return float(x)


def split_from_dict(d: Any) -> dict[str, list[float]]:
    """The per-step phases back from a result's JSON; anything not a list of finite numbers is dropped."""
    per_step = d.get("per_step") if isinstance(d, dict) else None
    if not isinstance(per_step, dict):
        return {}
    return {
        str(k)[:40]: [float(x) for x in v if _seconds_of(x) is not None]
        for k, v in per_step.items()
        if isinstance(v, list)
    }


def peak_memory_of(d: Any) -> dict[str, Any] | None:
    """A peak-memory record read back from a log or an export: bounded, or None."""
    if not isinstance(d, dict):
        return None
    n, source = d.get("bytes"), d.get("source")
    if n is None and isinstance(source, str) and source:
        return {"bytes": None, "source": source[:200]}  # no count on this device, and why (MPS)
    if isinstance(n, bool) or not isinstance(n, int | float) or not math.isfinite(n) or not 0 <= n < 2**60:
        return None
    return {"bytes": int(n), "source": str(source)[:200] if source is not None else ""}


def _finite_or_str(x: float | None) -> float | str | None:
    if x is None or math.isfinite(x):
        return x
    return "nan" if math.isnan(x) else "inf"
