"""Lists of floats as text, exact and cheap: float64 little-endian bytes in base64.

A result's step timings number tens of thousands at a sweep point of microsecond steps; as JSON
numbers they took ~6 ms to write and ~7 ms to read per 10,000. Packed, every bit is kept (NaN and
±inf included) at ~1 % of that cost and about half the size. The engine's answers carry timings
this way (engine/messages.py, protocol 4) and so do session-log lines (core/reports/sessionlog.py, log
format 2). Little-endian always: a log is a file another machine may read.
"""

from __future__ import annotations

import base64
import binascii
import sys
from array import array
from typing import Any

# A result's fields that hold step timings (RunResult.to_dict's keys).
TIMING_KEYS = ("samples_s", "warmup_s")


def pack(values: Any) -> dict[str, str]:
    """`values` (floats) as {"f64": base64 of their float64 little-endian bytes}."""
    a = array("d", values)
    if sys.byteorder != "little":
        a.byteswap()
    return {"f64": base64.b64encode(a.tobytes()).decode("ascii")}


def unpack(data: Any) -> list[float]:
    """`pack`'s floats back. Raises ValueError for anything that is not whole float64s."""
    if not isinstance(data, dict) or not isinstance(data.get("f64"), str):
        raise ValueError("packed timings expected")
    try:
        raw = base64.b64decode(data["f64"], validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("packed timings are not base64") from None
    if len(raw) % 8:
        raise ValueError("packed timings cut short")
    out = array("d")
    out.frombytes(raw)
    if sys.byteorder != "little":
        out.byteswap()
    return out.tolist()


def is_packed(value: Any) -> bool:
    return isinstance(value, dict) and "f64" in value
