"""Collectives ranks that want more cores than the machine has are warned about (CLI and tab)."""

from __future__ import annotations

from click.testing import CliRunner

from gpuplay.cli import main
from gpuplay.collectives.cores import oversubscription
from gpuplay.tui.app import GpuPlayApp
from gpuplay.tui.collectives_view import CollectivesView
from tests.tui_helpers import tiny_scenarios, wait_until


def test_ranks_times_threads_beyond_the_cores_is_named():
    assert oversubscription(2, None, "gloo", cores=2) == ""  # 1 thread each: fits
    assert oversubscription(2, 1, "gloo", cores=4) == ""
    crowded = oversubscription(4, None, "gloo", cores=2)
    assert "4 ranks × 1 thread = 4 busy threads on 2 cores" in crowded
    assert "2 ranks × 2 threads = 4" in oversubscription(2, 2, "gloo", cores=2)
    assert "3 ranks = 3 busy threads on 2 cores" in oversubscription(3, None, "nccl", cores=2)


def test_cli_warns_before_launching(monkeypatch):
    import gpuplay.collectives.launch as launch_mod

    monkeypatch.setattr("gpuplay.collectives.cores.cpu_count", lambda: 2)

    def no_launch(*a, **k):
        raise launch_mod.LaunchError("not launched in this test")

    monkeypatch.setattr(launch_mod, "launch", no_launch)
    res = CliRunner().invoke(main, ["collectives", "--nproc", "4", "--backend", "gloo", "--op", "all_reduce"])
    assert "warning: 4 ranks × 1 thread = 4 busy threads on 2 cores" in res.stderr, res.output


async def test_collectives_tab_shows_the_warning(tmp_path, monkeypatch):
    monkeypatch.setattr("gpuplay.collectives.cores.cpu_count", lambda: 2)
    app = GpuPlayApp([tiny_scenarios(tmp_path / "sc")], export_dir=tmp_path, autostart=False, telemetry=False)
    async with app.run_test(size=(120, 36)) as pilot:
        args = app.tab("collectives").args
        args[args.index("--nproc") + 1] = "3"
        await wait_until(pilot, lambda: app.probed)
        await pilot.press("6")
        await pilot.pause()
        status = str(app.query_one(CollectivesView).query_one("#coll-status").render())
        assert "3 ranks × 1 thread = 3 busy threads on 2 cores" in status
