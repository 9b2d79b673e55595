"""Regenerate screenshots/ from the real app: real measurements on this machine, driven by Pilot.

python scripts/screenshots.py            # SVGs into screenshots/
python scripts/screenshots.py --png      # also PNGs beside them (needs cairosvg), to look at
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path

from gpuplay.tui.app import GpuPlayApp

OUT = Path(__file__).resolve().parents[1] / "screenshots"


async def wait_for(pilot, predicate, timeout=120.0):
    t0 = time.monotonic()
    while not predicate():
        if time.monotonic() - t0 > timeout:
            raise TimeoutError("the app did not reach the expected state")
        await asyncio.sleep(0.1)
    await pilot.pause()


def done_with(app, **fields):
    return lambda: (
        app.session.live_result is not None
        and app.session.live_result.spec == app.spec
        and all(getattr(app.spec, k) == v for k, v in fields.items())
        and not app.session.baseline_running
    )


async def main(size: tuple[int, int], prefix: str) -> list[Path]:
    app = GpuPlayApp(export_dir=OUT, budget_s=1.5)
    shots = []
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.session.live_result is not None)
        await pilot.press("b")  # NumPy → PyTorch
        await wait_for(pilot, done_with(app, backend="torch"))
        await pilot.press("a", "a")  # AMP bf16
        await wait_for(pilot, done_with(app, amp="bf16"))
        await asyncio.sleep(1.2)  # a telemetry sample or two
        await pilot.pause()
        for name, key in (("live", None), ("compare", "2"), ("code", "3"), ("telemetry", "4")):
            if key:
                await pilot.press(key)
                await pilot.pause()
            shots.append(Path(app.save_screenshot(f"{prefix}{name}.svg", str(OUT))))
        await pilot.press("1", "question_mark")
        await pilot.pause()
        shots.append(Path(app.save_screenshot(f"{prefix}help.svg", str(OUT))))
    return shots


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--png", action="store_true")
    args = ap.parse_args()
    OUT.mkdir(exist_ok=True)
    paths = asyncio.run(main((160, 45), "")) + asyncio.run(main((80, 24), "small-"))
    for p in paths:
        print(p)
        if args.png:
            import cairosvg

            cairosvg.svg2png(url=str(p), write_to=str(p.with_suffix(".png")), output_width=1600)
