"""The `gpuplay` command: the playground with no arguments, headless subcommands otherwise.

Each subcommand lives in a module of its own and imports what it needs inside the
command: `gpuplay --help` loads neither Textual nor torch.
"""

from __future__ import annotations

import contextlib
import sys

from gpuplay.core.process.command import is_gpuplay_command

if is_gpuplay_command(sys.argv):  # the command itself, not a program that imports its `main`
    from gpuplay.cli.interrupt import exit_at_start
    from gpuplay.cli.streams import stand_in_for_closed

    exit_at_start()  # Ctrl+C from here on: one line, exit 130 (cli/interrupt.py)
    stand_in_for_closed()  # `2>&-` or `>&-`: cli/streams.py

from gpuplay.core.engine.process import start_early  # noqa: E402

start_early()  # `run`, `sweep`, `compare`: the engine starts before the imports below (~0.25 s)

from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import click  # noqa: E402

from gpuplay import __version__  # noqa: E402
from gpuplay.cli.exitcodes import HELP as EXIT_HELP  # noqa: E402
from gpuplay.cli.options import scenario_dirs_option  # noqa: E402


def _quiet_stdout() -> None:
    import os
    import sys

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real file descriptor (a test's captured stream)
        pass


class _Gpuplay(click.Group):
    """The group, with one failure every command can meet turned into words: an engine process
    that cannot start (the interpreter gone or not executable after an upgrade) exits 1 with what
    could not start and why, never a traceback.

    Its subcommands are imported the first time any is looked up or listed: `gpuplay` alone (the
    playground) imports none of them, nor what they import (the report, the comparisons, NumPy:
    ~80 ms of the app's first frame on the 2-core machine)."""

    _loaded = False

    @property  # type: ignore[override]
    def commands(self) -> dict[str, click.Command]:
        if not self._loaded:
            self._loaded = True
            _register()
        return self._commands

    @commands.setter
    def commands(self, value: dict[str, click.Command]) -> None:
        self._commands = value

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The named subcommand, importing its module alone: `gpuplay run` imports none of the
        other ten (the calibration report, the server, the collectives: ~25 ms of a NumPy run's
        0.6 s on the 2-core machine). Any listing loads them all."""
        if not self._loaded and cmd_name in COMMAND_MODULES:
            if cmd_name not in self._commands:
                self._commands[cmd_name] = _command_of(COMMAND_MODULES[cmd_name])
            return self._commands[cmd_name]
        return super().get_command(ctx, cmd_name)

    def main(self, *args: Any, **kwargs: Any) -> Any:
        from gpuplay.cli.streams import StdoutClosed

        try:
            try:
                return super().main(*args, **kwargs)
            except StdoutClosed:  # here, not in invoke: --help and --version write while parsing
                click.echo("gpuplay: stdout is closed, so the output had nowhere to go (where the command "
                           "has --out FILE, that writes it to a file)", err=True)  # fmt: skip
                sys.exit(1)
        except SystemExit as exc:  # every command's end, click's own sys.exit included
            _end_now(exc.code)
            raise

    def invoke(self, ctx: click.Context) -> object:
        from gpuplay.cli.interrupt import at_command, say_interrupted

        at_command()
        words = [*getattr(ctx, "_protected_args", ()), *ctx.args]  # the subcommand and its arguments
        try:
            return super().invoke(ctx)
        except click.NoSuchOption as exc:
            better = better_no_such_option(exc, words)
            if better is None:
                raise
            raise click.UsageError(better, ctx=exc.ctx) from None
        except KeyboardInterrupt:
            # Ctrl+C outside a measurement (its planning, a listing): the line and the status a
            # stopped measurement gives, not click's "Aborted!" and exit 1.
            say_interrupted()
            ctx.exit(130)
        except BrokenPipeError:
            # The reader left early (`gpuplay history | head -1`): normal for a CLI, so no traceback,
            # no error line and exit 0, not Click's exit 1. Output still buffered goes to /dev/null,
            # or flushing it at interpreter exit would fail again and print "Exception ignored".
            _quiet_stdout()
            ctx.exit(0)
        except RuntimeError as exc:
            from gpuplay.core.engine.client import EngineStartError

            if _from_interrupt(exc):
                # Ctrl+C inside an import's class body: Python re-raises it as the RuntimeError of
                # the `__set_name__` it landed in ("Error calling __set_name__ on 'Field' instance"
                # from a dataclass), KeyboardInterrupt its cause; seen at 0.1 s into a run on a
                # loaded machine. Still the user's Ctrl+C: the same line and 130.
                say_interrupted()
                ctx.exit(130)
            if not isinstance(exc, EngineStartError):
                raise
            from gpuplay.core.storage.safetext import visible

            click.echo(f"gpuplay: {visible(exc)}", err=True)
            ctx.exit(1)


def _from_interrupt(exc: BaseException) -> bool:
    """Whether a KeyboardInterrupt is behind `exc` (its cause or context, at any depth)."""
    seen: set[int] = set()
    at: BaseException | None = exc
    while at is not None and id(at) not in seen:
        if isinstance(at, KeyboardInterrupt):
            return True
        seen.add(id(at))
        at = at.__cause__ or at.__context__
    return False


@click.group(
    cls=_Gpuplay,
    invoke_without_command=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=EXIT_HELP,
)
@click.version_option(__version__, prog_name="gpuplay")
@scenario_dirs_option
@click.option(
    "--code",
    "code_files",
    multiple=True,
    type=click.Path(dir_okay=False),
    metavar="FILE.py",
    help="Open your own code file as a scenario, reloaded when saved (repeatable; also `code_files` "
    "in config.toml). It runs with your rights, like `python FILE.py`.",
)
@click.option(
    "--theme", default=None, help="A Textual theme for the playground, e.g. projector, projector-light."
)
@click.pass_context
def main(
    ctx: click.Context, scenario_dirs: tuple[str, ...], code_files: tuple[str, ...], theme: str | None
) -> None:
    """An interactive GPU playground for numerical Python.

    With no command, opens the live playground (a terminal UI).
    """
    ctx.ensure_object(dict)
    ctx.obj["scenario_dirs"] = scenario_dirs
    if ctx.invoked_subcommand is None:
        from gpuplay.cli.terminal import require_terminal

        require_terminal("the playground")
        from gpuplay.tui.app import run_app

        try:
            run_app(
                scenario_dirs=[Path(d) for d in scenario_dirs],
                code_files=_code_files(code_files),
                theme=theme,
            )
        except ValueError as exc:  # an unknown theme, named with the known ones
            raise click.BadParameter(str(exc), param_hint="--theme") from None
    elif code_files:
        raise click.UsageError(
            "--code opens the playground; for a command, name the file: gpuplay run FILE.py"
        )


# Flags a new user types for an output format: each is a value of --format.
_FORMAT_FLAGS = {"--json": "json", "--csv": "csv", "--markdown": "markdown", "--md": "markdown",
                 "--table": "table"}  # fmt: skip


def better_no_such_option(exc: click.NoSuchOption, words: list[str]) -> str | None:
    """An unknown flag answered with what was meant: `--json` is `--format json`, `--code FILE.py`
    after a command is `gpuplay run FILE.py` (--code is the playground's), else the closest flag
    (click's own suggestions are the flags that merely share a prefix: `--code` got --compile,
    --dtype and --trace)."""
    from gpuplay.core.storage.argcheck import closest
    from gpuplay.core.storage.safetext import visible

    name = exc.option_name
    cmd = exc.ctx.command if exc.ctx is not None else None
    flags = [
        o for p in (cmd.params if cmd else []) for o in (*p.opts, *p.secondary_opts) if o.startswith("--")
    ]
    fmt_param = next((p for p in (cmd.params if cmd else []) if p.name == "fmt"), None)
    choices = getattr(fmt_param.type, "choices", ()) if fmt_param is not None else ()
    hint = ""
    if name in _FORMAT_FLAGS and _FORMAT_FLAGS[name] in choices:
        hint = f"for {_FORMAT_FLAGS[name]} output use --format {_FORMAT_FLAGS[name]}"
    elif name in _FORMAT_FLAGS and choices:
        hint = f"--format takes {', '.join(map(str, choices))}"
    elif name == "--code":
        after = words[words.index("--code") + 1] if "--code" in words[:-1] else "FILE.py"
        hint = (
            f"to time a code file name it: gpuplay run {visible(after)} "
            f"(--code goes before any command and opens the playground: gpuplay --code {visible(after)})"
        )
    else:
        near = closest(name, flags)
        if near:
            hint = f"did you mean {near[0]}?"
    return f"No such option {visible(name)}: {hint}" if hint else None


def _end_now(code: object) -> None:
    """The command has ended with exit status `code` (SystemExit's): its output is written, every
    result is in the session log (a line written and closed as each arrived), the playground's
    terminal is restored and the engine ended. What is left is the interpreter tearing down
    ~1,000 modules: 60–75 ms of the 0.15 s from `q` to the shell, ~20 ms of a NumPy `run`'s
    0.6 s on the 2-core machine. Skipped, as many CLIs do, with os._exit after the
    atexit handlers (the engine clients' shutdown, the session log's last sync, a temporary
    folder's finalizer) and the streams' flush; every thread gpuplay starts is a daemon whose
    work an atexit handler finishes. tests/e2e/test_e2e_tmux.py checks the terminal and the log
    after `q`, tests/unit/test_own_speed_round6.py a command's status, output and log. Only the `gpuplay`
    process itself ends so: a program that calls `main` (a test, a notebook) gets its
    SystemExit, and so does one watched by a profiler, a tracer or a debugger (`python -m
    cProfile -m gpuplay`, pyinstrument, coverage): it writes its report as the interpreter ends."""
    import atexit
    import os

    if not is_gpuplay_command(sys.argv) or _watched():
        return
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:  # sys.exit("words"): said on stderr with status 1, as the interpreter would
        status = 1
        with contextlib.suppress(OSError, ValueError):
            print(code, file=sys.stderr)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed, or a reader gone
            pass
    os._exit(status & 0xFF)


def _watched() -> bool:
    """A profiler, tracer, coverage or debugger is attached: sys.setprofile/settrace, or from
    Python 3.12 a sys.monitoring tool (cProfile's own there)."""
    if sys.getprofile() is not None or sys.gettrace() is not None:
        return True
    monitoring = getattr(sys, "monitoring", None)
    return monitoring is not None and any(monitoring.get_tool(i) is not None for i in range(6))


def _code_files(given: tuple[str, ...]) -> list[Path]:
    """The --code files: one that cannot be read is a message now. One that does not load yet (a
    syntax error while it is being written) opens the app with a warning, and is picked up when
    it is saved fixed: hot reload is what --code is for."""
    from gpuplay.core.workloads.usercode import UserCodeError, read_source

    paths = [Path(g).expanduser().resolve() for g in given]
    for path in paths:
        try:
            read_source(path)
        except UserCodeError as exc:
            raise click.UsageError(exc.summary + (f"\n{exc.detail}" if exc.detail else "")) from None
    return paths


# Each subcommand's name and the module under gpuplay.cli that defines it as `command`.
COMMAND_MODULES = {
    "info": "info",
    "list": "listing",
    "run": "run",
    "compare": "compare",
    "monitor": "monitor",
    "history": "history",
    "calibrate": "calibrate",
    "collectives": "collectives",
    "demo": "demo",
    "serve": "serve",
    "sweep": "sweep",
    "tune": "tune",
}


def _command_of(module: str) -> click.Command:
    # An import statement's own machinery, not importlib.import_module: `python -X importtime`
    # (the guard tests') lists only what the statement imports.
    __import__(f"gpuplay.cli.{module}")
    command: click.Command = sys.modules[f"gpuplay.cli.{module}"].command
    return command


def _register() -> None:
    for name, module in COMMAND_MODULES.items():
        if name not in main._commands:
            main.add_command(_command_of(module))
