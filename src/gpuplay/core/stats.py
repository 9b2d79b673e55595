"""Robust summaries of timing samples: medians and spread, never a lone mean."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass


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


def summarize(samples: Sequence[float]) -> Summary | None:
    if not samples:
        return None
    s = sorted(samples)
    n = len(s)
    mean = math.fsum(s) / n
    var = math.fsum((x - mean) ** 2 for x in s) / (n - 1) if n > 1 else 0.0
    return Summary(
        n=n,
        median=quantile(s, 0.5),
        mean=mean,
        min=s[0],
        max=s[-1],
        p10=quantile(s, 0.10),
        p25=quantile(s, 0.25),
        p75=quantile(s, 0.75),
        p90=quantile(s, 0.90),
        std=math.sqrt(var),
    )
