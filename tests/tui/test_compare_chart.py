"""The Compare tab's bar chart shows only the bars it has rows for: plotext draws the rest over
each other and keeps one of two labels in hashing order (a different chart in every process)."""

from __future__ import annotations

from types import SimpleNamespace

from gpuplay.tui.widgets import bars_that_fit


def row(backend: str, speedup: float, median: float):
    spec = SimpleNamespace(backend=backend)
    return SimpleNamespace(speedup=speedup, result=SimpleNamespace(spec=spec, median=median))


def test_the_baseline_and_the_fastest_configurations_keep_their_order():
    rows = [row("numpy", 1.0, 0.02), row("torch", 2.0, 0.01), row("torch", 5.3, 0.004),
            row("torch", 4.2, 0.005), row("torch", 3.5, 0.006)]  # fmt: skip
    shown = bars_that_fit(rows, 4, speedups=True)
    assert [r.speedup for r in shown] == [1.0, 5.3, 4.2, 3.5]  # torch 2.0× is the one left out


def test_by_median_the_quickest_stay_and_room_enough_keeps_all():
    rows = [row("numpy", None, 0.02), row("torch", None, 0.01), row("torch", None, 0.03)]
    assert [r.result.median for r in bars_that_fit(rows, 2, speedups=False)] == [0.02, 0.01]
    assert bars_that_fit(rows, 3, speedups=False) == rows
    assert bars_that_fit(rows, 0, speedups=False) == rows  # not laid out yet: nothing dropped
