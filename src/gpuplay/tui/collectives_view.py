"""The Collectives tab: bus bandwidth against message size, from a `gpuplay collectives` sweep.

The sweep runs as its own command in a child process (`python -m gpuplay collectives --format
json`): its ranks own torch.distributed, and the app only reads the JSON it prints.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from rich.markup import escape
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from gpuplay.tui.widgets import CachedPlot

HINT = (
    "Press [b]k[/] to sweep message sizes with local ranks (gloo on the CPU, NCCL on GPUs): "
    "all_reduce, all_gather and broadcast, bus bandwidth as nccl-tests defines it. "
    "Headless and across nodes: gpuplay collectives, torchrun -m gpuplay.collectives."
)


def fmt_bytes(n: float) -> str:
    for unit, size in (("G", 2**30), ("M", 2**20), ("K", 2**10)):
        if n >= size:
            return f"{n / size:g}{unit}"
    return f"{n:g}"


class BandwidthChart(CachedPlot):
    """busbw (GB/s) against message size, one line per collective, sizes on a log2 axis."""

    def show(self, series: Mapping[str, Sequence[tuple[int, float]]], title: str) -> None:
        key = (title, tuple((op, tuple(points)) for op, points in sorted(series.items())))
        if self.unchanged(key):
            return
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title(title)
        sizes = sorted({s for points in series.values() for s, _ in points})
        for op, points in sorted(series.items()):
            if points:
                plt.plot([math.log2(s) for s, _ in points], [v for _, v in points], label=op, marker="dot")
        if sizes:
            ticks = sizes[:: max(1, len(sizes) // 8)]
            plt.xticks([math.log2(s) for s in ticks], [fmt_bytes(s) for s in ticks])
            plt.xlabel("message size")
            plt.ylabel("busbw GB/s")
        self.changed()


class CollectivesView(Vertical):
    def compose(self) -> ComposeResult:
        yield Static(HINT, id="coll-status")
        yield BandwidthChart(id="coll-chart")

    def show(self, status: str, series: Mapping[str, Sequence[tuple[int, float]]], title: str) -> None:
        self.query_one("#coll-status", Static).update(status or HINT)
        self.query_one(BandwidthChart).show(series, title)


def status_line(doc: Mapping[str, object] | None, running: bool, error: str) -> str:
    if running:
        return "[b]sweeping…[/] (local ranks; the chart fills in when the sweep ends)"
    if error:
        return f"[red]collectives failed:[/] {escape(error)}"
    if not doc:
        return HINT
    results = doc.get("results") or []
    assert isinstance(results, list)
    ok = sum(1 for r in results if isinstance(r, dict) and r.get("status") == "ok")
    backend, world = doc.get("backend", "?"), doc.get("world_size", "?")
    return (
        f"{ok} of {len(results)} measurements checked exact · {backend}, {world} ranks · "
        "busbw = algbw × the op's factor (nccl-tests) · press [b]k[/] to sweep again"
    )
