"""What commands print: tables on stdout, progress and warnings on stderr, files written atomically."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from gpuplay.core.reports.report import NOTES, row_cells
from gpuplay.core.storage.safetext import visible
from gpuplay.core.studies.compare import Row


def esc(text: object) -> str:
    """Outside text (a file's, a result's, an exception's) for a Rich markup string: controls
    shown (core.safetext) and brackets escaped, so `[/]` in a title is text, not a crash."""
    from rich.markup import escape

    from gpuplay.core.storage.safetext import visible

    return escape(visible(text))


def spinner(console: Any, text: str) -> Any:
    """Rich's spinner on `console` while a measurement runs, on a terminal; elsewhere nothing.
    Piped, Rich draws nothing but would still import its Live display (~8 ms of a NumPy run's
    path to its request on the 2-core machine) and wake a refresh thread 12.5 times a
    second in the front end beside the measurement."""
    if console.is_terminal:
        return console.status(text)
    import contextlib

    return contextlib.nullcontext()


def plain(text: object, **kw: Any) -> Any:
    """Outside text as a Rich Text (never parsed as markup), controls shown."""
    from rich.text import Text

    from gpuplay.core.storage.safetext import visible

    return Text(visible(text), **kw)


# Piped or redirected, with no COLUMNS to honour, tables take their natural width up to this
# many columns (longer cells fold inside their column) and prose is never hard-wrapped.
PIPED_TABLE_WIDTH = 120


@functools.cache
def _pipe_console_class() -> Any:
    """Rich's Console, but a reader that closed the pipe early (`gpuplay history | head -1`) raises
    BrokenPipeError instead of Rich's SystemExit(1): the command group turns it into a quiet exit 0
    (cli/__init__.py), as for every other write to a closed pipe."""
    from rich.console import Console

    class PipeConsole(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True  # nothing more to write where nobody reads
            raise BrokenPipeError

    return PipeConsole


def _console(stderr: bool = False) -> Any:
    """A console on stdout/stderr. On a terminal (or with COLUMNS set) it honours that width;
    otherwise lines stay whole (a log file or `| cat` must not split a sentence at 80 columns)
    and tables are as wide as they need, up to PIPED_TABLE_WIDTH."""
    import os

    Console = _pipe_console_class()

    con = Console(stderr=stderr)
    if con.is_terminal:
        return con
    # Piped or redirected: Rich pads every table line to the table's width; a file or `| cat`
    # then carries trailing spaces on every line (diffs and `grep ' $'` see them). Trim them.
    import sys
    from typing import IO, cast

    # A text stream by duck typing (write, flush, isatty, the stream's own encoding and fileno).
    trimmed = cast(IO[str], TrimmedLines(sys.stderr if stderr else sys.stdout))
    if os.environ.get("COLUMNS"):
        return Console(file=trimmed)
    return Console(file=trimmed, width=PIPED_TABLE_WIDTH, soft_wrap=True)


class TrimmedLines:
    """A text stream that drops the spaces at the end of each line it passes on.

    Spaces at the end of a write are held back until the next write shows whether a line ends
    there (then they go) or text goes on (then they are written); flush writes what is held.
    """

    def __init__(self, stream: Any) -> None:
        self._stream, self._held = stream, ""

    def write(self, text: str) -> int:
        import re

        body = re.sub(r"[ \t]+\n", "\n", self._held + text)
        kept = body.rstrip(" \t")
        self._held = body[len(kept) :]
        self._stream.write(kept)
        return len(text)

    def flush(self) -> None:
        if self._held:
            self._stream.write(self._held)
            self._held = ""
        self._stream.flush()

    def isatty(self) -> bool:
        return False

    def __getattr__(self, name: str) -> Any:  # encoding, fileno, …: the stream's own
        return getattr(self._stream, name)


def notice_printer(console: Any) -> Any:
    """What prints the engine's notices (a step over its limit, when it will be stopped) on stderr."""

    def notice(text: str) -> None:
        console.print(visible(text), style="yellow", highlight=False, markup=False)

    return notice


def stderr_console() -> Any:
    return _console(stderr=True)


def stdout_console(renderable: Any = None) -> Any:
    """A console for stdout (`renderable` is accepted for callers that print one table)."""
    del renderable  # tables never expand: a narrow one keeps its natural width
    return _console()


def load_scenarios(extra: Sequence[str]) -> Any:
    """Built-in, configured and extra scenario folders; a broken file is a warning, not an exit."""
    from gpuplay.core.catalogue.scenarios import load_scenarios as load
    from gpuplay.core.storage.config import load_config

    cfg = load_config()
    err = stderr_console()
    for problem in cfg.problems:
        err.print(f"[yellow]warning:[/] {esc(problem)}", highlight=False)
    sset = load([*cfg.scenario_dirs, *extra])
    for e in sset.errors:
        err.print(
            f"[yellow]warning:[/] {esc(f'scenario {e.path}: ' + (e.field + ': ' if e.field else '') + e.detail)}",
            highlight=False,
        )
    for w in [*sset.warnings, *sset.replacement_notes()]:  # two files of one name: both named
        err.print(f"[yellow]warning:[/] {esc(w)}", highlight=False)
    return sset


def message(exc: BaseException) -> str:
    """An exception's words for a usage error, control characters shown: they often quote a
    user's path or name (`gpuplay run $'x\\e[31m.py'`), and click prints the text as it is."""
    return visible(str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc))


def emit(text: str, out: str | None) -> None:
    """`text` to `out`, or to stdout. Where the file cannot be written after all (a full disk, a
    folder removed meanwhile), the text goes to stdout and the error says so: what was measured
    is never lost to a failed write."""
    if out:
        from gpuplay.core.storage.atomicfile import write_atomic

        folder = Path(out).expanduser().parent  # checked to exist before measuring (cli/options.OutPath)
        try:
            write_atomic(Path(out).expanduser(), text)
        except OSError as exc:
            click.echo(text, nl=not text.endswith("\n"))
            raise click.ClickException(
                f"cannot write {visible(out)}: {_write_failure(folder, exc)}; what was measured is printed to stdout instead"
            ) from None
        stderr_console().print(f"wrote {esc(out)}", highlight=False)
    else:
        click.echo(text, nl=not text.endswith("\n"))


def _write_failure(folder: Path, exc: OSError) -> str:
    """Why an output file could not be written, in words: a file where its folder should be made
    mkdir say "File exists" (`--out results.json/run.json`, or a path under /etc/passwd)."""
    for parent in (folder, *folder.parents):
        if parent.exists():
            if not parent.is_dir():
                return f"{visible(str(parent))} is a file, not a folder"
            break
    return str(exc.strerror or exc)


def warm_for_results() -> None:
    """Import and read what reading a result needs before the engine answers: the noise
    verdicts' module, and the libraries' installed versions the calibration's fingerprint holds
    (core/storage/installed.py; ~1 ms, once per process). A command calls it while it waits for the
    engine to start and import NumPy, not after the measurement, when it would delay the
    table."""
    import gpuplay.core.measure.noise  # noqa: F401 - the noise verdicts (psutil is not imported with it)
    from gpuplay.core.measure import roofline

    for library in roofline.LIBRARIES:
        roofline.package_version(library)


def skipped_lines(skipped: Sequence[tuple[Any, Any]]) -> list[str]:
    """One line per configuration and reason a compare skipped, naming the scenarios it skipped
    them for: "cupy cpu float32: CuPy is not installed (22 scenarios)", not 22 lines."""
    groups: dict[tuple[str, str], list[str]] = {}
    for spec, why in skipped:
        groups.setdefault((spec.label(), str(why)), []).append(spec.scenario or spec.workload)
    lines = []
    for (label, why), scenarios in groups.items():
        which = scenarios[0] if len(scenarios) == 1 else f"{len(scenarios)} scenarios"
        lines.append(visible(f"{label} ({which}): {why}"))
    return lines


def _skipped_rows(skipped: Sequence[tuple[Any, Any]]) -> list[Row]:
    """A skipped configuration as a CSV row: status `skipped`, the reason in `message`."""
    from gpuplay.core.result import RunResult

    return [Row(RunResult(spec=spec, status="skipped", message=str(why))) for spec, why in skipped]


def print_rows(
    rows: Any,
    fmt: str,
    out: str | None,
    title: str = "",
    skipped: Sequence[tuple[Any, Any]] = (),
    **meta: Any,
) -> None:
    """`rows` as `fmt`, to `out` or stdout. `skipped` ((spec, reason): configurations a compare
    could not run here) are part of every format: JSON's `refused` (in `meta`), CSV rows of
    status `skipped`, a list under the Markdown table and below the terminal one."""
    from gpuplay.core.reports import report

    said = skipped_lines(skipped)
    md_skipped = "".join(f"\n- {md_text(line)}" for line in said)
    md_skipped = f"\nSkipped here (not run):\n{md_skipped}\n" if said else ""
    if fmt == "json":
        emit(report.to_json(rows, **meta), out)
    elif fmt == "csv":
        emit(report.to_csv([*rows, *_skipped_rows(skipped)]), out)
    elif fmt == "markdown":
        emit(report.to_markdown(rows, title) + md_skipped, out)
    else:
        if out:
            emit(report.to_markdown(rows, title) + md_skipped, out)
            return
        con = stdout_console()
        _print_table(con, rows, title)
        for line in said:  # after the table and its notes: in the output, not only on stderr
            con.print(f"skipped: {line}", style="dim", highlight=False, markup=False)


def md_text(text: str) -> str:
    """Outside text for a Markdown line: HTML and Markdown specials escaped."""
    import html

    s = html.escape(text, quote=False)
    for ch in "\\`*_[]|":
        s = s.replace(ch, "\\" + ch)
    return s


def _print_table(con: Any, rows: Any, title: str) -> None:
    """The terminal table, its footer line, notes and noise warnings."""
    from gpuplay.core.reports import report

    shown = [r for r in rows if r.result.summary is not None]
    if shown:
        con.print(rich_table(shown, title))  # the title is Text there: a file's words
        from gpuplay.core.hw.system import cpu_count, cpu_name

        # Not report.environment(): its package versions (importlib.metadata, ~15 ms) are
        # for the files; this line names the CPU only.
        env = {"cpu": cpu_name(), "cores": cpu_count()}
        # The GPU timing convention (docs/engine.md), said where a GPU figure is shown
        idle = any(r.result.spec.device.startswith("cuda") for r in shown)
        gpu = "GPU: CUDA events from an idle GPU, dispatch included" if idle else "GPU: CUDA events"
        con.print(
            f"{env['cpu']} ({env['cores']} cores) · medians after warm-up, ± = half the IQR · "
            f"CPU: perf_counter_ns, {gpu} · compile time excluded · "
            f"error vs {report.error_reference([r.result.spec.workload for r in shown])}",
            style="dim",
            highlight=False,
            markup=False,
        )
        for line in report.footnotes(shown):
            con.print(visible(line), style="dim", highlight=False, markup=False)
        print_noise(con, shown)


def print_noise(con: Any, rows: Sequence[Row]) -> None:
    """What else used the machine, and unstable spreads, in words, after the table; and the roof's state."""
    from gpuplay.core.measure.noise import unstable_advice

    for i, row in enumerate(rows, 1):
        for w in row.result.noise_lines(advice=False):
            con.print(f"⚠ [{i}] {visible(w)}", style="yellow", highlight=False, markup=False)
    unstable = [r.result for r in rows if r.result.unstable]
    if unstable:
        shortest = min(s.min for r in unstable if (s := r.summary) is not None)
        con.print(
            f"unstable results: {unstable_advice(shortest)}", style="yellow", highlight=False, markup=False
        )
    roofs = [r.result.roof_fields() for r in rows]
    problems = {str(f.get("note")) for f in roofs if f.get("status") == "not calibrated"}
    for p in sorted(problems):
        con.print(f"roof: {visible(p)}", style="dim", highlight=False, markup=False)
    # A result above its stored roof: the roof was measured low, never a fraction over 100 %.
    for i, f in enumerate(roofs, 1):
        if f.get("status") == "stale":
            con.print(
                f"⚠ [{i}] roof: {visible(str(f.get('note')))}", style="yellow", highlight=False, markup=False
            )


class ResultLog:
    """Appends each usable result to this command's session log the moment it finishes."""

    def __init__(self) -> None:
        from gpuplay.core.reports.sessionlog import SessionLog

        self.log = SessionLog()
        self._warned = False

    def __call__(self, result: Any) -> None:
        if result.usable and not self.log.append(result) and not self._warned:
            self._warned = True
            stderr_console().print(f"[yellow]warning:[/] {esc(self.log.error)}", highlight=False)


def log_results(results: Any) -> None:
    """Append finished results to the session log at once (commands that collect them first)."""
    log = ResultLog()
    for r in results:
        log(r)


def progress_line(done: int, total: int, result: Any) -> str:
    """One plain line per finished measurement, for a log file or a CI console (no live bar)."""
    from gpuplay.core.reports.report import fmt_time

    spec = result.spec
    what = f"[{done}/{total}] {spec.scenario or spec.workload} {spec.label()}"
    if result.status == "ok":
        return visible(f"{what}: {fmt_time(result.median)} ({result.size}, n={len(result.samples)})")
    return visible(f"{what}: {result.status}: {result.message}")


def report_interruption(name: str, shown: int, total: int, log: ResultLog) -> None:
    where = f"; logged to {log.log.path}" if log.log.path.exists() else ""
    stderr_console().print(
        f"interrupted by {name}: {shown} of {total} measurements finished{where}",
        style="yellow",
        highlight=False,
        markup=False,
        soft_wrap=True,  # the log's path stays one copyable piece
    )


def rich_table(rows: Sequence[Row], title: str = "") -> Any:
    """A terminal table narrow enough for 80 columns; notes go below it, numbered."""
    from rich.table import Table

    table = Table(
        title=plain(title) if title else None,
        header_style="bold",
        pad_edge=False,
        box=None,
        padding=(0, 1, 0, 0),
    )
    table.add_column("configuration", overflow="fold", min_width=14)
    # The note marker has a column of its own: appended to a folded configuration it would
    # wrap onto a line of its own at 80 columns.
    table.add_column("", no_wrap=True)
    table.add_column("compute", no_wrap=True)
    table.add_column("median", justify="right", no_wrap=True)
    table.add_column("±", justify="right", no_wrap=True)
    table.add_column("n", justify="right", no_wrap=True)
    table.add_column("GFLOP/s", justify="right", no_wrap=True)
    table.add_column("GB/s", justify="right", no_wrap=True)
    table.add_column("speedup", justify="right", no_wrap=True)
    table.add_column("error", justify="right", no_wrap=True)
    table.add_column("roof", justify="right", no_wrap=True)  # % of roof, M(emory)/C(ompute)-bound
    current = None
    for i, row in enumerate(rows, 1):
        cells = row_cells(row, noise=False)
        group = f"{cells[0]} · {cells[1]}"
        if group != current:
            table.add_row(plain(group, style="bold cyan"), *[""] * 10)
            current = group
        short = row.result.spec.label(with_dtype=False)
        marked = cells[NOTES] or row.result.noise_warnings
        table.add_row(plain(short), f"[{i}]" if marked else "", *(plain(c) for c in cells[3:12]))
    return table


class BusyNotice:
    """Says on stderr, once per holder, that the device is busy and this session waits: at once
    from the lock file (`now`, before the engine has even started) and then from the engine's
    wait (`on_phase`). Without it a waiting run looks hung."""

    def __init__(self, err: Any) -> None:
        self.err = err
        self.said: set[str] = set()

    def now(self, device: str) -> None:
        from gpuplay.core.engine.devicelock import who_holds

        said = who_holds(device)
        if said:
            self.say(said)

    def on_phase(self, name: str, _detail: str = "") -> None:
        from gpuplay.core.engine.devicelock import is_busy_message

        if is_busy_message(name):
            self.say(name)

    def say(self, text: str) -> None:
        if text not in self.said:
            self.said.add(text)
            self.err.print(visible(text), style="yellow", highlight=False, markup=False)
