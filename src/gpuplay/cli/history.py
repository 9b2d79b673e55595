"""`gpuplay history`: measurements from past sessions."""

from __future__ import annotations

import click

from gpuplay.cli.output import print_rows, stderr_console


@click.command()
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=None,
    help="Only the newest N measurements (default: every measurement).",
)
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json", "csv"]), default="table", show_default=True
)
def history(limit: int | None, fmt: str) -> None:
    """Every measurement of past sessions (the session logs in the state folder)."""
    from gpuplay.core.reports.sessionlog import by_session, read_history, sessions_dir
    from gpuplay.core.studies.compare import attach_baselines

    problems: list[str] = []
    results = read_history(problems=problems)
    err = stderr_console()
    for problem in problems:
        err.print(f"warning: {problem}", style="yellow", highlight=False, markup=False)
    if not results:
        err.print(f"no measurements yet in {sessions_dir()}", highlight=False, markup=False)
        return
    total = len(results)
    shown = results[-limit:] if limit else results
    # Speedups within each session only; the baselines may lie before the --limit cut.
    rows = []
    for group in by_session(shown):
        session = group[0].conditions.get("session")
        pool = [r for r in results if r.conditions.get("session") == session]
        rows.extend(attach_baselines(group, pool))
    sessions = len(by_session(shown))
    what = f"{len(shown)} of {total}" if len(shown) < total else f"all {total}"
    title = f"history: {what} measurements, {sessions} session{'s' if sessions != 1 else ''}"
    print_rows(rows, fmt, None, title=title)


command = history
