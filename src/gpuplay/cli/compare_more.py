"""`gpuplay compare --devices …` and `gpuplay compare --from A.json B.json …` (helpers of cli/compare.py)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from typing import Any

import click

from gpuplay.cli.output import emit, log_results, stderr_console
from gpuplay.core.storage.safetext import visible


def compare_from(files: Sequence[str], fmt: str, out: str | None) -> None:
    """Merge result files of several machines into one table, one column per file."""
    from gpuplay.core.reports.merge import MergeError, load_source, merge, to_csv, to_dict, to_markdown

    if len(files) < 1:
        raise click.UsageError("--from needs result files: gpuplay compare --from A.json B.json")
    from gpuplay.core.reports.sweepreport import SweepFileError, is_sweep_file

    # Files given on the command line that cannot be used are the user's mistake: usage errors, exit 2.
    try:
        sweeps = [f for f in files if is_sweep_file(f)]
    except SweepFileError as exc:
        raise click.UsageError(str(exc)) from None
    if sweeps and len(sweeps) == len(files):  # `gpuplay sweep --format json` files: one sweep table
        from gpuplay.cli.sweep import print_merged

        return print_merged(files, fmt, out)
    if sweeps:
        runs = [f for f in files if f not in sweeps]
        raise click.UsageError(
            f"{', '.join(sweeps)} {'is a sweep' if len(sweeps) == 1 else 'are sweeps'} and "
            f"{', '.join(runs)} {'a run result' if len(runs) == 1 else 'run results'}: sweeps and run "
            "results cannot be merged into one table; give only sweep files or only run/compare files"
        )
    try:
        sources = [load_source(f) for f in files]
    except MergeError as exc:
        raise click.UsageError(str(exc)) from None
    rows = merge(sources)
    # Two files of timed runs (collectives' rows hold no samples): the second against the first.
    # A file whose runs all failed (no samples) is still a side: its configurations are named.
    timed = len(sources) == 2 and all(any("samples_s" in r for r in s.results) for s in sources)
    versions = across_versions(sources) if timed else None
    if fmt == "json":
        doc = to_dict(sources, rows)
        if versions is not None:
            doc["across_versions"] = versions.to_dict()
        emit(json.dumps(doc, indent=2, default=str), out)
    elif fmt == "csv":
        emit(to_csv(sources, rows), out)
    else:
        text = to_markdown(sources, rows)
        if versions is not None:
            text = text.rstrip("\n") + "\n\n" + versions_markdown(sources, versions)
        emit(text, out)


def across_versions(sources: Sequence[Any]) -> Any:
    """The first file as the older, the second as the newer: per configuration in both, faster,
    slower or within noise, and which versions differ (core/reports/crossversion.py)."""
    from gpuplay.core.reports import crossversion as cv

    old, new = sources
    changes = cv.compare_results(old.results, new.results)
    differ = cv.differing_versions(cv.versions_of(old.environment, old.results),
                                   cv.versions_of(new.environment, new.results))  # fmt: skip
    return _Versions(changes, differ)


def md_cell(text: object) -> str:
    """A file's text (a scenario name, a version) in Markdown: controls shown, markup escaped."""
    from gpuplay.core.storage.safetext import markdown_cell

    return markdown_cell(text)


class _Versions:
    def __init__(self, changes: Sequence[Any], differ: Sequence[tuple[str, str, str]]) -> None:
        self.changes, self.differ = list(changes), list(differ)

    @property
    def notes(self) -> list[str]:
        from gpuplay.core.reports import crossversion as cv

        return [cv.WITHIN_RUN_NOTE] if cv.within_run_only(self.changes) else []

    def to_dict(self) -> dict[str, Any]:
        return {"changes": [c.to_dict() for c in self.changes],
                "versions": [{"name": n, "old": a, "new": b} for n, a, b in self.differ],
                "notes": self.notes}  # fmt: skip


def versions_markdown(sources: Sequence[Any], v: _Versions) -> str:
    old, new = sources
    lines = [f"## {md_cell(new.name)} against {md_cell(old.name)}", ""]
    if not v.changes:
        lines.append("No configuration is in both files with timed samples.")
    for c in v.changes:
        lines.append(f"- {md_cell(c.text())}")
    lines.append("")
    if v.differ:
        lines.append(
            "Versions that differ: " + "; ".join(md_cell(f"{n} {a} → {b}") for n, a, b in v.differ) + "."
        )
    else:
        lines.append("Versions: the same in both files (as far as they record).")
    lines.append("")
    lines.extend(f"Note: {md_cell(n)}." for n in v.notes)
    lines.append("Ratio: new median over old (above 1: slower), its 95% interval from resampling each file's "
                 "runs and their samples; a change under 2% (5% where the interval is within-run only) or an "
                 "interval holding 1 is within noise.")  # fmt: skip
    return "\n".join(lines) + "\n"


def resolve(devices: str) -> list[str]:
    from gpuplay.core.reports.devices_compare import (
        DevicesError,
        DevicesUsageError,
        cuda_devices,
        resolve_devices,
    )

    cuda, why = cuda_devices()
    try:
        return resolve_devices(devices, cuda, why)
    except DevicesUsageError as exc:  # exit 2, as any bad value; a device missing here exits 1
        raise click.BadParameter(visible(str(exc)), param_hint="--devices") from None
    except DevicesError as exc:
        raise click.ClickException(visible(str(exc))) from None


def compare_devices(
    specs: Sequence[Any], devices: Sequence[str], concurrent: bool, fmt: str, out: str | None
) -> None:
    """Run the planned configurations on each device and print them side by side, outliers flagged."""
    from gpuplay.core.reports import devices_compare as dc

    chosen = dc.for_devices(specs, devices)
    if not chosen:
        raise click.ClickException(f"no configuration of this compare runs on {', '.join(devices)}")
    err = stderr_console()
    err.print(
        f"{len(chosen)} runs on {', '.join(devices)}, {'concurrently' if concurrent else 'one after another'}",
        highlight=False,
    )

    def on_result(r: Any) -> None:
        # A failed or refused row says why (escaped: the words can be a user file's), as `compare` does.
        why = f": {r.message}" if r.status in ("failed", "refused") and r.message else ""
        err.print(visible(f"{r.spec.device}: {r.spec.scenario} {r.spec.label()}: {r.status}{why}"),
                  style="yellow" if why else "dim", highlight=False, markup=False)  # fmt: skip

    try:
        results = dc.run_devices(chosen, concurrent=concurrent, on_result=on_result)
    except KeyboardInterrupt:
        # 130, as every command stopped by Ctrl+C exits (cli/exitcodes.py), never 1 (an error)
        err.print(
            "interrupted by SIGINT: stopped before the devices finished", style="yellow", highlight=False
        )
        raise SystemExit(130) from None
    log_results(results)
    rows = dc.side_by_side(results)
    flagged = sorted({d for row in rows for d in row.outliers})
    health = {d: dc.device_health(d) for d in flagged}
    health_lines = {d: dc.health_text(h) for d, h in health.items()}
    if fmt == "json":
        doc = dc.to_dict(rows, devices, health)
        doc["results"] = [r.to_dict() for r in results]
        emit(json.dumps(doc, indent=2, default=str), out)
    elif fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(["scenario", "size", "configuration", "device", "median_s", "outlier_fraction_slower"])
        for row in rows:
            for d in devices:
                m = row.medians.get(d)
                w.writerow([row.scenario, row.size, row.config, d, "" if m is None else f"{m:.9g}",
                            row.outliers.get(d, "")])  # fmt: skip
        emit(buf.getvalue(), out)
    else:
        emit(dc.to_markdown(rows, devices, health_lines), out)
    from gpuplay.cli.exitcodes import exit_if_checks_failed, exit_if_runs_failed

    exit_if_runs_failed(results)  # a device's failed or refused row exits 1, as in `run` and `compare`
    exit_if_checks_failed(results, err)
