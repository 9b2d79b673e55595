"""gpuplay in Jupyter: `%load_ext gpuplay`, then

    %gpuplay run matmul -b torch -p quick      a line magic taking `gpuplay run`'s arguments
    %gpuplay compare matmul -p quick           (also compare and sweep: the API's arguments)
    %gpuplay tune matmul -p quick              the levers ladder (`gpuplay tune`'s arguments)
    %%gpuplay -b numpy,torch -p quick          a cell magic: the cell is a code file (PARAMS,
                                               PRESETS, inputs, step) measured on each backend

Each returns the API's object (Result, Results, Sweep), which displays itself as a table (and a
sweep as a chart). `gpuplay run`'s flags are parsed by its own click command, so they mean here
exactly what they mean on the command line.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from gpuplay import api

USAGE = (
    "usage: %gpuplay run SCENARIO|FILE.py [gpuplay run options]  ·  "
    "%gpuplay compare SCENARIO [-b numpy,torch] [-p PRESET]  ·  "
    "%gpuplay sweep SCENARIO --over n=256..4096 [-b numpy,torch]  ·  "
    "%gpuplay tune SCENARIO|FILE.py [-d DEVICE] [-p PRESET] [--budget-total S]  ·  "
    "%%gpuplay [gpuplay run options; -b numpy,torch and -d take lists] (cell: a code file)"
)


class MagicUsageError(ValueError):
    """Arguments a magic cannot use, said with its usage."""


def _run_args(argv: list[str]) -> dict[str, Any]:
    """`gpuplay run`'s command line, parsed by its click command, as api.run keywords."""
    import click

    from gpuplay.cli.options import SPEC_FIELDS, parse_assignments
    from gpuplay.cli.run import run as run_command

    try:
        ctx = run_command.make_context("gpuplay run", list(argv), resilient_parsing=False)
    except click.exceptions.Exit:
        raise MagicUsageError(USAGE) from None
    except click.ClickException as exc:
        said = exc.format_message()
        if isinstance(exc, click.NoSuchOption):  # `--json` → `--format`, as on the command line
            from gpuplay.cli import better_no_such_option

            said = better_no_such_option(exc, list(argv)) or said
        raise MagicUsageError(f"{said}\n{USAGE}") from None
    from click.core import ParameterSource

    _DEFAULT = ParameterSource.DEFAULT
    p = ctx.params
    unsupported = [flag for flag, on in (("--format", p.get("fmt") != "table"), ("--out", p.get("out")),
                                         ("--profile", p.get("profile")), ("--trace", p.get("trace"))) if on]  # fmt: skip
    if unsupported:
        raise MagicUsageError(_not_taken(unsupported))
    try:
        params = parse_assignments(tuple(p.get("sizes") or ()))
    except click.ClickException as exc:
        raise MagicUsageError(exc.format_message()) from None
    levers = {k: p[k] for k in SPEC_FIELDS if k in p}
    return {
        "scenario": p["scenario"],
        "preset": p.get("preset"),
        "params": params,
        # As the API: paired with NumPy (so the table has a speedup) unless --no-baseline is given.
        "baseline": p["baseline"] if ctx.get_parameter_source("baseline") is not _DEFAULT else True,
        "scenario_dirs": tuple(p.get("scenario_dirs") or ()),
        **levers,
    }


def _tune_args(argv: list[str]) -> dict[str, Any]:
    """`gpuplay tune`'s command line, parsed by its click command, as api.tune keywords."""
    import click

    from gpuplay.cli.options import parse_assignments
    from gpuplay.cli.tune import tune as tune_command

    try:
        ctx = tune_command.make_context("gpuplay tune", list(argv), resilient_parsing=False)
        params = {k: _number(v) for k, v in parse_assignments(tuple(ctx.params.get("sizes") or ())).items()}
    except click.exceptions.Exit:
        raise MagicUsageError(USAGE) from None
    except click.ClickException as exc:
        raise MagicUsageError(f"{exc.format_message()}\n{USAGE}") from None
    p = ctx.params
    unsupported = [
        flag for flag, on in (("--format", p.get("fmt") != "table"), ("--out", p.get("out"))) if on
    ]
    if unsupported:
        raise MagicUsageError(_not_taken(unsupported, "tune"))
    return {
        "target": p["target"],
        "device": p.get("device"),
        "preset": p.get("preset"),
        "params": params,
        "budget_s": float(p["budget_total"]),
        "scenario_dirs": tuple(p.get("scenario_dirs") or ()),
    }


OUTPUT_FLAGS = ("--format", "--out", "--profile", "--trace")


def _not_taken(flags: list[str], verb: str = "run") -> str:
    return (
        f"{', '.join(flags)}: not taken by the magic, whose result displays itself as a table; for "
        f"JSON or a file keep it (r = %gpuplay {verb} …) and use r.to_dict() or r.to_pandas(), or run "
        f"the command itself: !gpuplay {verb} … --format json --out FILE"
    )


def _options(argv: list[str]) -> tuple[list[str], dict[str, Any]]:
    """Positional words and `--name value` options (compare, sweep, the cell magic)."""
    short = {"-b": "backends", "-d": "devices", "-p": "preset", "-s": "size", "-t": "dtype"}
    words: list[str] = []
    opts: dict[str, Any] = {}
    it = iter(argv)
    for a in it:
        if a.startswith("-"):
            key = short.get(a) or a.lstrip("-").replace("-", "_")
            try:
                value = next(it)
            except StopIteration:
                raise MagicUsageError(f"{a} needs a value\n{USAGE}") from None
            if key == "size":
                opts.setdefault("params", {}).update(_assignment(value))
            else:
                opts[key] = value
        else:
            words.append(a)
    return words, opts


def _assignment(text: str) -> dict[str, Any]:
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise MagicUsageError(f"expected NAME=VALUE, got {text!r}")
    return {name.strip(): _number(value.strip())}


def _number(text: str) -> Any:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


def _split(key: str, opts: dict[str, Any]) -> None:
    if key in opts and isinstance(opts[key], str):
        opts[key] = [x.strip() for x in opts[key].split(",") if x.strip()]


def line_magic(line: str) -> Any:
    try:
        argv = shlex.split(line)
    except ValueError as exc:
        raise MagicUsageError(f"{exc}\n{USAGE}") from None
    if not argv:
        raise MagicUsageError(USAGE)
    verb, rest = argv[0], argv[1:]
    if verb == "run":
        kw = _run_args(rest)
        return api.run(kw.pop("scenario"), **kw)
    if verb == "tune":
        return api.tune(**_tune_args(rest))
    words, opts = _options(rest)
    for key in ("backends", "devices", "dtypes", "variants"):
        _split(key, opts)
    if verb == "compare":
        if len(words) > 1:
            raise MagicUsageError(f"one scenario at a time here\n{USAGE}")
        opts.pop("params", None)
        return _call(api.compare, words[0] if words else None, **_typed(opts))
    if verb == "sweep":
        if len(words) != 1 or "over" not in opts:
            raise MagicUsageError(USAGE)
        param, _, values = str(opts.pop("over")).partition("=")
        opts.pop("params", None)
        return _call(api.sweep, words[0], {param.strip(): values.strip()}, **_typed(opts))
    raise MagicUsageError(f"unknown verb {verb!r}\n{USAGE}")


def _call(f: Any, *args: Any, **kw: Any) -> Any:
    """An API call with the magic's options: one it does not take is a usage error naming it."""
    import inspect

    unknown = sorted(set(kw) - set(inspect.signature(f).parameters))
    output = [flag for flag in OUTPUT_FLAGS if flag.lstrip("-") in unknown]
    if output:  # the command's own output flags: said as for run, not as an unknown option
        raise MagicUsageError(_not_taken(output, getattr(f, "__name__", "run")))
    if unknown:
        raise MagicUsageError(f"unknown option(s) {', '.join('--' + u for u in unknown)}\n{USAGE}")
    return f(*args, **kw)


def _typed(opts: dict[str, Any]) -> dict[str, Any]:
    for key in ("budget", "budget_s", "max_step", "max_step_s"):
        if key in opts:
            opts[key if key.endswith("_s") else f"{key}_s"] = float(opts.pop(key))
    for key in ("warmup", "threads"):
        if key in opts:
            opts[key] = int(opts[key])
    return opts


def _cell_command() -> Any:
    """`gpuplay run`'s own click options for the cell magic, so a flag means what it means on the
    command line: all but the scenario (the cell is the code), the output flags (the result
    displays itself), and `-b`/`-d`, which take lists here (one row per backend and device)."""
    import click

    from gpuplay.cli.run import run as run_command

    dropped = {"scenario", "backend", "device", "fmt", "out", "profile", "trace", "scenario_dirs"}
    return click.Command("%%gpuplay", params=[
        *(p for p in run_command.params if p.name not in dropped),
        click.Option(["--backends", "--backend", "-b", "backends"], default="numpy,torch",
                     help="Comma-separated backends."),
        click.Option(["--devices", "--device", "-d", "devices"], default=None,
                     help="Comma-separated devices (default: each one a backend has)."),
        click.Option(["--name"], default="cell", help="The code file's name (an identifier)."),
    ])  # fmt: skip


def cell_magic(line: str, cell: str) -> Any:
    """The cell as a code file, measured on each backend named (NumPy and PyTorch by default)."""
    import click
    from click.core import ParameterSource

    from gpuplay.cli.options import SPEC_FIELDS, parse_assignments

    try:
        argv = shlex.split(line)
    except ValueError as exc:
        raise MagicUsageError(f"{exc}\n{USAGE}") from None
    try:
        ctx = _cell_command().make_context("%%gpuplay", argv, resilient_parsing=False)
        params = {k: _number(v) for k, v in parse_assignments(tuple(ctx.params.get("sizes") or ())).items()}
    except click.exceptions.Exit:
        raise MagicUsageError(USAGE) from None
    except click.NoSuchOption as exc:
        if exc.option_name in OUTPUT_FLAGS:
            raise MagicUsageError(_not_taken([exc.option_name])) from None
        raise MagicUsageError(f"{exc.format_message()}\n{USAGE}") from None
    except click.ClickException as exc:
        raise MagicUsageError(f"{exc.format_message()}\n{USAGE}") from None
    p = ctx.params

    def given(name: str) -> bool:
        return ctx.get_parameter_source(name) is not ParameterSource.DEFAULT

    path = _cell_file(cell, str(p["name"]))
    sc = api._scenario(path)
    preset = p.get("preset")
    if params:  # -s NAME=VALUE over the preset: a preset of the cell's own
        import dataclasses

        sc = dataclasses.replace(sc, presets={**sc.presets, "_magic": {**sc.preset_params(preset), **params}})
        preset = "_magic"
    # The levers the user set (defaults left to the spec), as `gpuplay run` passes them.
    levers = {k: p[k] for k in SPEC_FIELDS if k in p and k != "dtype" and given(k)}
    return api._compare_scenarios(
        [sc], backends=p["backends"], devices=p["devices"], variants=("base",),
        dtype=str(p.get("dtype") or "float32"), preset=preset, budget_s=levers.pop("budget_s", None),
        threads=levers.pop("threads", None), max_step_s=levers.pop("max_step_s", None), progress=True,
        levers=levers, paired=p["baseline"] if given("baseline") else True,
    )  # fmt: skip


def _cell_file(cell: str, name: str) -> Path:
    if not name.isidentifier():
        raise MagicUsageError(f"--name must be an identifier; got {name!r}")
    if not api._code_dir:
        import tempfile

        api._code_dir.append(tempfile.TemporaryDirectory(prefix="gpuplay-measure-"))
    path = Path(api._code_dir[0].name) / f"{name}.py"
    path.write_text(cell, encoding="utf-8")
    return path


def load_ipython_extension(ipython: Any) -> None:
    from IPython.core.error import UsageError

    from gpuplay.core.storage.safetext import visible

    # The user's own input (a bad flag, an unknown scenario, a configuration that cannot run
    # here): IPython's UsageError, which it shows as one red line, never a traceback; the cell
    # then counts as failed (nbclient, "Run all" stop there), as a magic's misuse does.
    def gpuplay_line(line: str) -> Any:
        try:
            return line_magic(line)
        except (ValueError, TypeError, api.Refused) as exc:
            raise UsageError(visible(f"gpuplay: {exc}")) from None

    def gpuplay_cell(line: str, cell: str) -> Any:
        try:
            return cell_magic(line, cell)
        except (ValueError, TypeError, api.Refused) as exc:
            raise UsageError(visible(f"gpuplay: {exc}")) from None

    ipython.register_magic_function(gpuplay_line, "line", "gpuplay")
    ipython.register_magic_function(gpuplay_cell, "cell", "gpuplay")
