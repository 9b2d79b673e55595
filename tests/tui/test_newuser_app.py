"""What a new user trips over in the app (issue 39), with Pilot and the real screen."""

from __future__ import annotations

from gpuplay.tui.app import GpuPlayApp
from tests.snapshot_feed import feed
from tests.tui_helpers import tiny_scenarios, wait_until


def make_app(tmp_path):
    return GpuPlayApp(
        [tiny_scenarios(tmp_path / "sc")], autostart=False, telemetry=False, export_dir=tmp_path
    )


async def test_the_roofline_is_redrawn_for_the_size_it_settles_at(tmp_path):
    """Drawn while the layout was still settling (a loaded machine), the roofline's labels stayed
    placed for the old size: the Compare snapshot moved one cell under load."""
    from gpuplay.tui.roofline import RooflineChart

    app = make_app(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until(pilot, lambda: app.probed)
        feed(app)
        await pilot.press("2")
        await pilot.pause()
        chart = app.query_one(RooflineChart)
        await pilot.resize_terminal(160, 45)
        await pilot.pause()
        await pilot.pause()
        resized = str(chart.render())
        chart._data_key = None  # drawn afresh at the size it has now
        chart.show(*chart._shown)
        assert str(chart.render()) == resized


async def test_the_profile_tab_says_why_a_refused_configuration_has_no_profile(tmp_path):
    """A refused configuration left the Profile tab on "No profile yet…" forever (issue 39): it
    now shows the refusal's reason and how a profile starts."""
    from textual.widgets import Static

    app = make_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(pilot, lambda: app.probed)
        app.session.spec = app.spec.replace(backend="cupy")  # not installed here: refused
        app.start_measurement()
        await wait_until(pilot, lambda: app.session.phase == "refused")
        await pilot.press("5")
        summary = app.query_one("#profile-summary", Static)
        await wait_until(pilot, lambda: "refused:" in str(summary.render()), timeout=60)
        text = " ".join(str(summary.render()).split())
        assert "CuPy" in text and "key 5" in text and "b backend" in text
