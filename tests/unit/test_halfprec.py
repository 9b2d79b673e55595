"""The half-precision note reads this CPU's calibrated rates, never its brand."""

from __future__ import annotations

from gpuplay.core.catalogue.halfprec import half_precision_note
from gpuplay.core.measure.roofline import DevicePeaks, Lookup, Measurement


def _load(rates: dict[str, float] | None):
    def load(device: str) -> Lookup:
        if rates is None:
            return Lookup(None, "not calibrated")
        ms = [Measurement("compute", d, "torch", v, "n=1024", 0.01, 3) for d, v in rates.items()]
        return Lookup(DevicePeaks("cpu", "Xeon", {}, "2026-01-01", 1.0, ms), "")

    return load


def test_a_cpu_with_matrix_units_is_not_called_emulated():
    note = half_precision_note("bfloat16", _load({"float32": 250.0, "bfloat16": 1000.0}))
    assert "natively" in note and "emulated" not in note and "4×" in note


def test_a_slow_half_precision_is_called_emulated_with_its_rates():
    note = half_precision_note("float16", _load({"float32": 100.0, "float16": 5.0}))
    assert "emulated and slow" in note and "5 GFLOP/s" in note and "100" in note


def test_without_a_calibration_the_note_says_it_does_not_know():
    assert "not measured yet" in half_precision_note("bfloat16", _load(None))
    assert "not measured yet" in half_precision_note("bfloat16", _load({"float32": 100.0}))
