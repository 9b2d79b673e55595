"""Scenario files of one name in the app: two of the user's are a warning naming both; a user's
file replacing a shipped scenario is said in the palette's entry for it."""

from __future__ import annotations

from gpuplay.core.catalogue.scenarios import builtin_dir
from gpuplay.tui.app import GpuPlayApp
from gpuplay.tui.commands import GpuplayCommands
from tests.tui_helpers import record_notifications, tiny_scenarios


async def test_the_app_names_both_files_of_one_scenario_name(tmp_path, monkeypatch):
    sc = tiny_scenarios(tmp_path / "sc")
    twins = tmp_path / "twins"
    twins.mkdir()
    text = (sc / "matmul.toml").read_text().replace('name = "matmul"', 'name = "twin"')
    (twins / "a.toml").write_text(text)
    (twins / "b.toml").write_text(text)
    app = GpuPlayApp([sc, twins], autostart=False, telemetry=False, export_dir=tmp_path / "out")
    seen = record_notifications(app, monkeypatch)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        said = [m for m in seen if "'twin'" in m]
        assert len(said) == 1 and str(twins / "a.toml") in said[0] and str(twins / "b.toml") in said[0]
        helps = [h for t, _cb, h in GpuplayCommands(app.screen).commands() if t.startswith("scenario: ")]
        matmul = next(h for h in helps if h.startswith("matmul:"))
        assert f"your file {sc / 'matmul.toml'} replaces the shipped one" in matmul
        assert str(builtin_dir()) not in " ".join(seen)  # tiny files replacing them all: no toast each
