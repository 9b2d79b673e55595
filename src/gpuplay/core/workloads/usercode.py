"""A user's own code file as a workload: `step(xp, *arrays)` on every backend, checked against float64.

A code file is named by a spec as ``code:/absolute/path.py``, so a separate engine
process can load it from the spec alone. Reading what a file declares (title,
parameters, presets, the shape of `step` and `inputs`) parses it with `ast` and
runs nothing: the UI can list and show a code file without executing it. Only the
measurement (inputs, step, reference, flops/bytes) imports the module, and it does
so with the user's rights, exactly like ``python FILE.py``.

Trust: code files come from the command line or `code_files` in the user's
config.toml. Scenario files are data and can never name code (see scenarios.py).
"""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import importlib
import importlib.util
import linecache
import math
import sys
import threading
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuplay.core.process.lazynumpy import lazy_numpy
from gpuplay.core.storage.safeload import read_text_file
from gpuplay.core.workloads.base import EPS, Param, Workload
from gpuplay.core.workloads.usercode_errors import Frame, UserCodeError

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_numpy(globals())

PREFIX = "code:"
MAX_FILE_BYTES = 1024 * 1024
_PARAM_KEYS = {"default", "help", "min", "max", "choices", "size"}


# -- errors: in usercode_errors (the runner names them without importing this loader) -----------
def frame_lines(detail: str) -> list[int]:
    """Line numbers named in a `UserCodeError.detail` (for highlighting the source)."""
    out = []
    for line in detail.splitlines():
        head, sep, rest = line.strip().partition(", line ")
        if sep and head.startswith("File "):
            num = rest.split(",", 1)[0]
            if num.isdigit():
                out.append(int(num))
    return out


# -- naming a file in a spec ------------------------------------------------------
def is_code_ref(name: str) -> bool:
    return name.startswith(PREFIX)


def code_ref(path: Path | str) -> str:
    """The workload name a spec uses for a code file: ``code:`` and its absolute path."""
    return PREFIX + str(Path(path).expanduser().resolve())


def ref_path(name: str) -> Path:
    return Path(name[len(PREFIX) :])


# -- what a file declares, read without running it ----------------------------------
@dataclass(frozen=True)
class CodeInfo:
    path: Path
    source: str
    sha256: str
    title: str
    description: str
    params: tuple[Param, ...]
    presets: dict[str, dict[str, Any]]
    tolerance: dict[str, float]
    step_arrays: int | None  # arrays `step` takes after xp; None: *arrays
    step_params: tuple[str, ...]  # PARAMS passed to step as keywords (its keyword-only arguments)
    has_flops: bool
    has_bytes: bool
    step_line: int = 0
    amp_eligible: bool = False  # has an op torch.autocast lowers (matmul-like), read from the syntax
    notes: tuple[str, ...] = field(default_factory=tuple)
    # inputs()'s keyword arguments with a literal default that PARAMS does not declare: not
    # parameters (only PARAMS are), named when a user sets or sweeps one
    input_defaults: dict[str, Any] = field(default_factory=dict)


def read_source(path: Path) -> str:
    if not path.exists():
        raise UserCodeError(path, "no such file", hint="check the path")
    if not path.is_file():
        raise UserCodeError(path, "not a file", hint="name a .py file")
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise UserCodeError(path, f"larger than {MAX_FILE_BYTES // 1024} KiB; not a code file")
        return read_text_file(path)  # opened without waiting: a FIFO swapped in after is_file() is refused
    except UnicodeDecodeError as exc:
        raise UserCodeError(path, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise UserCodeError(path, f"cannot read ({exc.strerror or exc})") from None


def inspect_code(path: Path, source: str | None = None) -> CodeInfo:
    """Check a code file's shape from its syntax tree. Raises UserCodeError saying what to fix."""
    source = read_source(path) if source is None else source
    mod = _ParsedFile(path, source)
    step = mod.function("step", hint="add def step(xp, *arrays): ... returning an array")
    step_arrays = _check_step(path, step)
    params = _params(path, mod.literal("PARAMS", {}))
    names = [p.name for p in params]
    _check_helpers(mod, names)
    presets = _presets(path, mod.literal("PRESETS", {}), params)
    tolerance = _tolerance(path, mod.literal("TOLERANCE", {}))
    title = mod.literal("TITLE", "")
    if not isinstance(title, str):
        raise UserCodeError(path, "TITLE must be a string")
    doc = ast.get_docstring(mod.tree) or ""
    takes_kwargs = step.args.kwarg is not None
    keywords = {k.arg for k in step.args.kwonlyargs}
    return CodeInfo(
        path=path,
        source=source,
        sha256=hashlib.sha256(source.encode()).hexdigest(),
        title=title or (doc.strip().splitlines()[0] if doc.strip() else path.stem),
        description=doc,
        params=params,
        presets=presets,
        tolerance=tolerance,
        step_arrays=step_arrays,
        step_params=tuple(n for n in names if takes_kwargs or n in keywords),
        has_flops="flops" in mod.funcs,
        has_bytes="bytes" in mod.funcs,
        step_line=step.lineno,
        amp_eligible=_has_autocast_op(mod.tree),
        input_defaults=_literal_defaults(mod.funcs["inputs"], names),
    )


def _literal_defaults(fn: ast.FunctionDef | ast.AsyncFunctionDef, params: list[str]) -> dict[str, Any]:
    """`fn`'s keyword arguments with literal defaults, those not in `params`: `def inputs(rng, n=1000)`."""
    a = fn.args
    positional = [*a.posonlyargs, *a.args]
    pairs = [*zip(positional[len(positional) - len(a.defaults) :], a.defaults, strict=True),
             *((k, d) for k, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is not None)]  # fmt: skip
    out: dict[str, Any] = {}
    for arg, node in pairs:
        with contextlib.suppress(ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            value = ast.literal_eval(node)
            if arg.arg not in params and isinstance(value, int | float | str) and not isinstance(value, bool):
                out[arg.arg] = value
    return out


class _ParsedFile:
    """A code file's syntax tree: its top-level functions and assignments, read without running it."""

    def __init__(self, path: Path, source: str) -> None:
        self.path, self.source = path, source
        try:
            self.tree = ast.parse(source, filename=str(path))
        except SyntaxError as exc:
            line = (exc.text or "").rstrip("\n").strip()
            frames = (Frame(exc.lineno or 0, "<module>", line),)
            raise UserCodeError(path, f"SyntaxError: {exc.msg}", frames) from None
        self.funcs: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self.assigns: dict[str, ast.expr] = {}
        for node in self.tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                self.funcs[node.name] = node
            elif target := _assigned_name(node):
                self.assigns[target] = node.value  # type: ignore[attr-defined]

    def function(self, name: str, hint: str) -> ast.FunctionDef | ast.AsyncFunctionDef:
        fn = self.funcs.get(name)
        if fn is None:
            raise UserCodeError(self.path, f"defines no {name}() function", hint=hint)
        return fn

    def literal(self, name: str, default: Any) -> Any:
        """The value a top-level name is assigned, which must be a literal; `default` if unassigned."""
        if name not in self.assigns:
            return default
        node = self.assigns[name]
        try:
            return ast.literal_eval(node)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            raise UserCodeError(
                self.path,
                f"{name} must be a literal (numbers, strings, lists, dicts)",
                (Frame(node.lineno, "<module>", ast.get_source_segment(self.source, node) or ""),),
                "gpuplay reads it without running your file",
            ) from None


def _assigned_name(node: ast.stmt) -> str | None:
    """`NAME = value` or `NAME: type = value` at the top level: NAME."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        return node.targets[0].id
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
        return node.target.id
    return None


def _check_helpers(mod: _ParsedFile, names: list[str]) -> None:
    """inputs() (required), flops() and bytes() (optional) take the parameters as keywords."""
    inputs = mod.function("inputs", hint="add def inputs(rng, **params): returning NumPy arrays")
    _check_takes_params(mod.path, inputs, names, "rng", usage="def inputs(rng, **params)")
    if "flops" in mod.funcs:
        _check_takes_params(mod.path, mod.funcs["flops"], names, "", usage="def flops(**params)")
    if "bytes" in mod.funcs:
        _check_takes_params(
            mod.path, mod.funcs["bytes"], names, "itemsize", usage="def bytes(itemsize, **params)"
        )


def _presets(path: Path, presets: Any, params: Sequence[Param]) -> dict[str, dict[str, Any]]:
    """PRESETS: named sets of parameter values, each value valid for its parameter."""
    if not isinstance(presets, dict) or not all(isinstance(v, dict) for v in presets.values()):
        raise UserCodeError(path, "PRESETS must be a dict of dicts: {'quick': {'n': 1000}, ...}")
    by_name = {p.name: p for p in params}
    for preset, values in presets.items():
        for k, v in values.items():
            if k not in by_name:
                raise UserCodeError(path, f"PRESETS[{preset!r}] sets {k!r}, which is not in PARAMS")
            try:
                by_name[k].coerce(v)
            except ValueError as exc:
                raise UserCodeError(path, f"PRESETS[{preset!r}]: {exc}") from None
    return {k: dict(v) for k, v in presets.items()}


def _tolerance(path: Path, tolerance: Any) -> dict[str, float]:
    """TOLERANCE: a positive number per dtype, replacing the workload's default bound."""
    if not isinstance(tolerance, dict) or not all(
        k in EPS and isinstance(v, int | float) and not isinstance(v, bool) and v > 0
        for k, v in tolerance.items()
    ):
        raise UserCodeError(path, f"TOLERANCE must map dtypes ({', '.join(EPS)}) to positive numbers")
    return {k: float(v) for k, v in tolerance.items()}


# Ops torch.autocast runs in half precision (its "lower precision" list), as a user writes them.
_AUTOCAST_OPS = {
    "matmul", "tensordot", "einsum", "vecdot", "mm", "bmm", "addmm", "baddbmm", "addbmm",
    "linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "prelu",
}  # fmt: skip


def _has_autocast_op(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            return True
        if isinstance(node, ast.Attribute) and node.attr in _AUTOCAST_OPS:
            return True
        if isinstance(node, ast.Name) and node.id in _AUTOCAST_OPS:
            return True
    return False


def _sig_frame(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[Frame, ...]:
    args = ", ".join(a.arg for a in [*fn.args.posonlyargs, *fn.args.args])
    if fn.args.vararg:
        args += (", " if args else "") + "*" + fn.args.vararg.arg
    if fn.args.kwarg:
        args += (", " if args else "") + "**" + fn.args.kwarg.arg
    return (Frame(fn.lineno, fn.name, f"def {fn.name}({args}):"),)


def _check_step(path: Path, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int | None:
    usage = "write def step(xp, *arrays) or def step(xp, a, b, ...)"
    if isinstance(fn, ast.AsyncFunctionDef):
        raise UserCodeError(path, "step() must be a plain function, not async", _sig_frame(fn), usage)
    a = fn.args
    positional = [*a.posonlyargs, *a.args]
    if not positional:
        raise UserCodeError(path, "step() must take the array namespace xp first", _sig_frame(fn), usage)
    required_kwonly = [k.arg for k, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is None]
    if required_kwonly:
        raise UserCodeError(
            path, f"step() has keyword-only argument(s) without defaults: {', '.join(required_kwonly)}",
            _sig_frame(fn), usage,
        )  # fmt: skip
    if a.vararg is not None:
        return None
    arrays = len(positional) - 1
    if arrays == 0:
        raise UserCodeError(path, "step() takes xp but no arrays", _sig_frame(fn), usage)
    if a.defaults:
        raise UserCodeError(path, "step()'s array arguments cannot have defaults", _sig_frame(fn), usage)
    return arrays


def _check_takes_params(
    path: Path, fn: ast.FunctionDef | ast.AsyncFunctionDef, names: list[str], first: str, usage: str
) -> None:
    """`fn` takes `first` (if any) positionally, then accepts every PARAMS name as a keyword."""
    leading = 1 if first else 0
    if isinstance(fn, ast.AsyncFunctionDef):
        raise UserCodeError(path, f"{fn.name}() must be a plain function, not async", _sig_frame(fn), usage)
    a = fn.args
    positional = [*a.posonlyargs, *a.args]
    if len(positional) < leading and a.vararg is None:
        raise UserCodeError(path, f"{fn.name}() must take {first} first", _sig_frame(fn), usage)
    keywords = {x.arg for x in [*a.args[max(0, leading - len(a.posonlyargs)) :], *a.kwonlyargs]}
    if a.kwarg is None:
        missing = [n for n in names if n not in keywords]
        if missing:
            raise UserCodeError(
                path, f"{fn.name}() does not accept parameter(s) {', '.join(missing)} from PARAMS",
                _sig_frame(fn), usage,
            )  # fmt: skip
    n_def = len(a.defaults)
    required = [x.arg for x in positional[leading : len(positional) - n_def]]
    required += [k.arg for k, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is None]
    unknown = [r for r in required if r not in names]
    if unknown:
        raise UserCodeError(
            path, f"{fn.name}() requires {', '.join(unknown)}, which PARAMS does not define",
            _sig_frame(fn), "add them to PARAMS or give them defaults",
        )  # fmt: skip


def _params(path: Path, raw: Any) -> tuple[Param, ...]:
    """PARAMS: {name: default} or {name: {"default": ..., "min", "max", "help", "choices", "size"}}."""
    if not isinstance(raw, dict):
        raise UserCodeError(path, "PARAMS must be a dict: {'n': 1_000_000, ...}")
    out = []
    for name, spec in raw.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise UserCodeError(path, f"PARAMS key {name!r} must be a Python identifier")
        opts = dict(spec) if isinstance(spec, dict) else {"default": spec}
        unknown = set(opts) - _PARAM_KEYS
        if unknown or "default" not in opts:
            raise UserCodeError(
                path,
                f"PARAMS[{name!r}] needs 'default' and may have {', '.join(sorted(_PARAM_KEYS - {'default'}))}",
            )
        default = opts["default"]
        if isinstance(default, bool) or not isinstance(default, int | float | str):
            raise UserCodeError(
                path, f"PARAMS[{name!r}] default must be an int, float or str; got {default!r}"
            )
        kind: type = type(default)
        choices = opts.get("choices")
        if choices is not None and not (
            isinstance(choices, list | tuple) and all(isinstance(c, str) for c in choices)
        ):
            raise UserCodeError(path, f"PARAMS[{name!r}] choices must be a list of strings")
        param = Param(
            name,
            kind,
            default,
            str(opts.get("help", "")),
            minimum=opts.get("min", 1 if kind is int else None),
            maximum=opts.get("max"),
            choices=tuple(choices) if choices is not None else None,
            # Integers are sizes unless told otherwise: scaled down to probe a step's cost.
            size=bool(opts.get("size", kind is int)),
        )
        try:
            param.coerce(default)
        except ValueError as exc:
            raise UserCodeError(path, f"PARAMS: {exc}") from None
        out.append(param)
    return tuple(out)


# -- the module itself, run only by a measurement ------------------------------------
def namespace(backend: str) -> Any:
    """The array-API namespace a step gets for `backend` (array-api-compat's wrappers)."""
    if backend not in ("numpy", "torch", "cupy"):
        raise ValueError(f"no array namespace for backend {backend!r}")
    return importlib.import_module(f"array_api_compat.{backend}")


def _is_array(x: Any) -> bool:
    from array_api_compat import is_array_api_obj

    return bool(is_array_api_obj(x))


class UserCodeWorkload(Workload):
    """A code file behind the Workload interface; the runner, planner and reports use it unchanged."""

    category = "your code"
    user_code = True
    amp_eligible = False
    tol_scale = 10.0

    def __init__(self, info: CodeInfo) -> None:
        self.info = info
        self.name = code_ref(info.path)
        self.title = info.title
        self.description = info.description
        self.params = info.params
        self.amp_eligible = info.amp_eligible
        self._lock = threading.Lock()
        self._module: types.ModuleType | None = None
        self._input_values: int | None = None  # of the latest inputs(): bounds what a step returns

    @property
    def cache_key(self) -> str:
        return f"{self.name}@{self.info.sha256[:16]}"

    def params_known(self, asked: Sequence[str]) -> str:
        """What the file declares, and how to declare the parameter asked for: only PARAMS are
        parameters, and a keyword default of inputs() (`def inputs(rng, n=1000)`) looks like one."""
        name = asked[0] if asked else "n"
        default = self.info.input_defaults.get(name, 1000)
        file = self.path.name
        if self.params:
            known = ", ".join(p.name for p in self.params)
            return f"(known: {known}; to add {name}, put {name!r}: {default!r} in {file}'s PARAMS; docs/your-code.md)"
        seen = (
            f"; inputs() has {name}={default!r}, but only PARAMS are parameters"
            if name in self.info.input_defaults
            else ""
        )
        return (f"({file} declares no PARAMS, so it takes none{seen}: add PARAMS = {{{name!r}: {default!r}}} "
                f"to {file} and take {name} in inputs(rng, {name}); docs/your-code.md)")  # fmt: skip

    def provenance(self) -> dict[str, Any]:
        return {"code_file": str(self.info.path), "code_sha256": self.info.sha256}

    @property
    def path(self) -> Path:
        return self.info.path

    # -- running the file -----------------------------------------------------------
    def module(self) -> types.ModuleType:
        """Import the file (once per version). Raises UserCodeError with the file's frames."""
        with self._lock:
            if self._module is None:
                self._module = self._import()
            return self._module

    def _import(self) -> types.ModuleType:
        path = self.info.path
        mod_name = f"gpuplay_user_{path.stem if path.stem.isidentifier() else 'code'}_{self.info.sha256[:12]}"
        spec = importlib.util.spec_from_loader(mod_name, loader=None, origin=str(path))
        assert spec is not None
        module = importlib.util.module_from_spec(spec)
        module.__file__ = str(path)
        # Compile the text that was inspected and hashed, so the file cannot change under us.
        linecache.cache[str(path)] = (
            len(self.info.source),
            None,
            self.info.source.splitlines(True),
            str(path),
        )
        # As `python FILE.py` would: the file's folder first on sys.path (for its own helper
        # modules), and the module registered while it runs (dataclasses look it up). It is
        # imported, not run as __main__, so an `if __name__ == "__main__":` block stays out.
        folder = str(path.parent)
        sys.path.insert(0, folder)
        sys.modules[mod_name] = module
        try:
            code = compile(self.info.source, str(path), "exec")
            exec(code, module.__dict__)  # noqa: S102 - the user's own file, run as `python FILE.py` would
        except Exception as exc:
            sys.modules.pop(mod_name, None)
            raise UserCodeError.from_exception(path, exc, "importing the file") from None
        finally:
            with contextlib.suppress(ValueError):
                sys.path.remove(folder)
        for name in ("step", "inputs"):
            if not callable(getattr(module, name, None)):
                raise UserCodeError(path, f"{name} is not a function after running the file")
        return module

    def _call(self, what: str, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        try:
            return fn(*args, **kw)
        except Exception as exc:
            raise UserCodeError.from_exception(self.info.path, exc, what) from None

    # -- the Workload interface ---------------------------------------------------------
    def size_label(self, p: Mapping[str, Any]) -> str:
        return (
            ", ".join(f"{k}={v:,}" if isinstance(v, int) else f"{k}={v}" for k, v in p.items()) or "defaults"
        )

    def inputs(self, p: Mapping[str, Any], rng: np.random.Generator) -> tuple[np.ndarray, ...]:
        out = self._call("inputs()", self.module().inputs, rng, **p)
        arrays = (out,) if isinstance(out, np.ndarray) else out
        if not isinstance(arrays, tuple | list) or not arrays:
            raise UserCodeError(
                self.path, f"inputs() must return a NumPy array or a tuple of them; got {type(out).__name__}"
            )
        bad = [f"#{i} is {type(a).__name__}" for i, a in enumerate(arrays) if not isinstance(a, np.ndarray)]
        if bad:
            raise UserCodeError(
                self.path,
                f"inputs() must return NumPy arrays; {', '.join(bad)}",
                hint="build them with rng and np, e.g. rng.standard_normal(n)",
            )
        wanted = self.info.step_arrays
        if wanted is not None and wanted != len(arrays):
            raise UserCodeError(
                self.path, f"step() takes {wanted} array(s) after xp, but inputs() returned {len(arrays)}"
            )
        self._input_values = sum(a.size for a in arrays)
        return tuple(arrays)

    def kernel_function(self, backend: str, p: Mapping[str, Any]) -> Callable[..., Any]:
        step: Callable[..., Any] = self.module().step
        return step

    def kernel_kwargs(self, p: Mapping[str, Any]) -> dict[str, Any]:
        return {k: p[k] for k in self.info.step_params}

    def kernel(self, backend: str, xp: Any, p: Mapping[str, Any]) -> Callable[..., Any]:
        step = functools.partial(self.kernel_function(backend, p), **self.kernel_kwargs(p))
        ns = namespace(backend)
        path = self.info.path

        # Nothing but the call inside the timed step (and torch.compile traces only that);
        # the output's type is checked once, by `validate_output`, before the accuracy check.
        def call(*arrays: Any) -> Any:
            try:
                return step(ns, *arrays)
            except Exception as exc:
                raise UserCodeError.from_exception(path, exc, "step()") from None

        return call

    def validate_output(self, out: Any) -> None:
        _check_output(self.info.path, out, self._input_values)

    def source(self, backend: str, p: Mapping[str, Any]) -> str:
        return self.info.source

    def reference(self, p: Mapping[str, Any], inputs: tuple[np.ndarray, ...]) -> np.ndarray:
        """The same step, run by NumPy in float64."""
        ns = namespace("numpy")
        args = tuple(np.asarray(a, dtype=np.float64) if a.dtype.kind in "biuf" else a for a in inputs)
        step = self.module().step
        out = self._call("step() (the float64 NumPy reference)", step, ns, *args, **self.kernel_kwargs(p))
        _check_output(self.path, out, sum(_values(a) for a in inputs))
        return _flatten(out)

    def checked(self, out: Any, p: Mapping[str, Any]) -> np.ndarray:
        return _flatten(out)

    def flops(self, p: Mapping[str, Any]) -> float:
        return self._cost("flops", p)

    def bytes_moved(self, p: Mapping[str, Any], itemsize: int) -> float:
        return self._cost("bytes", p, itemsize)

    def _cost(self, name: str, p: Mapping[str, Any], *args: Any) -> float:
        if not (self.info.has_flops if name == "flops" else self.info.has_bytes):
            return 0.0
        value = self._call(f"{name}()", getattr(self.module(), name), *args, **p)
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or value < 0
        ):
            raise UserCodeError(self.path, f"{name}() must return a non-negative number; got {value!r}")
        return float(value)

    def tolerance(self, compute_dtype: str, p: Mapping[str, Any]) -> float:
        """TOLERANCE[dtype] when the file gives one; else from the error growth it declares
        (ERROR_GROWTH, see core/workloads/tolerance.py), else a default that still fails a wrong
        half-precision result: the narrow type's rounding paid once, element-wise (8u, 0.031 for
        bfloat16), plus the old work-based growth in the accumulator's precision (float32 for
        half precision and TF32), so float32 and float64 checks are as before. A work-based growth
        in the narrow type's own u reached 0.65 for bfloat16 at n = 256: nothing could fail."""
        from gpuplay.core.workloads import tolerance as tol

        if compute_dtype in self.info.tolerance:
            return self.info.tolerance[compute_dtype]
        growth = getattr(self.module(), "ERROR_GROWTH", None)
        if growth is not None:
            try:
                return tol.declared_growth(compute_dtype, growth, dict(p))
            except ValueError as exc:
                raise UserCodeError(self.path, str(exc)) from None
        accumulator = tol.ACCUMULATOR[compute_dtype]
        work = max(1.0, math.log2(max(2.0, self.flops(p) ** (1 / 3))))
        return tol.elementwise(compute_dtype) + self.tol_scale * EPS[accumulator] * work


# What a step may return, checked before the result is expanded for the float64 check: a step
# returning `[a] * 2_000_000` once grew the engine to 24 GB before the OOM killer ended it (and on
# a shared machine that killer may pick another process).
MAX_OUTPUTS = 8  # arrays in a returned tuple or list
OUTPUT_FACTOR = 64  # values a step may return per input value (an outer product of small inputs...)
OUTPUT_FLOOR = 2**24  # ...and, whatever the inputs, this many values (128 MiB of float64)


def output_limit(input_values: int) -> int:
    """The most values a step may return for inputs of `input_values` values."""
    return max(OUTPUT_FACTOR * input_values, OUTPUT_FLOOR)


def _values(a: Any) -> int:
    return math.prod(int(d) for d in a.shape)  # shape, not size: torch's size is a method


def _check_output(path: Path, out: Any, input_values: int | None = None) -> None:
    parts = out if isinstance(out, tuple | list) else (out,)
    if len(parts) > MAX_OUTPUTS:  # before anything walks the items
        raise UserCodeError(
            path,
            f"step() returned a {type(out).__name__} of {len(parts):,} items; at most {MAX_OUTPUTS} arrays",
            hint="return one array, or a tuple of a few: the check compares every value returned",
        )
    if not parts or not all(_is_array(a) for a in parts):
        got = (
            type(out).__name__
            if not isinstance(out, tuple | list)
            else f"{type(out).__name__} of " + ", ".join(type(a).__name__ for a in parts)
        )
        raise UserCodeError(
            path,
            f"step() must return an array (or a tuple of arrays); got {got}",
            hint="return xp.asarray(value) for a scalar",
        )
    if input_values is None:
        return
    total = sum(_values(a) for a in parts)
    if total > output_limit(input_values):
        raise UserCodeError(
            path,
            f"step() returned {total:,} values; at most {OUTPUT_FACTOR} × the inputs' {input_values:,} values "
            f"(or {OUTPUT_FLOOR:,}, whichever is more)",
            hint="return what the step computes, not a copy per element: the check widens every value to float64",
        )


def _flatten(out: Any) -> np.ndarray:
    """One float64 array to compare: a tuple of results is compared as one vector."""
    if isinstance(out, tuple | list):
        return np.concatenate([np.ravel(np.asarray(a, dtype=np.float64)) for a in out])
    return np.asarray(out, dtype=np.float64)


# -- loading by name, reloading a changed file ----------------------------------------
_loaded: dict[Path, tuple[tuple[int, int], UserCodeWorkload]] = {}
_loaded_lock = threading.Lock()


def load(name_or_path: str | Path) -> UserCodeWorkload:
    """The workload for ``code:/path`` (or a path); a file changed on disk gives a new one.

    Only the file's text is read and parsed here; nothing in it runs until a measurement
    asks for inputs or a step.
    """
    raw = str(name_or_path)
    path = Path(raw[len(PREFIX) :] if is_code_ref(raw) else raw).expanduser().resolve()
    try:
        st = path.stat()
        stamp = (st.st_mtime_ns, st.st_size)
    except OSError:
        stamp = (-1, -1)
    with _loaded_lock:
        known = _loaded.get(path)
        if known is not None and known[0] == stamp:
            return known[1]
    source = read_source(path)
    sha = hashlib.sha256(source.encode()).hexdigest()
    if known is not None and known[1].info.sha256 == sha:  # touched, not changed
        workload = known[1]
    else:
        workload = UserCodeWorkload(inspect_code(path, source))
    with _loaded_lock:
        _loaded[path] = (stamp, workload)
    return workload
