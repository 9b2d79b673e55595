"""Whether this CPU computes half precision natively, from what `gpuplay calibrate` measured.

A CPU's brand says little: recent Xeons run bfloat16 matmuls on AMX tiles at several times
their float32 rate, older ones and most desktop parts convert every element and run slower
than float32. The calibration cache holds each dtype's matmul rate on this machine; the note
reads the ratio, and says so when there is nothing measured to read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

NATIVE_RATIO = 1.0  # at least float32's rate: matrix units (AMX, SME) or native vector FMAs
EMULATED_RATIO = 0.5  # under half float32's rate: converted element by element


def half_precision_note(dtype: str, load: Callable[[str], Any] | None = None) -> str:
    """One line on `dtype` matmul speed on this CPU, from the calibrated rates."""
    if load is None:
        from gpuplay.core.measure.roofline import load_peaks

        load = load_peaks
    lookup = load("cpu")
    peaks = getattr(lookup, "peaks", None)
    half = peaks.compute(dtype) if peaks is not None else None
    single = peaks.compute("float32") if peaks is not None else None
    if half is None or single is None or single.value <= 0:
        return (
            f"{dtype} on this CPU: native or emulated is not measured yet "
            f"(gpuplay calibrate measures {dtype} against float32 matmul)"
        )
    ratio = half.value / single.value
    rates = f"calibrated matmul {half.value:,.0f} GFLOP/s vs float32 {single.value:,.0f} ({ratio:.2g}×)"
    if ratio >= NATIVE_RATIO:
        return f"{dtype} runs natively on this CPU: {rates}"
    if ratio < EMULATED_RATIO:
        return f"{dtype} is emulated and slow on this CPU: {rates}"
    return f"{dtype} on this CPU: {rates}"
