"""Options shared by several commands, named after the RunSpec fields they set."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from gpuplay.core import bounds
from gpuplay.core.spec import (
    ALLOC_MODES,
    AMP_MODES,
    BACKENDS,
    CACHE_MODES,
    COMPILE_MODES,
    DTYPES,
    LINALG_LIBRARIES,
)


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


scenario_dirs_option = click.option(
    "--scenarios",
    "scenario_dirs",
    multiple=True,
    type=click.Path(file_okay=False),
    help="Extra folder of scenario .toml files (repeatable; also `scenario_dirs` in config.toml).",
)

# Each option's destination is the RunSpec field it sets, so `spec_fields` needs no mapping table.
SPEC_OPTIONS: list[Callable[[Any], Any]] = [
    click.option("--backend", "-b", type=click.Choice(BACKENDS), default="numpy", show_default=True),
    click.option("--device", "-d", default="cpu", show_default=True, help="cpu, cuda, cuda:N or mps."),
    click.option("--dtype", type=click.Choice(DTYPES), default="float32", show_default=True),
    click.option(
        "--amp",
        type=click.Choice(AMP_MODES),
        default="off",
        show_default=True,
        help="torch.autocast precision.",
    ),
    click.option(
        "--compile",
        "compile",
        type=click.Choice(COMPILE_MODES),
        default="off",
        show_default=True,
        help="torch.compile mode (compile time is reported apart).",
    ),
    click.option("--tf32/--no-tf32", default=False, help="Allow TF32 tensor-core matmuls (torch, CUDA)."),
    click.option(
        "--graphs/--no-graphs",
        "cuda_graphs",
        default=False,
        help="Replay each step as a CUDA graph (torch, CUDA).",
    ),
    click.option(
        "--linalg",
        "linalg_library",
        type=click.Choice(LINALG_LIBRARIES),
        default="default",
        help="Preferred torch CUDA linear-algebra library.",
    ),
    click.option(
        "--transfers/--no-transfers",
        default=False,
        help="Time host→device input copies and the result's copy back inside each step.",
    ),
    click.option(
        "--cache",
        type=click.Choice(CACHE_MODES),
        default="warm",
        show_default=True,
        help="cold: flush the L2 (GPU) or last-level cache (CPU) between steps, outside the timing.",
    ),
    click.option("--warmup", type=bounded_int(bounds.WARMUP), default=3, show_default=True),
    click.option(
        "--repeat",
        type=bounded_int(bounds.REPEAT),
        default=None,
        help="Timed steps (default: as many as fit in --budget, at least 5).",
    ),
    click.option(
        "--budget",
        "budget_s",
        type=FiniteFloat(bounds.BUDGET_S),
        default=1.0,
        show_default=True,
        help="Seconds of timed steps when --repeat is not given.",
    ),
    click.option(
        "--threads",
        type=ThreadCount(),
        default=None,
        help="CPU threads for torch and NumPy's BLAS (default: the libraries' own).",
    ),
    click.option(
        "--max-step",
        "max_step_s",
        type=FiniteFloat(bounds.MAX_STEP_S),
        default=30.0,
        show_default=True,
        help="Refuse a configuration whose single step is estimated longer (seconds).",
    ),
    click.option("--seed", type=bounded_int(bounds.SEED), default=0, show_default=True),
    click.option(
        "--alloc",
        type=click.Choice(ALLOC_MODES),
        default="warm",
        show_default=True,
        help="Host allocation mode: warm reuses freed pages between steps; cold returns them to the "
        "OS each step (a fresh process's first-touch page faults).",
    ),
]

SPEC_FIELDS = (
    "backend", "device", "dtype", "amp", "compile", "tf32", "cuda_graphs", "linalg_library",
    "transfers", "cache", "warmup", "repeat", "budget_s", "threads", "max_step_s", "seed", "alloc",
)  # fmt: skip


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
