"""The `gpuplay` command: the playground with no arguments, headless subcommands otherwise.

Each subcommand lives in a module of its own and imports what it needs inside the
command: `gpuplay --help` loads neither Textual nor torch.
"""

from __future__ import annotations

from pathlib import Path

import click

from gpuplay import __version__
from gpuplay.cli.options import scenario_dirs_option


@click.group(invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gpuplay")
@scenario_dirs_option
@click.pass_context
def main(ctx: click.Context, scenario_dirs: tuple[str, ...]) -> None:
    """An interactive GPU playground for numerical Python.

    With no command, opens the live playground (a terminal UI).
    """
    ctx.ensure_object(dict)
    ctx.obj["scenario_dirs"] = scenario_dirs
    if ctx.invoked_subcommand is None:
        from gpuplay.tui.app import run_app

        run_app(scenario_dirs=[Path(d) for d in scenario_dirs])


def _register() -> None:
    from gpuplay.cli import compare, demo, history, info, listing, monitor, run, serve

    for module in (info, listing, run, compare, monitor, history, demo, serve):
        main.add_command(module.command)


_register()
