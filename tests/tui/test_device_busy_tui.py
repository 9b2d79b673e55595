"""The app's status says the device is busy, and who holds it, while a real second process holds
the device lock; the measurement runs once it lets go."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from rich.console import Console

from gpuplay.tui.app import GpuPlayApp
from gpuplay.tui.widgets import StatsPanel
from tests.tui_helpers import tiny_scenarios, wait_until

pytestmark = pytest.mark.real_engine

HOLD = (
    "import sys; from gpuplay.core.engine.devicelock import device_lock\n"
    "with device_lock('cpu'):\n"
    "    print('held', flush=True); sys.stdin.read()\n"
)


def stats_text(app) -> str:
    console = Console(width=200, record=True, color_system=None)
    console.print(app.query_one(StatsPanel).content)
    return " ".join(console.export_text().split())


async def test_the_status_says_the_device_is_busy_and_who_holds_it(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", HOLD], env=dict(os.environ), stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        app = GpuPlayApp([tiny_scenarios(tmp_path / "sc")], budget_s=0.05, telemetry=False,
                         export_dir=tmp_path / "out")  # fmt: skip
        async with app.run_test(size=(160, 45)) as pilot:
            await wait_until(pilot, lambda: "busy" in app.session.phase, timeout=120)
            shown = stats_text(app)
            assert f"cpu busy: measuring in another session (pid {holder.pid}:" in shown, shown
            assert "waiting for it to finish" in shown
            holder.communicate("", timeout=10)
            await wait_until(pilot, lambda: app.session.live_result is not None, timeout=120)
            assert app.session.live_result.status == "ok"
    finally:
        holder.kill()
