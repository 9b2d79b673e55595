"""R9 (docs/hardening.md): the command palette shows a scenario's title and a path as text.
Textual reads a hit's prompt and help as markup: a title's `[red]` was a colour and its ESC was gone."""

from __future__ import annotations

from textual.command import CommandList, CommandPalette

from gpuplay.tui.app import GpuPlayApp
from tests.tui_helpers import tiny_scenarios, wait_until


async def test_the_palette_shows_a_scenarios_title_and_path_as_text(tmp_path):
    folder = tiny_scenarios(tmp_path / "sc")
    (folder / "evil.toml").write_text(
        'name = "evil"\nworkload = "elementwise"\ntitle = "[red]Evil\\u001b[2J [b]title"\n[params]\nn = 1000\n'
    )
    app = GpuPlayApp([folder], autostart=False, telemetry=False, export_dir=tmp_path / "[red]out")
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(pilot, lambda: app.probed)
        await pilot.press("ctrl+p")
        assert isinstance(app.screen, CommandPalette)
        await pilot.press(*"evil")
        commands = app.screen.query_one(CommandList)
        await wait_until(pilot, lambda: commands.option_count > 0)
        shown = [str(commands.get_option_at_index(i).prompt) for i in range(commands.option_count)]
        assert any("scenario: [red]Evil␛[2J [b]title" in s for s in shown), shown
        assert not any("\x1b" in s for s in shown)
        await pilot.press("escape")
        await pilot.press("ctrl+p")
        await pilot.press(*"export the session")
        commands = app.screen.query_one(CommandList)
        await wait_until(pilot, lambda: commands.option_count > 0)
        shown = [str(commands.get_option_at_index(i).prompt) for i in range(commands.option_count)]
        assert any(f"into {tmp_path / '[red]out'}" in s for s in shown), shown  # the help line, a path
