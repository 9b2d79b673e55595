"""Does the live UI perturb what it measures, and does it stay responsive? (a benchmark)

1. The same scenario measured headless (core `run`) and inside the live app
   (headless Textual via run_test), alternating, both measured in an engine process;
   prints the ratio of medians
   (goal <= 1.05).
2. Keypress-to-repaint latency while a heavy CPU workload runs in the app's
   worker: a tab-switch key is posted every 250 ms and timed until the frame
   that shows it has been drawn (goal p95 <= 50 ms). Run once with the app's
   thread policy (cores-1 threads for the workload) and once with every core.

    python benchmarks/ui_perturbation.py [--scenario matmul] [--preset quick]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import textual

from gpuplay.core.engine import measure
from gpuplay.core.hw.system import cpu_count
from gpuplay.core.measure import stats
from gpuplay.core.reports.report import environment
from gpuplay.tui.app import GpuPlayApp
from gpuplay.tui.controls import live_threads


class ProbeApp(GpuPlayApp):
    """The real app, recording when a tab switch has been painted."""

    def __init__(self, *a, threads: int | None = None, **k) -> None:
        super().__init__(*a, **k)
        self.painted: list[float] = []
        self.threads_override = threads

    def _make_spec(self, base=None):
        spec = super()._make_spec(base)
        return spec.replace(threads=self.threads_override) if self.threads_override else spec

    def action_tab(self, tab: str) -> None:
        super().action_tab(tab)
        self.call_after_refresh(lambda: self.painted.append(time.monotonic()))


async def live_median(scenario: str, preset: str, backend: str, budget: float) -> tuple[float, object]:
    app = ProbeApp(preset=preset, budget_s=budget, telemetry=True)
    async with app.run_test(size=(160, 45)) as pilot:
        app.choose_scenario(scenario)
        while app.session.live_result is None or app.session.live_result.spec.scenario != scenario:
            await asyncio.sleep(0.05)
        if backend != "numpy":
            await pilot.press("b")
            while app.session.live_result is None or app.session.live_result.spec.backend != backend:
                await asyncio.sleep(0.05)
        return app.session.live_result.median, app.session.live_result.spec


async def latency(threads: int, presses: int, backend: str) -> list[float]:
    app = ProbeApp(preset="published", budget_s=600.0, telemetry=True, threads=threads)
    app.session.step_limit = 60.0
    out = []
    async with app.run_test(size=(160, 45)) as pilot:
        while not app.probed:
            await asyncio.sleep(0.05)
        if backend == "torch":
            await pilot.press("b")
        while app.session.phase not in ("timed",):  # heavy steps are running
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)
        for i in range(presses):
            before = len(app.painted)
            t0 = time.monotonic()
            app.post_message(_key("2" if i % 2 == 0 else "1"))
            while len(app.painted) == before:
                await asyncio.sleep(0.001)
            out.append(app.painted[-1] - t0)
            await asyncio.sleep(0.25)
        app.runs.cancel.set()
    return out


def _key(k: str):
    from textual import events

    return events.Key(k, k)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenario", default="matmul")
    ap.add_argument("--preset", default="quick")
    ap.add_argument("--backend", default="torch")
    ap.add_argument("--budget", type=float, default=2.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--presses", type=int, default=40)
    args = ap.parse_args()
    env = environment()
    print(
        f"# UI perturbation · {env['cpu']} ({env['cores']} cores) · torch {env.get('torch')} · "
        f"textual {textual.__version__}"
    )

    headless, live = [], []
    for _ in range(args.rounds):
        m, spec = asyncio.run(live_median(args.scenario, args.preset, args.backend, args.budget))
        live.append(m)
        headless.append(measure(spec).median)  # the very spec the app ran, in an engine as `gpuplay run` does
    ratio = statistics.median(live) / statistics.median(headless)
    print(
        f"{args.scenario} ({args.preset}) on {args.backend}, {spec.threads} thread(s): "
        f"headless {statistics.median(headless) * 1e3:.3f} ms, in the live app "
        f"{statistics.median(live) * 1e3:.3f} ms → ratio {ratio:.3f} (goal ≤ 1.05)"
    )

    for threads, why in ((live_threads(cpu_count()), "the app's policy"), (cpu_count(), "every core")):
        lat = asyncio.run(latency(threads, args.presses, args.backend))
        s = stats.summarize(lat)
        print(
            f"keypress→repaint during matmul 4096² on {args.backend}, {threads} worker thread(s) ({why}): "
            f"p50 {s.median * 1e3:.1f} ms, p95 {stats.quantile(sorted(lat), 0.95) * 1e3:.1f} ms, "
            f"max {s.max * 1e3:.1f} ms over {s.n} presses (goal p95 ≤ 50 ms)"
        )


if __name__ == "__main__":
    main()
