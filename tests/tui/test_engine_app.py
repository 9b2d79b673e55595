"""The app over a real engine process, in a fresh interpreter (this test process may hold torch)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.real_engine]

SCRIPT = textwrap.dedent(
    """
    import asyncio, json, os, signal, sys
    from pathlib import Path
    from gpuplay.tui.app import GpuPlayApp
    from tests.tui_helpers import tiny_scenarios, wait_until

    async def main():
        out = {}
        app = GpuPlayApp([tiny_scenarios(Path(sys.argv[1]))], budget_s=0.2, telemetry=False)
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_until(pilot, lambda: app.session.live_result is not None, timeout=120)
            out["first"] = app.session.live_result.status
            await pilot.press("b")  # PyTorch, measured in the engine
            await wait_until(pilot, lambda: app.session.live_result is not None
                             and app.session.live_result.spec.backend == "torch", timeout=120)
            out["torch"] = app.session.live_result.status
            out["torch_in_ui"] = "torch" in sys.modules or "cupy" in sys.modules
            out["engine_pid"] = app.engine.pid
            maps = Path(f"/proc/{app.engine.pid}/maps").read_text()
            out["libtorch_in_engine"] = "libtorch" in maps
            out["libtorch_in_ui"] = "libtorch" in Path("/proc/self/maps").read_text()
            # kill -9 the engine mid-measurement: a failed result, the app still running
            app.spec = app.spec.replace(params={"n": 1024}, budget_s=60.0)
            app.start_measurement()
            await wait_until(pilot, lambda: app.session.phase == "timed", timeout=120)
            os.kill(app.engine.pid, signal.SIGKILL)
            await wait_until(pilot, lambda: app.session.live_result is not None, timeout=60)
            out["killed"] = [app.session.live_result.status, app.session.live_result.failure, app.session.live_result.message]
            app.spec = app.session.make_spec(app.spec)
            app.start_measurement()
            await wait_until(pilot, lambda: app.session.live_result is not None, timeout=120)
            out["after"] = app.session.live_result.status
            out["new_engine"] = app.engine.pid != out["engine_pid"]
        print(json.dumps(out))

    asyncio.run(main())
    """
)


def test_the_app_measures_in_an_engine_and_survives_its_death(tmp_path):
    root = Path(__file__).resolve().parents[2]
    env = {"GPUPLAY_STATE_DIR": str(tmp_path / "state"), "GPUPLAY_CONFIG_DIR": str(tmp_path / "cfg"),
           "PYTHONPATH": f"{root}:{root / 'src'}", "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "sc")], capture_output=True, text=True,
                          env=env, timeout=500, cwd=root)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["first"] == "ok" and out["torch"] == "ok"
    assert out["torch_in_ui"] is False
    assert out["libtorch_in_engine"] and not out["libtorch_in_ui"]
    status, failure, message = out["killed"]
    assert (status, failure) == ("failed", "engine-died") and "SIGKILL" in message
    assert out["after"] == "ok" and out["new_engine"]
