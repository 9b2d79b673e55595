"""Drive the real app at 120×36 with Textual's Pilot, as a person would, for about a minute.

    python app_drive.py SCREEN_DIR SECONDS

Live on torch cuda (NumPy on the CPU first, the baseline), Telemetry, Profile and Compare, an
SVG screenshot of each. Prints one JSON object: first-frame time, results, NVML values seen.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

T_START = time.perf_counter()


async def _until(pilot: Any, cond: Any, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        await pilot.pause(0.2)
    return bool(cond())


def tab_key(tab_id: str) -> str:
    """The key that shows a tab, from the app's own tab order (tabs move; their ids stay)."""
    from gpuplay.tui.tabs import TAB_IDS

    return str(TAB_IDS.index(tab_id) + 1)


def lever_key(name: str) -> str:
    """The key that cycles a lever, from core/catalogue/levers.py (the app's bindings are made from it)."""
    from gpuplay.core.catalogue import levers

    key = levers.get(name).key
    if not key:
        raise LookupError(f"the {name} lever has no key")
    return key


async def drive(shots: Path, seconds: float) -> dict[str, Any]:
    from gpuplay.core.measure.telemetry import gpu_count, query_gpu
    from gpuplay.tui.app import GpuPlayApp

    out: dict[str, Any] = {"size": [120, 36]}
    t_import = time.perf_counter() - T_START
    keys = {t: tab_key(t) for t in ("live", "telemetry", "profile", "compare")}
    app = GpuPlayApp()
    t0 = time.perf_counter()
    end = time.monotonic() + seconds
    async with app.run_test(size=(120, 36)) as pilot:
        out["first_frame_s"] = time.perf_counter() - t0  # mounted and painted once
        out["import_s"] = t_import
        session = app.session  # the measurements the app shows live in its session

        # The app takes lever keys once its first run is in (a key before that is dropped): that
        # wait is the engine's start, not part of the drive's length (3.6 s on 2 idle cores, more
        # under load), so a short drive waits for it as long as a long one.
        await _until(pilot, lambda: bool(session.results), 30.0)
        out["first_result_s"] = time.perf_counter() - t0 if session.results else None
        (shots / "1-live-numpy-cpu.svg").write_text(app.export_screenshot(), encoding="utf-8")
        await pilot.press(lever_key("backend"))  # numpy → torch
        await pilot.pause(0.3)
        out["backend_after_key"] = session.spec.backend
        await pilot.press(lever_key("device"))  # cpu → cuda:0 (skipped where there is none)
        n = len(session.results)
        await _until(pilot, lambda: len(session.results) > n, max(5.0, (end - time.monotonic()) / 3))
        (shots / "2-live-torch.svg").write_text(app.export_screenshot(), encoding="utf-8")
        for tab, name, wait in (("telemetry", "3-telemetry", 3.0), ("profile", "4-profile", 12.0),
                                ("compare", "5-compare", 3.0)):  # fmt: skip
            await pilot.press(keys[tab])
            await pilot.pause(min(wait, max(0.5, end - time.monotonic())))
            (shots / f"{name}.svg").write_text(app.export_screenshot(), encoding="utf-8")
        await pilot.press(keys["live"])
        remaining = end - time.monotonic()
        if remaining > 0:
            await pilot.pause(remaining)
        results = list(session.results)
        out["results"] = len(results)
        out["cuda_results"] = sum(1 for r in results if str(r.spec.device).startswith("cuda"))
        out["result_lines"] = [
            f"{r.spec.scenario} {r.spec.backend} {r.spec.device} {r.spec.dtype} {r.status} "
            f"{'' if r.median is None else f'{r.median * 1e3:.4g} ms'}"
            for r in results[-12:]
        ]
        gpus = [query_gpu(i) for i in range(gpu_count())]
        out["nvml_gpus"] = len(gpus)
        out["nvml_sample"] = [_public(g) for g in gpus[:2]]
        await pilot.press("q")
    out["total_s"] = time.perf_counter() - T_START
    return out


def _public(obj: Any) -> dict[str, Any]:
    import dataclasses

    d = dataclasses.asdict(obj) if dataclasses.is_dataclass(obj) else vars(obj)
    return {k: v for k, v in d.items() if isinstance(v, int | float | str | type(None))}


def main(argv: list[str]) -> int:
    shots, seconds = Path(argv[0]), float(argv[1])
    shots.mkdir(parents=True, exist_ok=True)
    try:
        out = asyncio.run(asyncio.wait_for(drive(shots, seconds), seconds + 60))
    except Exception as exc:
        import traceback

        out = {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()[-2000:]}
    print(json.dumps(out, default=str))
    return 0 if "error" not in out else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
