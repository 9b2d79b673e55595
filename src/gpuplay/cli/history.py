"""`gpuplay history`: measurements from past sessions."""

from __future__ import annotations

import click

from gpuplay.cli.output import print_rows, stderr_console
from gpuplay.core.spec import SpecError


@click.command()
@click.option(
    "--limit", type=click.IntRange(min=1), default=50, show_default=True, help="Newest N measurements."
)
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json", "csv"]), default="table", show_default=True
)
def history(limit: int, fmt: str) -> None:
    """Measurements from past sessions (the session logs in the state folder)."""
    from gpuplay.core.compare import attach_baselines
    from gpuplay.core.result import RunResult
    from gpuplay.core.sessionlog import list_sessions, read_log, sessions_dir

    results = []
    for path in list_sessions():
        for d in read_log(path):
            try:
                r = RunResult.from_dict(d)
            except (KeyError, TypeError, ValueError, SpecError):
                continue
            r.conditions.setdefault("session", path.name)
            results.append(r)
    if not results:
        stderr_console().print(f"no measurements yet in {sessions_dir()}", highlight=False)
        return
    print_rows(attach_baselines(results[-limit:]), fmt, None, title=f"history (newest {limit})")


command = history
