"""Screenshots of the presenter (`gpuplay demo`) from real measurements on this machine.

    python scripts/talk_screenshots.py [--out screenshots] [--png]

Writes presenter-live.svg (default theme), presenter-projector.svg (the high-contrast theme) and
presenter-fallback.svg (a CUDA step on a machine without one, showing its recorded figure), at
100×30; --png also converts them with cairosvg to look at them.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path

from gpuplay.core.catalogue.scenarios import load_scenarios
from gpuplay.core.reports.decks import load_deck, resolve_deck_path
from gpuplay.tui.presenter import PresenterApp


async def _shoot(app: PresenterApp, steps: int, path: Path, timeout: float = 240.0) -> None:
    async with app.run_test(size=(100, 30)) as pilot:
        for i in range(steps):
            t0 = time.monotonic()
            while app.running is not None or app.step.spec not in {**app.measured, **app.failed}:
                if time.monotonic() - t0 > timeout:
                    raise SystemExit(f"step {i + 1} did not finish in {timeout:.0f} s")
                await asyncio.sleep(0.1)
            if i < steps - 1:
                await pilot.press("right")
        await pilot.pause(0.5)
        app.save_screenshot(path.name, str(path.parent))
        print("wrote", path)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="screenshots")
    ap.add_argument("--png", action="store_true")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sset = load_scenarios()
    question = load_deck(resolve_deck_path("the-7633x-question"), sset, "quick")
    to_gpu = load_deck(resolve_deck_path("numpy-to-gpu"), sset)  # the deck's own sizes: figures apply
    shots = [
        (PresenterApp(question), 3, out / "presenter-live.svg"),
        (PresenterApp(question, theme="projector"), 3, out / "presenter-projector.svg"),
        (PresenterApp(to_gpu, theme="projector"), 3, out / "presenter-fallback.svg"),
    ]
    for app, steps, path in shots:
        asyncio.run(_shoot(app, steps, path))
        if args.png:
            import cairosvg

            cairosvg.svg2png(url=str(path), write_to=str(path.with_suffix(".png")))


if __name__ == "__main__":
    main()
