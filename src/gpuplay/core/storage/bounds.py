"""The bounds of every number a user can set, in one place, for files and flags alike.

`float("nan")` passes `x <= 0` checks (every comparison with NaN is false) and infinity passes
`x > 0`: a NaN budget runs for the step cap, an infinite interval freezes a loop. Every number
from a flag or a file goes through `check_number`, which refuses both and anything past an
upper bound no real use needs. The CLI's click types (cli/options.py) use the same bounds.
"""

from __future__ import annotations

import math
import os
from typing import Any

# (low, high), both inclusive. The highs are far past any real use and well short of a hang.
BUDGET_S = (0.001, 3600.0)  # seconds of timed steps per measurement
MAX_STEP_S = (0.001, 3600.0)  # the step limit (and the watchdog's base)
WARMUP = (0, 10_000)
REPEAT = (1, 1_000_000)
SEED = (0, 2**32 - 1)  # NumPy takes any non-negative integer; 32 bits, as most tools take
SAMPLE_INTERVAL_S = (0.05, 60.0)  # telemetry sampling: 20 a second at most, one a minute at least
MONITOR_INTERVAL_S = (0.05, 3600.0)
PROBE_TIMEOUT_S = (0.1, 600.0)
CALIBRATE_BUDGET_S = (0.01, 600.0)


class BoundsError(ValueError):
    """A number that is not finite, not a number, or out of its bounds; the message says which."""


def check_number(name: str, value: Any, bounds: tuple[float, float], *, integer: bool = False) -> Any:
    """`value` if it is a finite number within `bounds`, else a BoundsError naming `name`."""
    lo, hi = bounds
    name = f"{name} " if name else ""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BoundsError(f"{name}must be a number; got {value!r}")
    if integer and not isinstance(value, int):
        raise BoundsError(f"{name}must be a whole number; got {value!r}")
    if not math.isfinite(value):
        raise BoundsError(f"{name}must be a finite number; got {value!r}")
    if not lo <= value <= hi:
        raise BoundsError(f"{name}must be between {_fmt(lo)} and {_fmt(hi)}; got {_fmt(value)}")
    return value


def max_threads() -> int:
    """The most CPU threads a measurement may ask for: this machine's logical cores."""
    return os.cpu_count() or 1


def _fmt(x: float) -> str:
    return f"{x:,}" if isinstance(x, int) else f"{x:g}"
