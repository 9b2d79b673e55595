"""Regenerate screenshots/ from the real app: real measurements on this machine, driven by Pilot.

python scripts/screenshots.py            # SVGs into screenshots/
python scripts/screenshots.py --png      # also PNGs beside them (needs cairosvg), to look at

Compare shows the NumPy baseline and four PyTorch configurations that differ only in dtype or
AMP: each row and bar must say what makes it different.
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
        for dtype in ("bfloat16", "float64"):
            app.set_lever("dtype", dtype)  # as the palette sets a lever
            await wait_for(pilot, done_with(app, dtype=dtype))
        app.spec = app.spec.replace(dtype="float32", amp="bf16")  # float32 with AMP bf16, in one step
        app.start_measurement()
        await wait_for(pilot, done_with(app, dtype="float32", amp="bf16"))
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
            from svgpng import svg_to_png  # beside this script

            svg_to_png(p.read_text(encoding="utf-8"), str(p.with_suffix(".png")))
