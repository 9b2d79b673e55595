"""What a workload is: inputs, the code per backend, a float64 reference, and its cost."""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from gpuplay.core.process.lazynumpy import lazy_numpy

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_numpy(globals())


EPS = {
    # np.finfo(...).eps of each, written out so that planning needs no NumPy (tests check them)
    "float64": 2.0**-52,
    "float32": 2.0**-23,
    "float16": 2.0**-10,
    "bfloat16": 2.0**-7,
    "tf32": 2.0**-10,  # a TF32 matmul keeps float32's range and a 10-bit mantissa
}
# What a kernel's parameters are: the same code runs on numpy, torch and cupy, so the
# module and its arrays are typed by role, not by library.
ArrayModule = Any  # numpy, torch or cupy
Array = Any  # an ndarray or tensor of that module

ITEMSIZE = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2}
LINALG_DTYPES = ("float32", "float64")


@dataclass(frozen=True)
class Param:
    name: str
    kind: type  # int, float or str
    default: Any
    help: str = ""
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] | None = None
    size: bool = False  # scaled down when probing a step's cost

    def coerce(self, value: Any) -> Any:
        """Check one value from a scenario file or the command line; raise ValueError with why."""
        if self.kind is int:
            value = self._as_int(value)
        elif self.kind is float:
            value = self._as_float(value)
        elif not isinstance(value, str):
            raise ValueError(f"{self.name} must be a string; got {value!r}")
        self._check_allowed(value)
        return value

    def _as_int(self, value: Any) -> int:
        # bool is an int to Python but never a size; a float is refused rather than truncated
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise ValueError(f"{self.name} must be an integer; got {value!r}")
        try:
            return int(value)
        except ValueError:
            raise ValueError(f"{self.name} must be an integer; got {value!r}") from None

    def _as_float(self, value: Any) -> float:
        if isinstance(value, bool):
            raise ValueError(f"{self.name} must be a number; got {value!r}")
        try:
            x = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"{self.name} must be a number; got {value!r}") from None
        if not math.isfinite(x):
            raise ValueError(f"{self.name} must be finite; got {x!r}")
        return x

    def _check_allowed(self, value: Any) -> None:
        """The value among the choices and within the bounds, where the parameter has them."""
        if self.choices is not None and value not in self.choices:
            raise ValueError(f"{self.name} must be one of {', '.join(self.choices)}; got {value!r}")
        if self.minimum is not None and value < self.minimum:
            raise ValueError(f"{self.name} must be >= {self.minimum:g}; got {value!r}")
        if self.maximum is not None and value > self.maximum:
            raise ValueError(f"{self.name} must be <= {self.maximum:g}; got {value!r}")


class StepSplit(Protocol):
    """Phases a step times inside itself (waiting for data, the copy, the model), per step."""

    def reset(self) -> None: ...  # forget what was recorded (before the timed loop)

    def take(self) -> dict[str, list[float]]: ...  # seconds per phase, one entry per step since reset


@dataclass(frozen=True)
class SetupReport:
    """What a workload's one-off set-up (`prepare`) built and decided, for the result to say."""

    build_s: float | None = None  # an export or engine build, shown apart like compile time
    built_now: bool = True  # False: reused from an earlier run in this process (not in setup_s)
    conditions: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    split: StepSplit | None = None
    own_pids: tuple[int, ...] = ()  # processes prepare started for the run (a loader's workers)


class Workload:
    """One computation, written once per backend family.

    A kernel takes the device inputs and returns the device output. Kernels are
    plain module-level functions, so the app can show their source verbatim.
    """

    name: str = ""
    title: str = ""
    category: str = ""
    params: tuple[Param, ...] = ()
    amp_eligible: bool = False  # has an op torch.autocast runs in half precision
    graph_safe: bool = True  # can be captured in a CUDA graph (no host syncs inside)
    compile_safe: bool = True
    half_ok: bool = True  # computes in float16/bfloat16 natively on some backend
    tol_scale: float = 10.0
    # What `error` is measured against, as results say it ("error 3e-07 vs float64").
    reference_name: str = "float64"
    user_code: bool = False  # runs a user's file: a cancel interrupts its Python loops

    @property
    def cache_key(self) -> str:
        """Names this version of the computation in the input and reference caches."""
        return self.name

    def provenance(self) -> dict[str, Any]:
        """What identifies the code a result measured, beside its conditions."""
        return {}

    # -- parameters ------------------------------------------------------------
    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    def params_known(self, asked: Sequence[str]) -> str:
        """After "no parameter X": the ones there are, or that there are none ("known: " said nothing)."""
        if self.params:
            return f"(known: {', '.join(p.name for p in self.params)})"
        return "(it takes no parameters)"

    def resolve(self, given: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Defaults filled in and each value checked. Raises ValueError naming the parameter."""
        given = dict(given or {})
        unknown = set(given) - {p.name for p in self.params}
        if unknown:
            raise ValueError(
                f"unknown parameter(s) {', '.join(sorted(unknown))} for {self.name} "
                f"{self.params_known(sorted(unknown))}"
            )
        return {p.name: p.coerce(given.get(p.name, p.default)) for p in self.params}

    def scaled(self, p: Mapping[str, Any], factor: float) -> dict[str, Any]:
        """The same workload with every size parameter multiplied by `factor` (for cost probes)."""
        out = dict(p)
        for param in self.params:
            if param.size:
                lo = int(param.minimum or 1)
                out[param.name] = max(lo, int(round(p[param.name] * factor)))
        return out

    def size_label(self, p: Mapping[str, Any]) -> str:
        return ", ".join(f"{k}={v}" for k, v in p.items())

    # -- the computation --------------------------------------------------------
    def inputs(self, p: Mapping[str, Any], rng: np.random.Generator) -> tuple[np.ndarray, ...]:
        raise NotImplementedError

    def kernel_function(self, backend: str, p: Mapping[str, Any]) -> Callable[..., Any]:
        """The plain function for `backend`, before its module and parameters are bound."""
        raise NotImplementedError

    def kernel(self, backend: str, xp: Any, p: Mapping[str, Any]) -> Callable[..., Any]:
        fn = self.kernel_function(backend, p)
        return functools.partial(fn, xp, **self.kernel_kwargs(p))

    def effective(self, p: Mapping[str, Any], backend: str, compute_dtype: str) -> dict[str, Any]:
        """Parameters as a run sees them, with what the backend decides filled in."""
        return dict(p)

    def kernel_kwargs(self, p: Mapping[str, Any]) -> dict[str, Any]:
        return {}

    def source(self, backend: str, p: Mapping[str, Any]) -> str:
        fns = [self.kernel_function(backend, p), *self.helper_functions(backend, p)]
        return "\n\n".join(_as_written(f) for f in fns)

    def helper_functions(self, backend: str, p: Mapping[str, Any]) -> list[Callable[..., Any]]:
        return []

    def prepare(
        self, backend: str, device: str, args: tuple[Any, ...], p: Mapping[str, Any]
    ) -> tuple[Any, ...]:
        """Turn the device inputs into what the kernel takes, once, outside the timed steps.

        For work whose setup is not part of the step: a CSR matrix built from a dense
        one, pinned host buffers, a torch.nn model. Default: the inputs as they are.
        """
        return args

    def setup_report(self, args: tuple[Any, ...]) -> SetupReport | None:
        """What `prepare` built (an exported model, a data loader's processes), from its prepared args."""
        return None

    def needs_backend(self, p: Mapping[str, Any]) -> str | None:
        """The one backend these parameters run on (a torch DataLoader, an exported torch model)."""
        return None

    def notes(self, backend: str, device: str, dtype: str, p: Mapping[str, Any]) -> list[str]:
        """What a result of this configuration must say beside its figure (known before running)."""
        return []

    def after_run(
        self, step: Callable[[], Any], backend: str, device: str, p: Mapping[str, Any]
    ) -> list[str]:
        """Notes measured once after the timed steps, outside them (a kernel count, say)."""
        return []

    def reference(self, p: Mapping[str, Any], inputs: tuple[np.ndarray, ...]) -> np.ndarray:
        """The checked quantity, computed by NumPy in float64."""
        raise NotImplementedError

    def validate_output(self, out: Any) -> None:
        """Raise if a step's device output is not what `checked` can compare (user code)."""
        return None

    def checked(self, out: Any, p: Mapping[str, Any]) -> np.ndarray:
        """The quantity compared with the reference, from the host copy of the output."""
        return np.asarray(out)

    # -- cost and accuracy ---------------------------------------------------------
    def flops(self, p: Mapping[str, Any]) -> float:
        raise NotImplementedError

    def bytes_moved(self, p: Mapping[str, Any], itemsize: int) -> float:
        raise NotImplementedError

    def footprint_elements(self, p: Mapping[str, Any]) -> float:
        """Elements held at once (inputs and output), for the memory check before a run."""
        return self.bytes_moved(p, 1)

    def tolerance(self, compute_dtype: str, p: Mapping[str, Any]) -> float:
        """By default a sum-like growth over the step's cube-root work; workloads say better.
        `compute_dtype` may be "tf32" (gpuplay.core.workloads.tolerance)."""
        return self.tol_scale * EPS[compute_dtype] * max(1.0, math.log2(max(2.0, self.flops(p) ** (1 / 3))))

    def unsupported(self, backend: str, device: str, dtype: str, p: Mapping[str, Any]) -> str | None:
        """Why this backend/device/dtype cannot compute this workload, or None."""
        return None

    def graph_refusal(self, p: Mapping[str, Any]) -> tuple[str, str] | None:
        """Why these parameters' step cannot be captured in a CUDA graph, and what to do instead;
        None if it can (`graph_safe` says it for the workload as a whole)."""
        return None

    def unsupported_in(
        self, backend: str, device: str, compute_dtype: str, p: Mapping[str, Any]
    ) -> str | None:
        """Why the kernel cannot run in the precision it computes in (under AMP the autocast
        dtype, not the inputs' float32), or None."""
        return None


def _as_written(fn: Callable[..., Any]) -> str:
    """The function's source with its signature's annotations left out.

    The annotations are for the type checker (`xp: ArrayModule, a: Array`); the code view
    shows the code as a user writes it, and at 80 columns a typed signature wraps over
    three lines. The body is the real source, unchanged.
    """
    lines = inspect.getsource(fn).rstrip().splitlines()
    first = lines[0]
    if first.startswith("def ") and first.endswith(":"):  # a one-line signature
        sig = inspect.signature(fn)
        params = [q.replace(annotation=inspect.Parameter.empty) for q in sig.parameters.values()]
        plain = sig.replace(parameters=params, return_annotation=inspect.Signature.empty)
        lines[0] = f"def {fn.__name__}{plain}:"
    return "\n".join(lines)


# The check reads its arrays in blocks of this many elements (512 KiB of float64): every temporary
# stays in cache and is reused, where whole-array temporaries (|ref|², out - ref, its square, the
# finite mask: 25 MiB for a 1024² result) each faulted fresh pages in, just after the cold probe
# handed the heap back to the OS. ~9 ms → ~4 ms of every 1024² matmul run.
CHECK_BLOCK = 1 << 16


def relative_error(out: np.ndarray, ref: np.ndarray) -> float:
    """||out - ref|| / ||ref|| in float64; inf when the output is not finite."""
    out = np.asarray(out)
    ref = np.asarray(ref)
    if out.shape != ref.shape:
        raise ValueError(f"result shape {out.shape} differs from reference shape {ref.shape}")
    flat_out, flat_ref = out.reshape(-1), ref.reshape(-1)
    num = denom = 0.0
    for start in range(0, flat_out.size, CHECK_BLOCK):
        o, r = flat_out[start : start + CHECK_BLOCK], flat_ref[start : start + CHECK_BLOCK]
        if not np.isfinite(o).all():
            return math.inf
        denom += _sum_of_squares(r)
        num += _sum_of_squares(o - r)
    return math.sqrt(num) / math.sqrt(denom) if denom > 0 else math.sqrt(num)


def _sum_of_squares(x: np.ndarray) -> float:
    """The squared 2-norm as np.linalg.norm computes it (the sum of squares, unscaled), but summed
    by NumPy itself: linalg.norm's BLAS dot wakes the BLAS threads, which on a loaded machine cost
    ~20 ms a call (measured, 2 cores, n=65536) against ~30 µs here; the check runs once a run."""
    x = np.abs(x) if np.iscomplexobj(x) else x
    return float(np.sum(np.square(x, dtype=np.float64)))


def linalg_dtype_reason(backend: str, dtype: str) -> str | None:
    if dtype not in LINALG_DTYPES:
        return (
            f"{dtype} factorizations do not exist in LAPACK, cuSOLVER or MAGMA; "
            "use float32 (AMP runs linear algebra in float32 too)"
        )
    return None
