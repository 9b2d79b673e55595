"""Textual's conventions: gpuplay's own command palette provider, themes from the palette, and
bindings with ids that config.toml's [keymap] remaps (bad entries named, never a crash)."""

from __future__ import annotations

from pathlib import Path

from textual.command import CommandList, CommandPalette

from gpuplay.core.storage.config import load_config
from gpuplay.tui.app import GpuPlayApp
from gpuplay.tui.commands import GpuplayCommands
from tests.tui_helpers import record_notifications, tiny_scenarios, wait_until


def _config(tmp_path: Path, monkeypatch, text: str) -> None:
    folder = tmp_path / "cfg"
    folder.mkdir()
    (folder / "config.toml").write_text(text)
    monkeypatch.setenv("GPUPLAY_CONFIG_DIR", str(folder))


def _app(tmp_path: Path, **kw) -> GpuPlayApp:
    return GpuPlayApp([tiny_scenarios(tmp_path / "sc")], export_dir=tmp_path / "out", budget_s=0.1,
                      telemetry=False, **kw)  # fmt: skip


def test_keymap_table_is_read_and_bad_entries_are_named(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text('[keymap]\nbackend = "ctrl+b"\ntab_live = "1,f1"\ndtype = 3\ncompile = "not a key"\n')
    cfg = load_config(path)
    assert cfg.keymap == {"backend": "ctrl+b", "tab_live": "1,f1"}
    assert any("dtype" in p for p in cfg.problems) and any("compile" in p for p in cfg.problems)
    path.write_text('keymap = "b"\n')
    assert load_config(path).keymap == {} and "[keymap] must be a table" in load_config(path).problems[0]


async def test_keymap_remaps_a_binding_and_names_unknown_ids(tmp_path, monkeypatch):
    _config(tmp_path, monkeypatch, '[keymap]\nbackend = "z"\nno_such_action = "y"\n')
    app = _app(tmp_path)
    seen = record_notifications(app, monkeypatch)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(pilot, lambda: app.session.live_result is not None)
        await pilot.press("z")
        await wait_until(pilot, lambda: app.spec.backend == "torch")
        assert any("no_such_action" in m for m in seen)


async def test_palette_lists_scenarios_levers_tabs_and_exports(tmp_path):
    app = _app(tmp_path, autostart=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(pilot, lambda: app.probed)
        provider = GpuplayCommands(app.screen)
        texts = [t for t, _, _ in provider.commands()]
        assert "scenario: svd" in texts and "show compare" in texts and "backend: PyTorch" in texts
        assert "export the session (JSON, CSV, Markdown)" in texts
        assert any(t.startswith("device: ") for t in texts)  # unavailable values listed, with their reason


async def test_palette_sets_a_lever_and_switches_tabs(tmp_path):
    app = _app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(pilot, lambda: app.session.live_result is not None)
        await pilot.press("ctrl+p")
        assert isinstance(app.screen, CommandPalette)
        await pilot.press(*"backend: pytorch")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.spec.backend == "torch")
        await pilot.press("ctrl+p")
        await pilot.press(*"show telemetry")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await pilot.pause()
        from textual.widgets import TabbedContent

        assert app.query_one(TabbedContent).active == "telemetry"


async def test_projector_themes_are_registered_for_the_palette(tmp_path):
    app = _app(tmp_path, autostart=False)
    async with app.run_test(size=(120, 36)):
        assert "projector" in app.available_themes and "projector-light" in app.available_themes


async def test_a_flood_of_unknown_keymap_ids_is_one_summary(tmp_path, monkeypatch):
    """10,000 unknown ids in [keymap] (and as many bad keys): one line each kind, with the count,
    the first few, and the known ids once; the known remap still works."""
    flood = "".join(f'nope_{i} = "y"\n' for i in range(10_000))
    bad_keys = "".join(f'bad_{i} = "not a key"\n' for i in range(10_000))
    _config(tmp_path, monkeypatch, f'[keymap]\nbackend = "z"\n{flood}{bad_keys}')
    app = _app(tmp_path, autostart=False)
    seen = record_notifications(app, monkeypatch)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        keymap_lines = [m for m in seen if "[keymap]" in m]
        assert len(keymap_lines) == 2, keymap_lines[:3]
        unknown = next(m for m in keymap_lines if "unknown key binding" in m)
        assert "10000 unknown key binding ids" in unknown and "'nope_0'" in unknown and "9995 more" in unknown
        assert unknown.count("backend") == 1  # the known ids, listed once
        assert "nope_9999" not in unknown and len(unknown) < 2000
        bad = next(m for m in keymap_lines if "entries are not a key" in m)
        assert "10000 entries" in bad and "bad_0" in bad and "bad_9999" not in bad
        await pilot.press("z")
        await wait_until(pilot, lambda: app.spec.backend == "torch")


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
