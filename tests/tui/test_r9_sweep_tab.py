"""R9 (docs/hardening.md): the Sweep tab on a code file without PRESETS sweeps its parameter
(it failed at once: the tab asked the command for the quick preset the file does not define)."""

from __future__ import annotations

import pytest

from gpuplay.tui.app import GpuPlayApp
from tests.tui_helpers import tiny_scenarios, wait_until

pytestmark = pytest.mark.slow

NO_PRESETS = (
    'PARAMS = {"n": 64}\n'
    "def inputs(rng, n):\n    return rng.random(n)\n"
    "def step(xp, x):\n    return x * 2.0\n"
    "def flops(n):\n    return float(n)\n"
)


async def test_the_sweep_tab_sweeps_a_code_file_without_presets(tmp_path):
    from gpuplay.tui.sweep_view import SweepView

    path = tmp_path / "double.py"
    path.write_text(NO_PRESETS)
    app = GpuPlayApp([tiny_scenarios(tmp_path / "sc")], code_files=[path], budget_s=0.05, telemetry=False)
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_until(pilot, lambda: app.session.live_result is not None, timeout=60)
        assert app.session.live_result.spec.workload.startswith("code:")  # the file opens first
        await pilot.press("7")
        view = app.main.query_one(SweepView)
        assert view.scenario is not None and view.scenario.name == "double" and view.param == "n"
        view.budget_s, view.backends, view.low, view.high = 0.01, "numpy", 64, 128
        await pilot.press("enter")
        await wait_until(pilot, lambda: not view.running, timeout=120)
        assert not view.error, (view.error, view.notes)
        assert view.doc is not None and view.doc["values"] == [64, 128]  # n=64..128: two sizes
