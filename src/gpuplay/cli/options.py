"""Options shared by several commands, named after the RunSpec fields they set."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from gpuplay.core.catalogue import levers
from gpuplay.core.storage import bounds
from gpuplay.core.storage.safetext import visible


class FiniteFloat(click.ParamType):
    """A float within core.bounds' limits: NaN and infinity are usage errors (click's FloatRange
    lets NaN through, as every comparison with it is false)."""

    name = "float"

    def __init__(self, limits: tuple[float, float]) -> None:
        self.limits = limits

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, float):
            number = value
        else:
            try:
                number = float(value)
            except (TypeError, ValueError):
                self.fail(f"{value!r} is not a number", param, ctx)
        try:
            return float(bounds.check_number("", number, self.limits))
        except bounds.BoundsError as exc:
            self.fail(str(exc), param, ctx)

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        lo, hi = self.limits
        return f"FLOAT {lo:g}..{hi:g}"


def bounded_int(limits: tuple[int, int]) -> click.IntRange:
    return click.IntRange(*limits)


class OutPath(click.Path):
    """An output file's path, checked before anything runs: an empty one (an unset variable in a
    script) printed to stdout and exited 0 as if no --out had been given, and an unwritable one
    was found only after measuring, which was then lost."""

    def __init__(self) -> None:
        super().__init__(dir_okay=False)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not value.strip():
            self.fail("an empty path: name a file, or leave out --out to print", param, ctx)
        path = super().convert(value, param, ctx)
        import os

        from gpuplay.core.storage.writable import unwritable

        problem = unwritable(os.fsdecode(path))
        if problem:
            self.fail(f"cannot write {visible(str(path))}: {problem}", param, ctx)
        return path


def out_format(fmt: str, out: str | None, formats: tuple[str, ...], param: str = "fmt") -> str:
    """The format an output is written in (core/storage/writable.format_for_out): --format where
    it was given, else what --out's suffix says; a contradiction is a usage error, exit 2."""
    from gpuplay.core.storage.writable import format_for_out

    ctx = click.get_current_context()
    given = ctx.get_parameter_source(param) not in (
        click.core.ParameterSource.DEFAULT,
        click.core.ParameterSource.DEFAULT_MAP,
    )
    chosen, problem = format_for_out(fmt, given, out, formats)
    if problem:
        raise click.UsageError(problem)
    return chosen


class ThreadCount(click.ParamType):
    """CPU threads: at least 1, at most this machine's logical cores (more only oversubscribes)."""

    name = "integer"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        number = click.INT.convert(value, param, ctx)
        most = bounds.max_threads()
        if not 1 <= number <= most:
            self.fail(f"{number} threads: this machine has {most} logical cores; use 1 to {most}", param, ctx)
        return number

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return f"1..{bounds.max_threads()}"


class ScenarioFolder(click.Path):
    """A folder the user named for scenarios: one that is not there is bad input, exit 2 (it was a
    warning and exit 0, the scenarios in it silently missing); `scenario_dirs` in config.toml
    stays a warning, as a config file outlives its folders."""

    def __init__(self) -> None:
        super().__init__(file_okay=False)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        import os

        path = os.path.expanduser(os.fsdecode(value)) if isinstance(value, str | bytes) else value
        if isinstance(path, str) and not os.path.isdir(path):
            what = "is not a folder" if os.path.exists(path) else "does not exist"
            self.fail(f"{visible(path)} {what}: name a folder of scenario .toml files", param, ctx)
        return super().convert(value, param, ctx)


scenario_dirs_option = click.option(
    "--scenarios",
    "scenario_dirs",
    multiple=True,
    type=ScenarioFolder(),
    help="Extra folder of scenario .toml files (repeatable; also `scenario_dirs` in config.toml).",
)


def _click_option(lever: levers.Lever) -> Callable[[Any], Any]:
    """The click option a lever's row describes; its destination is the RunSpec field it sets."""
    decls = [lever.cli_flag, *([lever.short] if lever.short else [])]
    if lever.kind is bool:
        flag = lever.cli_flag.removeprefix("--")
        return click.option(f"--{flag}/--no-{flag}", lever.name, default=lever.default, help=lever.help)
    kw: dict[str, Any] = {"default": lever.default, "help": lever.help}
    if lever.choices:
        kw["type"] = click.Choice(lever.choices)
    elif lever.limits is levers.cpu_threads:
        kw["type"] = ThreadCount()
    elif isinstance(lever.limits, tuple):
        kw["type"] = FiniteFloat(lever.limits) if lever.kind is float else bounded_int(lever.limits)  # type: ignore[arg-type]
    kw["show_default"] = lever.default is not None
    return click.option(*decls, lever.name, **kw)


def _threads_option() -> Callable[[Any], Any]:
    """--threads for commands without the full lever set: run's option, its words and bounds."""
    lever = next(lv for lv in levers.spec_levers() if lv.name == "threads")
    return click.option("--threads", type=ThreadCount(), default=None, help=lever.help)


threads_option = _threads_option()


# Generated from core/catalogue/levers.py: one option per RunSpec lever (workload parameters: -s NAME=VALUE).
SPEC_OPTIONS: list[Callable[[Any], Any]] = [_click_option(lv) for lv in levers.spec_levers()]
SPEC_FIELDS = tuple(lv.name for lv in levers.spec_levers())


def spec_options(f: Any) -> Any:
    for opt in reversed(SPEC_OPTIONS):
        f = opt(f)
    return f


def pop_spec_fields(kw: dict[str, Any]) -> dict[str, Any]:
    """Take the RunSpec fields out of a command's keyword arguments."""
    return {name: kw.pop(name) for name in SPEC_FIELDS if name in kw}


def parse_assignments(items: tuple[str, ...], hint: str = "--size") -> dict[str, str]:
    """NAME=VALUE pairs, as given with -s/--size."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected NAME=VALUE, got {item!r}", param_hint=hint)
        out[key.strip()] = value.strip()
    return out


def scenario_dirs(ctx: click.Context, local: tuple[str, ...]) -> tuple[str, ...]:
    """Folders given before the command (`gpuplay --scenarios D list`) and after it."""
    root = ctx.find_root()
    inherited = tuple((root.obj or {}).get("scenario_dirs", ())) if root is not None else ()
    return (*inherited, *local)
