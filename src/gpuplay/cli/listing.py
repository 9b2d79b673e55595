"""`gpuplay list`: the scenarios, their presets and the claims they check."""

from __future__ import annotations

import json

import click

from gpuplay.cli import options
from gpuplay.cli.options import scenario_dirs_option
from gpuplay.cli.output import esc, load_scenarios, plain, stdout_console


@click.command(name="list")
@scenario_dirs_option
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
def list_(scenario_dirs: tuple[str, ...], fmt: str) -> None:
    """Scenarios, their presets and the public claims they check."""
    sset = load_scenarios(options.scenario_dirs(click.get_current_context(), scenario_dirs))
    if fmt == "json":
        click.echo(
            json.dumps(
                [
                    {
                        "name": s.name,
                        "title": s.title,
                        "workload": s.workload,
                        "description": s.description,
                        "presets": {k: s.preset_params(k) for k in s.presets},
                        "params": s.preset_params(None),
                        "claim": s.claim.text if s.claim else None,
                        "path": str(s.path),
                        "replaces": str(sset.replaced[s.name]) if s.name in sset.replaced else None,
                    }
                    for s in sset.scenarios.values()
                ],
                indent=2,
            )
        )
        return
    from rich import box
    from rich.table import Table

    t = Table(header_style="bold", box=box.SIMPLE_HEAD)
    # Bounded name and preset columns leave the claim, the long prose, room to fold into.
    t.add_column("scenario", max_width=30)
    t.add_column("workload", overflow="fold", max_width=14)
    t.add_column("presets", max_width=30)
    t.add_column("claim", min_width=16)
    for s in sset.scenarios.values():
        presets = "\n".join(
            f"{k}: " + ", ".join(f"{a}={b}" for a, b in s.presets[k].items()) for k in s.presets
        )
        # Everything but the bold is the file's own text: shown as text, never as markup.
        mark = f"\n[yellow]{esc(s.path)} replaces the shipped one[/]" if s.name in sset.replaced else ""
        t.add_row(
            f"[bold]{esc(s.name)}[/]\n{esc(s.title)}{mark}",
            plain(s.workload),
            plain(presets),
            plain(s.claim.text if s.claim else "—"),
        )
    stdout_console(t).print(t)


command = list_
