"""The Collectives tab: a real sweep of local gloo ranks, drawn as bus bandwidth against size."""

from __future__ import annotations

import pytest

from gpuplay.tui.app import GpuPlayApp
from gpuplay.tui.collectives_view import BandwidthChart
from tests.tui_helpers import tiny_scenarios, wait_until

pytestmark = pytest.mark.slow


async def test_k_sweeps_local_ranks_and_draws_bandwidth_against_size(tmp_path):
    app = GpuPlayApp([tiny_scenarios(tmp_path / "sc")], budget_s=0.05, telemetry=False)
    async with app.run_test(size=(120, 36)) as pilot:
        tab = app.tab("collectives")
        tab.args = ["--nproc", "2", "--op", "all_reduce,broadcast", "--sizes", "1K,64K", "--iters", "3"]
        await wait_until(pilot, lambda: app.session.live_result is not None, timeout=60)
        await pilot.press("k")
        assert app.main.query_one("TabbedContent").active == "collectives"
        await wait_until(pilot, lambda: tab.doc is not None or tab.error, timeout=120)
        assert not tab.error, tab.error
        from gpuplay.collectives.report import series

        drawn = series(tab.doc)
        assert set(drawn) == {"all_reduce", "broadcast"}
        assert [size for size, _ in drawn["all_reduce"]] == [1024, 65536]
        assert all(bw > 0 for _, bw in drawn["all_reduce"])
        chart = app.main.query_one(BandwidthChart)
        assert chart._data_key is not None and "gloo" in chart._data_key[0]
        status = str(app.main.query_one("#coll-status").content)
        assert "4 of 4 measurements checked exact" in status


async def test_a_failing_sweep_is_a_message_and_the_app_goes_on(tmp_path):
    app = GpuPlayApp([tiny_scenarios(tmp_path / "sc")], budget_s=0.05, telemetry=False)
    async with app.run_test(size=(120, 36)) as pilot:
        tab = app.tab("collectives")
        tab.args = ["--nproc", "2", "--backend", "nccl", "--sizes", "1K"]  # no GPU here
        await wait_until(pilot, lambda: app.session.live_result is not None, timeout=60)
        await pilot.press("k")
        await wait_until(pilot, lambda: bool(tab.error), timeout=120)
        assert "NCCL" in tab.error
        await pilot.press("1")
        assert app.is_running
