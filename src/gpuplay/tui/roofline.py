"""The roofline chart: log-log, FLOP/byte against achieved GFLOP/s, the measured roofs drawn
and the session's results as points.

    chart = RooflineChart(id="roofline")
    chart.show(rows)                 # peaks read from the calibration cache
    chart.show(rows, peaks)          # or given: {device: DevicePeaks}

Rows whose device was never calibrated are still placed (intensity and achieved rate need
no calibration); the title then says which roofs are missing and how to measure them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gpuplay.core.measure.roofline import DevicePeaks, load_peaks, normalize_device
from gpuplay.core.studies.compare import Row
from gpuplay.tui.widgets import CachedPlot

ROOF_COLORS = ("cyan", "magenta", "yellow", "green", "orange")
POINT_COLORS = ("red", "blue", "green", "orange", "magenta", "cyan", "yellow", "white")
MARKERS = ("●", "◆", "▲", "■", "✚", "★")


def cached_peaks(devices: Iterable[str]) -> dict[str, DevicePeaks]:
    """The calibration cache of each device that has one."""
    out = {}
    for d in devices:
        lookup = load_peaks(normalize_device(d))
        if lookup.peaks is not None:
            out[normalize_device(d)] = lookup.peaks
    return out


def _points(rows: Sequence[Row]) -> list[tuple[str, str, float, float, str, str]]:
    """(configuration, device, FLOP/byte, GFLOP/s, workload, dtype) of each result with FLOPs, bytes, a median."""
    out = []
    for row in rows:
        r = row.result
        if not r.usable or not r.flops or not r.bytes or not r.gflops:
            continue
        dtype = r.compute_dtype or r.spec.dtype
        config = f"{r.spec.label(with_dtype=False)} {dtype}"
        workload = r.spec.scenario or r.spec.workload
        out.append((config, normalize_device(r.spec.device), r.flops / r.bytes, r.gflops, workload, dtype))
    return out


def above_roofs(
    points: Sequence[tuple[str, str, float, float, str, str]], peaks: Mapping[str, DevicePeaks]
) -> list[str]:
    """The devices with a point above their stored roof: a peak is a maximum, so that roof was
    measured low and is stale (the point is not a fraction over 100 % of it)."""
    out = []
    for _c, device, x, y, _w, dtype in points:
        pk = peaks.get(device)
        bw = pk.bandwidth() if pk is not None else None
        if pk is None or bw is None:
            continue
        top = pk.compute(dtype)
        roof = min(top.value, x * bw.value) if top is not None else x * bw.value
        if y > roof and device not in out:
            out.append(device)
    return out


def _geom(lo: float, hi: float, n: int = 24) -> list[float]:
    a, b = math.log10(lo), math.log10(hi)
    return [10 ** (a + (b - a) * i / (n - 1)) for i in range(n)]


def _decades(lo: float, hi: float) -> tuple[list[float], list[str]]:
    ticks = list(range(math.ceil(math.log10(lo)), math.floor(math.log10(hi)) + 1))
    return [float(t) for t in ticks], [_short(10.0**t) for t in ticks]


def _short(v: float) -> str:
    if v >= 1e3:
        return f"{v / 1e3:g}k"
    return f"{v:g}"


class RooflineChart(CachedPlot):
    """Log-log roofline; `show(rows, peaks)` redraws only when the data changed."""

    _shown: tuple[Sequence[Row], Mapping[str, DevicePeaks] | None] | None = None

    def on_resize(self, _event: Any) -> None:
        # The labels' offsets and the collision test are in character cells: drawn at a size the
        # layout had not settled on yet (a loaded machine), they stayed one cell off until the
        # data changed (the Compare snapshot flaked). A new size redraws them.
        if self._shown is not None:
            self.show(*self._shown)

    def show(self, rows: Sequence[Row], peaks: Mapping[str, DevicePeaks] | None = None) -> None:
        self._shown = (rows, peaks)
        points = _points(rows)
        if peaks is None:
            peaks = cached_peaks({p[1] for p in points} or {"cpu"})
        key = (
            tuple(points),
            tuple((d, p.measured_at) for d, p in sorted(peaks.items())),
            self.size.width,
            self.size.height,
        )
        if self.unchanged(key):
            return
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        # plotext's own log scale mishandles limits; plot log10 values with decade ticks instead.
        plt.xlabel("arithmetic intensity, FLOP/byte (log)")
        plt.ylabel("GFLOP/s (log)")
        xs = [p[2] for p in points]
        ys = [p[3] for p in points]
        bws = [b.value for pk in peaks.values() if (b := pk.bandwidth()) is not None]
        tops = [m.value for pk in peaks.values() for m in pk.measurements if m.kind == "compute"]
        dtypes = {p[5] for p in points} or {"float32"}
        tops = [
            m.value
            for pk in peaks.values()
            for m in pk.measurements
            if m.kind == "compute" and m.name in dtypes
        ]
        ridges = [t / b for t in tops for b in bws]
        # The axes span the points and the roofs' corners, with a margin each way.
        x_lo = min([*xs, *ridges] or [0.1]) / 4
        x_hi = max([*xs, *ridges] or [100.0]) * 4
        y_lo = min([*ys, *(x_lo * b for b in bws)] or [0.1]) / 2
        y_hi = max([*ys, *tops] or [100.0]) * 2
        lg = math.log10
        grid = _geom(x_lo, x_hi, 48)
        legend = 0  # plotext writes one legend line per labelled series, top left inside the frame
        for i, (device, pk) in enumerate(sorted(peaks.items())):
            bw = pk.bandwidth()
            if bw is None:
                continue
            color = ROOF_COLORS[i % len(ROOF_COLORS)]
            shown = sorted(
                (
                    m
                    for m in pk.measurements
                    if m.kind == "compute" and m.name in dtypes and m is pk.compute(m.name)
                ),
                key=lambda m: -m.value,
            )
            top = shown[0].value if shown else None
            roof = [min(x * bw.value, top) if top else x * bw.value for x in grid]
            plt.plot(
                [lg(x) for x in grid],
                [lg(y) for y in roof],
                color=color,
                marker="braille",
                label=f"{device} roof: {bw.value:.3g} GB/s",
            )
            legend += 1
            for m in shown:
                ridge = m.value / bw.value
                part = [x for x in grid if x >= ridge]
                if part:
                    name = f"{device} {m.name} {m.value:.3g} GFLOP/s"
                    plt.plot(
                        [lg(x) for x in part],
                        [lg(m.value)] * len(part),
                        color=color,
                        marker="braille",
                        label=name,
                    )
                    legend += 1
        # One colour and marker per configuration (legend); the workload written beside each point.
        # Two results in one character cell would hide each other: the later one moves one cell
        # right (a few % in intensity, never in rate), and the cell group is labelled once.
        width, height = (self.size.width or 100), (self.size.height or 30)
        configs = list(dict.fromkeys(p[0] for p in points))
        # The legend's lines are kept clear of points and labels (a label written over a legend
        # line read "…floatmatmul"): the y axis grows so that the data starts
        # below them. canvas: its rows, less title, frame, ticks and axis label.
        canvas, reserved = max(8, height - 5), legend + len(configs) + 1
        if reserved < canvas:
            span = lg(y_hi) - lg(y_lo)
            y_hi = 10 ** (lg(y_hi) + span * reserved / (canvas - reserved))
        cell_x = (lg(x_hi) - lg(x_lo)) / max(20, width - 10)  # the canvas, less ticks and frame
        cell_y = (lg(y_hi) - lg(y_lo)) / max(8, height - 6)
        placed: list[tuple[float, float]] = []
        labels: list[tuple[float, float, str, str]] = []

        def near(x: float, y: float, others: Iterable[tuple[float, float]], span: float = 1.0) -> bool:
            return any(abs(x - ox) < span * cell_x and abs(y - oy) < 1.2 * cell_y for ox, oy in others)

        for j, config in enumerate(configs):
            color = POINT_COLORS[j % len(POINT_COLORS)]
            px, py = [], []
            for p in (p for p in points if p[0] == config):
                x, y = lg(p[2]), lg(p[3])
                for _ in range(4):
                    if not near(x, y, placed, 1.2):
                        break
                    x += 1.2 * cell_x
                placed.append((x, y))
                px.append(x)
                py.append(y)
                text = p[4][:12]
                same = [
                    i for i, (lx, ly, t, _c) in enumerate(labels) if t == text and near(lx, ly, [(x, y)], 6)
                ]
                if same:  # one label for a group of the same workload, after its last marker
                    labels[same[0]] = (
                        max(x, labels[same[0]][0]),
                        labels[same[0]][1],
                        text,
                        labels[same[0]][3],
                    )
                else:
                    labels.append((x, y, text, color))
            plt.scatter(px, py, marker=MARKERS[j % len(MARKERS)], color=color, label=config[:30])
        drawn: list[tuple[float, float, float]] = []  # (y, first x, last x) of each label written
        for x, y, text, color in labels:  # two cells right of the marker
            x0, x1 = x + 2 * cell_x, x + (3 + len(text)) * cell_x
            for ly in (y, y + cell_y, y - cell_y):  # a label over another: a row up or down, or none
                if not any(abs(ly - oy) < cell_y and x0 < o1 and o0 < x1 for oy, o0, o1 in drawn):
                    drawn.append((ly, x0, x1))
                    plt.text(text, x=x0, y=ly, color=color, background="default", alignment="left")
                    break
        plt.xlim(lg(x_lo), lg(x_hi))
        plt.ylim(lg(y_lo), lg(y_hi))
        plt.xticks(*_decades(x_lo, x_hi))
        plt.yticks(*_decades(y_lo, y_hi))
        missing = sorted({p[1] for p in points} - set(peaks))
        title = "roofline: measured peaks, this session's results"
        stale = above_roofs(points, peaks)
        if missing:
            title = f"{', '.join(missing)} not calibrated: run gpuplay calibrate"
        elif stale:
            title = f"stale roof: a result is above the roof of {', '.join(stale)}: rerun gpuplay calibrate"
        elif not points:
            title = "roofline: no finished result with FLOPs yet"
        plt.title(title)
        self.changed()


def describe(rows: Sequence[Row], peaks: Mapping[str, DevicePeaks]) -> list[dict[str, Any]]:
    """What the chart shows, as data (for tests and exports)."""
    return [
        {
            "configuration": c,
            "device": d,
            "intensity": x,
            "gflops": y,
            "workload": w,
            "calibrated": d in peaks,
        }
        for c, d, x, y, w, _dtype in _points(rows)
    ]
