"""Two result files of the same configurations, measured with different versions: for each
configuration present in both, faster, slower or within noise, with the ratio's interval.

The levers article's first checklist step is "confirm PyTorch and driver versions and upgrade to a
release with targeted performance fixes": this answers whether an upgrade changed anything, and
says which versions differ between the two files. The files are independent measurements (taken
on different days), so the interval of the ratio of medians comes from resampling each file's
samples on its own (a seeded bootstrap), never from pairs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

RESAMPLES = 2000
CONFIDENCE = 0.95
# A change smaller than this is called within noise even when its interval excludes 1: a machine
# on another day (clocks, temperature, what else runs) moves medians by about this much.
MIN_CHANGE = 0.02
MIN_SAMPLES = 3
# A step time a file may claim, in seconds: under a picosecond or over a day is no measurement
# (a subnormal 1e-320 made the ratio inf and the JSON output invalid); such samples are dropped.
STEP_S = (1e-12, 86_400.0)
# What "versions" holds (core/measure/provenance.py), in the order they are said, with their names.
VERSION_NAMES = {
    "gpuplay": "gpuplay",
    "python": "Python",
    "numpy": "NumPy",
    "torch": "PyTorch",
    "torch_cuda": "CUDA runtime (torch)",
    "torch_hip": "HIP runtime (torch)",
    "cupy": "CuPy",
    "cupy-cuda12x": "CuPy",
    "cupy-cuda13x": "CuPy",
    "driver": "driver",
    "device_name": "device",
    "device_uuid": "device UUID",
}


@dataclass(frozen=True)
class Change:
    """One configuration in both files: new median over old (above 1: slower)."""

    key: tuple[str, str, str]  # scenario, size, configuration label
    old_median: float
    new_median: float
    ratio: float
    low: float | None  # the ratio's 95% interval; None with too few samples for one
    high: float | None
    verdict: str  # faster | slower | within noise

    def to_dict(self) -> dict[str, Any]:
        scenario, size, label = self.key
        return {
            "scenario": scenario,
            "size": size,
            "configuration": label,
            "old_median_s": self.old_median,
            "new_median_s": self.new_median,
            "ratio": self.ratio,
            "interval": None if self.low is None or self.high is None else [self.low, self.high],
            "verdict": self.verdict,
        }

    def text(self) -> str:
        scenario, size, label = self.key
        if self.low is None or self.high is None:
            spread = "(too few samples for an interval)"
        else:
            spread = f"[{self.low:.3f}, {self.high:.3f}]"
        return f"{scenario} ({size}) {label}: {self.verdict}, new/old time ×{self.ratio:.3f} {spread}"


def _samples(r: Mapping[str, Any]) -> list[float]:
    raw = r.get("samples_s") or []
    out = []
    for x in raw if isinstance(raw, list) else []:
        if isinstance(x, int | float) and not isinstance(x, bool) and STEP_S[0] <= x <= STEP_S[1]:
            out.append(float(x))
    return out


def key_of(r: Mapping[str, Any]) -> tuple[str, str, str]:
    return (
        str(r.get("scenario") or r.get("workload") or "?"),
        str(r.get("size") or ""),
        str(r.get("label") or ""),
    )


def ratio_interval(
    old: Sequence[float], new: Sequence[float], *, resamples: int = RESAMPLES, seed: int = 0
) -> tuple[float, float | None, float | None]:
    """median(new) / median(old), and its interval from resampling each side independently."""
    import numpy as np

    a = np.asarray(old, dtype=np.float64)
    b = np.asarray(new, dtype=np.float64)
    point = float(np.median(b) / np.median(a))
    if a.size < MIN_SAMPLES or b.size < MIN_SAMPLES:
        return point, None, None
    rng = np.random.default_rng(seed)
    ratios = np.empty(resamples)
    # In chunks: 2000 resamples of 10^5 samples at once would be gigabytes.
    chunk = max(1, min(resamples, 4_000_000 // max(a.size, b.size)))
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        ma = np.median(a[rng.integers(0, a.size, size=(stop - start, a.size))], axis=1)
        mb = np.median(b[rng.integers(0, b.size, size=(stop - start, b.size))], axis=1)
        ratios[start:stop] = mb / ma
    tail = (1.0 - CONFIDENCE) / 2
    low, high = np.quantile(ratios, [tail, 1.0 - tail])
    return point, float(low), float(high)


def verdict(ratio: float, low: float | None, high: float | None) -> str:
    if low is not None and low > 1.0 and ratio >= 1.0 + MIN_CHANGE:
        return "slower"
    if high is not None and high < 1.0 and ratio <= 1.0 / (1.0 + MIN_CHANGE):
        return "faster"
    return "within noise"


def compare_results(old: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]]) -> list[Change]:
    """Each configuration measured (status ok, with samples) in both, in the new file's order."""
    before = {key_of(r): s for r in old if r.get("status", "ok") == "ok" and (s := _samples(r))}
    changes = []
    seen = set()
    for r in new:
        k = key_of(r)
        s = _samples(r)
        if k in seen or k not in before or not s or r.get("status", "ok") != "ok":
            continue
        seen.add(k)
        point, low, high = ratio_interval(before[k], s)
        old_median = float(sorted(before[k])[len(before[k]) // 2])
        new_median = float(sorted(s)[len(s) // 2])
        changes.append(Change(k, old_median, new_median, point, low, high, verdict(point, low, high)))
    return changes


def _known(pairs: Any) -> dict[str, str]:
    """The version-like entries of a mapping, as text (anything else a file holds is ignored)."""
    if not isinstance(pairs, Mapping):
        return {}
    return {
        str(k): str(v)
        for k, v in pairs.items()
        if k in VERSION_NAMES and isinstance(v, str | int | float) and v != ""
    }


def versions_of(environment: Mapping[str, Any], results: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """A file's versions: its environment's, then what its results recorded (driver, runtime, UUID)."""
    out = _known(environment)
    for r in results:
        cond = r.get("conditions")
        if not isinstance(cond, Mapping):
            continue
        for k, v in _known(cond.get("versions")).items():
            out.setdefault(k, v)
        name = cond.get("device_name")
        if isinstance(name, str) and (cond.get("device") or "cpu") != "cpu":
            out.setdefault("device_name", name)
    # CuPy's distribution name differs between CUDA majors: one name for comparing.
    for k in ("cupy-cuda12x", "cupy-cuda13x"):
        if k in out:
            out.setdefault("cupy", out.pop(k))
    return out


def differing_versions(old: Mapping[str, str], new: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """(name, old, new) for every version that differs or is known on one side only."""
    out = []
    for k in VERSION_NAMES:
        a, b = old.get(k), new.get(k)
        if (a or b) and a != b:
            out.append((VERSION_NAMES[k], a or "—", b or "—"))
    return out
