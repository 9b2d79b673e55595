"""R4 soak: run the live app for a while, flipping controls like a presenter, and watch memory.

Prints RSS at intervals, and the growth of *retained* RSS (caches dropped, garbage
collected, malloc_trim) from the end of warm-up to the end (goal ≤ 20 MB), with the
sizes of every history the app keeps (they must stay bounded), and the Python objects allocated
after the warm-up and still alive at the end (tracemalloc): what the app keeps, without the
allocator's fragmentation and the library code paged in for the first time that RSS also counts.

    python benchmarks/soak.py --minutes 30      # for the record
    python benchmarks/soak.py --minutes 0.5     # a short check
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import random
import time
import tracemalloc
from pathlib import Path

import psutil

from gpuplay.core.reports.report import environment
from gpuplay.tui.app import GpuPlayApp

# Presets stay at 'quick': a published-size scenario legitimately holds GBs of inputs, which
# would hide a leak of a few MB. Every other control, the scenarios and the views are in the mix.
KEYS = ["b", "t", "a", "l", "r", "down", "up", "1", "2", "3", "4"]


def retained_rss(proc: psutil.Process) -> int:
    """RSS with the working set put down: input/reference caches dropped, garbage collected,
    and glibc's free lists returned to the OS. What remains is what the app keeps: a leak
    shows here, a large current scenario does not."""
    import ctypes

    from gpuplay.core.runner import clear_caches

    clear_caches()
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
    return proc.memory_info().rss


def samples_kept(app: GpuPlayApp) -> int:
    return sum(len(r.samples) + len(r.warmup) for r in app.session.results)


def _rss_mb(pid: int | None) -> float | None:
    """The engine process's RSS (it holds torch and the inputs; the app holds neither)."""
    try:
        return psutil.Process(pid).memory_info().rss / 2**20 if pid else None
    except psutil.NoSuchProcess:
        return None


async def warm_up_tour(app: GpuPlayApp, pilot: object) -> None:
    """Every key once, then every scenario once, each measurement awaited: one-off loads (torch's
    kernels, the code view's lexer, the charts, a scenario's first planning) happen before the
    baseline, whatever the machine's speed, and the random walk's first visits are not read as
    growth."""
    from textual.widgets import OptionList

    scenarios = app.query_one("#scenarios", OptionList).option_count
    for key in [*KEYS, *["down"] * (scenarios - 1)]:  # from the top (KEYS ends down, up) to the last
        before = app.session.live_result
        await pilot.press(key)  # type: ignore[attr-defined]
        if key in "1234":
            continue  # a view, not a new measurement
        deadline = time.monotonic() + 20
        while (
            app.session.live_result is None or app.session.live_result is before
        ) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)


async def soak(
    minutes: float,
    interval: float,
    warmup_s: float,
    budget_s: float = 1.0,
    tour: bool = False,
    scenario_dirs: list[Path] | None = None,
) -> dict:
    """`budget_s`: timed seconds per measurement. `tour`: visit every key once before the clock
    starts, so that a short soak's baseline is taken after the one-off loads a long one's is.
    `scenario_dirs`: scenario folders that override the shipped ones by name (the test suite's
    tiny sizes: the same app and keys, each measurement in a fraction of the time)."""
    proc = psutil.Process()
    rng = random.Random(7)
    app = GpuPlayApp(scenario_dirs, budget_s=budget_s, telemetry=True)
    samples = []
    async with app.run_test(size=(160, 45)) as pilot:
        while not app.probed:
            await asyncio.sleep(0.1)
        app.query_one("#scenarios").focus()
        if tour:
            await warm_up_tour(app, pilot)
        t0 = time.monotonic()
        next_mark = t0
        baseline = None
        kept_before = samples_kept(app)
        while time.monotonic() - t0 < minutes * 60:
            await pilot.press(rng.choice(KEYS))
            await asyncio.sleep(interval)
            now = time.monotonic()
            if baseline is None and now - t0 >= warmup_s:
                baseline = retained_rss(proc)
                kept_before = samples_kept(app)
                tracemalloc.start()  # from here on: what is allocated and still alive at the end
                print(f"t={now - t0:7.1f}s retained rss after warm-up {baseline / 2**20:.1f} MiB", flush=True)
            if now >= next_mark:
                rss = proc.memory_info().rss
                samples.append((now - t0, rss))
                print(
                    f"t={now - t0:7.1f}s rss={rss / 2**20:7.1f} MiB results={len(app.session.results)} "
                    f"telemetry_history={len(app.telemetry.sampler.history)} samples={len(app.session.samples)}",
                    flush=True,
                )
                next_mark = now + max(10.0, minutes * 60 / 20)
        app.runs.cancel.set()
        await asyncio.sleep(1.0)  # let the cancelled step finish
        end = retained_rss(proc)
        kept = tracemalloc.get_traced_memory()[0] if tracemalloc.is_tracing() else 0
        tracemalloc.stop()
        out = {
            "rss_growth_mb": (end - (baseline or samples[0][1])) / 2**20,
            "python_growth_mb": kept / 2**20,
            # Kept on purpose (the session's last 500 results, each with its timed steps): a float
            # object and a pointer per step (24 + 8 bytes), and one in its summary's cache key.
            "samples_kept_mb": (samples_kept(app) - kept_before) * 40 / 2**20,
            "results": len(app.session.results),
            "history": len(app.telemetry.sampler.history),
            "history_max": app.telemetry.sampler.history.maxlen,
            "live_samples": len(app.session.samples),
            "engine_rss_mb": _rss_mb(app.engine.pid),
            "engine_restarts": app.engine.restarts,
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--interval", type=float, default=2.0, help="seconds between key presses")
    ap.add_argument(
        "--warmup",
        type=float,
        default=300.0,
        help="seconds before the RSS baseline is taken (every scenario visited, allocator warm)",
    )
    args = ap.parse_args()
    env = environment()
    print(
        f"# soak · {env['cpu']} ({env['cores']} cores) · {args.minutes} min · a key every {args.interval} s"
    )
    out = asyncio.run(soak(args.minutes, args.interval, min(args.warmup, args.minutes * 60 / 3)))
    print(
        f"RSS growth after warm-up: {out['rss_growth_mb']:.1f} MB (goal ≤ 20 MB); Python objects allocated since "
        f"and kept: {out['python_growth_mb']:.1f} MB; results kept {out['results']}; "
        f"telemetry history {out['history']}/{out['history_max']}; live samples {out['live_samples']}"
    )


if __name__ == "__main__":
    main()
