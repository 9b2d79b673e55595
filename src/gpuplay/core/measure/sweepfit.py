"""A model per sweep series, and where two series cross.

Each series is fitted with ``time = floor + work / rate``: the floor is what a step costs
however small it is (Python dispatch, a kernel launch, a sync), the rate the throughput it
tends to at large sizes. The fit minimises *relative* residuals, because a sweep's times
span orders of magnitude and plain least squares would fit the largest size only.

Crossovers are interpolated in log-log space between the two sizes where the ratio of the
two series' medians changes sign; the fits predict one too, over a wider range, so a
reader sees whether the model explains what was measured.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Fit:
    floor_s: float  # seconds a step costs at zero work
    rate: float | None  # work per second (flop/s or byte/s); None: time did not grow with work
    unit: str  # "GFLOP/s" or "GB/s"
    n: int  # points fitted
    rms_rel: float  # root-mean-square relative residual of the fit

    def predict(self, work: float) -> float:
        return self.floor_s + (work / self.rate if self.rate else 0.0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "floor_s": self.floor_s,
            "rate": self.rate / 1e9 if self.rate else None,
            "unit": self.unit,
            "points": self.n,
            "rms_rel_residual": self.rms_rel,
            "model": "time = floor + work / rate",
        }


def fit_floor_rate(works: Sequence[float], times: Sequence[float], unit: str) -> Fit | None:
    """Least squares of ``t = floor + work/rate`` weighted by 1/t² (relative residuals).

    The floor is kept >= 0 (a negative overhead has no meaning: the fit is redone through
    the origin) and a rate that comes out <= 0 means the times did not grow with the work
    over this range: the floor alone (their weighted mean) is the model then. None with
    fewer than two usable points.
    """
    pts = [
        (w, t)
        for w, t in zip(works, times, strict=True)
        if math.isfinite(w) and math.isfinite(t) and w >= 0 and t > 0
    ]
    if len(pts) < 2:
        return None
    wt = [1.0 / (t * t) for _, t in pts]
    sw = math.fsum(wt)
    sx = math.fsum(g * w for g, (w, _) in zip(wt, pts, strict=True))
    sy = math.fsum(g * t for g, (_, t) in zip(wt, pts, strict=True))
    sxx = math.fsum(g * w * w for g, (w, _) in zip(wt, pts, strict=True))
    sxy = math.fsum(g * w * t for g, (w, t) in zip(wt, pts, strict=True))
    det = sw * sxx - sx * sx
    floor, slope = (sy / sw, 0.0)
    if det > 0 and math.isfinite(det):
        slope = (sw * sxy - sx * sy) / det
        floor = (sy - slope * sx) / sw
        if floor < 0:  # through the origin: all of the time is work
            floor, slope = 0.0, (sxy / sxx if sxx > 0 else 0.0)
    if slope <= 0 or not math.isfinite(slope):
        floor, slope = sy / sw, 0.0
    rate = 1.0 / slope if slope > 0 else None
    fit = Fit(floor_s=floor, rate=rate, unit=unit, n=len(pts), rms_rel=0.0)
    resid = [(fit.predict(w) - t) / t for w, t in pts]
    return Fit(floor, rate, unit, len(pts), math.sqrt(math.fsum(r * r for r in resid) / len(resid)))


def crossing(xs: Sequence[float], a: Sequence[float], b: Sequence[float]) -> tuple[float | None, int]:
    """Where series `a` stops being slower than `b` (or the reverse), interpolated in log-log.

    Returns (the last crossing's x or None, how many times the sign changed). The last one is
    the one that holds at the largest sizes; more than one says the two are near parity.
    """
    logs = [
        (math.log(x), math.log(ta) - math.log(tb))
        for x, ta, tb in zip(xs, a, b, strict=True)
        if x > 0 and ta > 0 and tb > 0
    ]
    last: float | None = None
    changes = 0
    for (x0, d0), (x1, d1) in zip(logs, logs[1:], strict=False):
        if d0 == 0 and d1 == 0:
            continue
        if d0 == 0 or d0 * d1 < 0:
            changes += 1
            last = math.exp(x0 if d0 == 0 else x0 + (x1 - x0) * d0 / (d0 - d1))
    return last, changes


def predicted_crossing(
    lo: float,
    hi: float,
    time_a: Callable[[float], float],
    time_b: Callable[[float], float],
    points: int = 256,
) -> float | None:
    """The fitted models' crossing over [lo, hi] on a log grid (the last one), or None."""
    if not (0 < lo < hi) or not (math.isfinite(lo) and math.isfinite(hi)):
        return None
    step = (math.log(hi) - math.log(lo)) / (points - 1)
    xs = [math.exp(math.log(lo) + i * step) for i in range(points)]
    at, _ = crossing(xs, [time_a(x) for x in xs], [time_b(x) for x in xs])
    return at
