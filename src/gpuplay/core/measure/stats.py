"""Robust summaries of timing samples: medians and spread, never a lone mean."""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile (NumPy's default 'linear' method) of sorted data."""
    n = len(sorted_values)
    if n == 0:
        return math.nan
    pos = (n - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, n - 1)
    frac = pos - lo
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * frac


@dataclass(frozen=True)
class Summary:
    n: int
    median: float
    mean: float
    min: float
    max: float
    p10: float
    p25: float
    p75: float
    p90: float
    std: float

    @property
    def iqr(self) -> float:
        return self.p75 - self.p25

    @property
    def rel_iqr(self) -> float:
        """IQR over median: the spread a reader should attach to the median."""
        return self.iqr / self.median if self.median > 0 else math.nan

    def to_dict(self) -> dict[str, float]:
        d = asdict(self)
        d["iqr"] = self.iqr
        return d


# From this many samples on, NumPy sorts and sums where it is loaded already (a sweep point's
# 2,500-30,000 timings: ~6.5 ms in Python per 30,000, ~1.5 ms in NumPy); a summary never imports it
# (a NumPy run's front end plans and prints without NumPy).
VECTOR_MIN = 256


def summarize(samples: Sequence[float]) -> Summary | None:
    if not samples:
        return None
    if len(samples) >= VECTOR_MIN and "numpy" in sys.modules:
        return _summarize_numpy(samples)
    s = sorted(samples)
    n = len(s)
    mean = math.fsum(s) / n
    # each square as d * d, the very product NumPy's path sums (x ** 2 is libm's pow, which is not
    # always the rounded product): fsum's sum of the same terms is the same in any order
    var = math.fsum((x - mean) * (x - mean) for x in s) / (n - 1) if n > 1 else 0.0
    return _summary(s, mean, math.sqrt(var))


def _summarize_numpy(samples: Sequence[float]) -> Summary:
    """The same figures as the plain path, bit for bit: the quantiles read from the same sorted
    values; the mean and spread math.fsum's of the same terms (NumPy's pairwise sums were a unit
    in the last place apart at times, so a result's mean hung on what the process had imported)."""
    import numpy as np

    a = np.sort(np.asarray(samples, dtype=np.float64))
    mean = math.fsum(a.data) / len(a)  # the buffer's floats: no list of them made
    d = a - mean
    return _summary(a, mean, math.sqrt(math.fsum((d * d).data) / (len(a) - 1)))


def _summary(s: Any, mean: float, std: float) -> Summary:
    """A summary of the sorted values `s` (a list or a NumPy array) with their mean and spread."""
    return Summary(
        n=len(s),
        median=float(quantile(s, 0.5)),
        mean=mean,
        min=float(s[0]),
        max=float(s[-1]),
        p10=float(quantile(s, 0.10)),
        p25=float(quantile(s, 0.25)),
        p75=float(quantile(s, 0.75)),
        p90=float(quantile(s, 0.90)),
        std=std,
    )


# -- paired speedups -------------------------------------------------------------------------
# A speedup is the ratio of two noisy figures. Measured in separate runs, the machine's state
# drifts between them (another process, the clock, the allocator); measured as interleaved
# pairs, what drifts hits both sides of a pair alike and cancels in its ratio (pyperf and asv
# alternate their A and B runs for the same reason). The point is the median of the per-pair
# ratios; its interval a percentile bootstrap over the pairs.

PAIRED_METHOD = "median of per-pair ratios (ABBA-interleaved pairs), 95% bootstrap interval"
WIDE_INTERVAL = 1.2  # high/low above this: the figure is marked unstable where it is read
BOOTSTRAP_RESAMPLES = 2000
MIN_PAIRS_FOR_INTERVAL = 3


@dataclass(frozen=True)
class PairedSpeedup:
    point: float  # baseline time / this configuration's time, median over pairs
    low: float | None  # the 95% interval; None with too few pairs to have one
    high: float | None
    pairs: int
    method: str = PAIRED_METHOD

    @property
    def width_ratio(self) -> float | None:
        """high/low: 1.0 for a perfectly steady pair of measurements."""
        if self.low is None or self.high is None or self.low <= 0:
            return None
        return self.high / self.low

    @property
    def wide(self) -> bool:
        r = self.width_ratio
        return r is None or r > WIDE_INTERVAL

    @property
    def interval(self) -> list[float] | None:
        return None if self.low is None or self.high is None else [self.low, self.high]

    def reason(self) -> str:
        """Why the figure is marked, in words; '' when it is not."""
        if not self.wide:
            return ""
        if self.low is None:
            return f"only {self.pairs} pair(s): too few for an interval"
        return (
            f"95% interval {self.low:.3g}–{self.high:.3g}× is wide (high/low {self.width_ratio:.2f} > "
            f"{WIDE_INTERVAL}): the machine was noisy or the pairs too few"
        )

    def to_dict(self) -> dict[str, object]:
        return {"point": self.point, "interval": self.interval, "pairs": self.pairs, "method": self.method}

    @classmethod
    def from_dict(cls, d: dict[str, object] | None) -> PairedSpeedup | None:
        if not isinstance(d, dict):
            return None
        try:
            point = _finite(d.get("point"))
            interval = d.get("interval")
            low = high = None
            if isinstance(interval, list | tuple) and len(interval) == 2:
                low, high = _finite(interval[0]), _finite(interval[1])
            pairs = int(d.get("pairs") or 0)  # type: ignore[call-overload]
        except (TypeError, ValueError):
            return None
        if point is None or point <= 0:
            return None
        return cls(point, low, high, max(0, pairs), str(d.get("method") or PAIRED_METHOD)[:200])


def _finite(x: object) -> float | None:
    if x is None:
        return None
    v = float(x)  # type: ignore[arg-type]
    if not math.isfinite(v):
        raise ValueError("not finite")
    return v


def paired_speedup(
    baseline: Sequence[float],
    candidate: Sequence[float],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
) -> PairedSpeedup | None:
    """The speedup of `candidate` over `baseline` from per-pair times (pair i = both sides' i-th).

    Seeded: the same pairs give the same interval. Pairs with a non-positive time are dropped.
    """
    import numpy as np

    n = min(len(baseline), len(candidate))
    if n == 0:
        return None
    b = np.asarray(baseline[:n], dtype=np.float64)
    c = np.asarray(candidate[:n], dtype=np.float64)
    keep = (b > 0) & (c > 0) & np.isfinite(b) & np.isfinite(c)
    ratios = b[keep] / c[keep]
    n = int(ratios.size)
    if n == 0:
        return None
    point = float(np.median(ratios))
    if n < MIN_PAIRS_FOR_INTERVAL:
        return PairedSpeedup(point, None, None, n)
    rng = np.random.default_rng(seed)
    # Resampled in chunks: 2000 × 10^4 pairs would be 160 MB at once.
    chunk = max(1, min(resamples, 4_000_000 // n))
    medians = np.empty(resamples)
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        idx = rng.integers(0, n, size=(stop - start, n))
        medians[start:stop] = np.median(ratios[idx], axis=1)
    tail = (1.0 - confidence) / 2
    low, high = np.quantile(medians, [tail, 1.0 - tail])
    return PairedSpeedup(point, float(low), float(high), n)
