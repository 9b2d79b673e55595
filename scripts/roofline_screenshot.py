"""Render the roofline chart with real results on this machine into screenshots/roofline.svg/.png.

python scripts/roofline_screenshot.py           # uses the cached peaks (run `gpuplay calibrate` first)

Runs a handful of workloads on NumPy and torch (CPU, and cuda:0 where there is one), then shows
them in a tiny Textual app holding only the RooflineChart, and saves what it draws.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from textual.app import App, ComposeResult

from gpuplay.core.measure.roofline import load_peaks
from gpuplay.core.runner import run
from gpuplay.core.spec import RunSpec
from gpuplay.core.studies.compare import attach_baselines
from gpuplay.tui.roofline import RooflineChart, cached_peaks

OUT = Path(__file__).resolve().parents[1] / "screenshots"
CASES = [
    ("matmul", {"n": 1024}),
    ("elementwise", {"n": 4_000_000}),
    ("fft2d", {"n": 1024}),
    ("heat", {"n": 512, "steps": 20}),
    ("batched_matmul", {"batch": 32, "n": 128}),
]


class RooflineApp(App[None]):
    def __init__(self, rows: list, peaks: dict) -> None:
        super().__init__()
        self.rows, self.peaks = rows, peaks

    def compose(self) -> ComposeResult:
        yield RooflineChart(id="roofline")

    def on_mount(self) -> None:
        self.query_one(RooflineChart).show(self.rows, self.peaks)


async def main() -> Path:
    if load_peaks("cpu").peaks is None:
        sys.exit("no cached CPU peaks: run `gpuplay calibrate` first")
    results = []
    for workload, params in CASES:
        for backend in ("numpy", "torch"):
            spec = RunSpec.make(workload, params, scenario=workload, backend=backend, budget_s=0.5)
            r = run(spec)
            print(f"{spec.label()}: {r.status} {r.gflops and round(r.gflops, 2)} GFLOP/s", file=sys.stderr)
            results.append(r)
    rows = attach_baselines(results)
    peaks = cached_peaks({"cpu", *(r.spec.device for r in results)})
    app = RooflineApp(rows, peaks)
    async with app.run_test(size=(110, 32)) as pilot:
        await pilot.pause()
        path = Path(app.save_screenshot("roofline.svg", str(OUT)))
    try:
        import cairosvg

        cairosvg.svg2png(url=str(path), write_to=str(path.with_suffix(".png")))
    except ImportError:
        print("cairosvg not installed: SVG only", file=sys.stderr)
    return path


if __name__ == "__main__":
    print(asyncio.run(main()))
