"""The frozen description of one measurement: what to run, where, and how to time it."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

BACKENDS = ("numpy", "torch", "cupy")
DTYPES = ("float64", "float32", "float16", "bfloat16")
AMP_MODES = ("off", "fp16", "bf16")
COMPILE_MODES = ("off", "default", "reduce-overhead", "max-autotune")
LINALG_LIBRARIES = ("default", "cusolver", "magma")
CACHE_MODES = ("warm", "cold")  # cold: the last-level cache is flushed between steps
ALLOC_MODES = ("warm", "cold")  # host pages reused between steps, or returned (runner/alloc.py)


class SpecError(ValueError):
    """A run spec that cannot describe a measurement (bad value, unknown name)."""


def _freeze(params: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(params.items()))


@dataclass(frozen=True)
class RunSpec:
    """Everything that decides a measurement's figures, and nothing else.

    Two equal specs are the same measurement: the app and the CLI key results,
    baselines and caches on it.
    """

    workload: str
    params_items: tuple[tuple[str, Any], ...] = ()
    scenario: str = ""
    backend: str = "numpy"
    device: str = "cpu"
    dtype: str = "float32"
    amp: str = "off"
    compile: str = "off"
    tf32: bool = False
    cuda_graphs: bool = False
    linalg_library: str = "default"
    transfers: bool = False
    cache: str = "warm"  # "cold": a buffer larger than the L2/LLC is written between steps
    warmup: int = 3
    repeat: int | None = None  # None: run for budget_s (at least min_repeat steps)
    budget_s: float = 1.0
    min_repeat: int = 5
    max_repeat: int = 100_000
    seed: int = 0
    threads: int | None = None  # None: leave the libraries' own defaults
    max_step_s: float = 30.0  # refuse a configuration whose step is estimated longer
    check: bool = True  # compare with the float64 reference
    energy: bool = True  # energy per step after the timed phase, where a counter is readable
    alloc: str = "warm"  # cold: freed host pages go back to the OS between steps

    @classmethod
    def make(cls, workload: str, params: Mapping[str, Any] | None = None, **kw: Any) -> RunSpec:
        spec = cls(workload=workload, params_items=_freeze(params or {}), **kw)
        spec.validate()
        return spec

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.params_items)

    def replace(self, **changes: Any) -> RunSpec:
        if "params" in changes:
            changes["params_items"] = _freeze(changes.pop("params"))
        spec = dataclasses.replace(self, **changes)
        spec.validate()
        return spec

    def validate(self) -> None:
        """Reject values no backend could interpret. Combination checks live in `plan`."""
        self._check_choices()
        if not (
            self.device == "cpu"
            or self.device == "mps"
            or _is_cuda_device(self.device)
            or _is_xpu_device(self.device)
        ):
            raise SpecError(f"device must be cpu, cuda, cuda:N, xpu, xpu:N or mps; got {self.device!r}")
        self._check_counts()
        self._check_bounds()

    def _check_choices(self) -> None:
        choices = {
            "backend": BACKENDS,
            "dtype": DTYPES,
            "amp": AMP_MODES,
            "compile": COMPILE_MODES,
            "linalg_library": LINALG_LIBRARIES,
            "cache": CACHE_MODES,
            "alloc": ALLOC_MODES,
        }
        for name, allowed in choices.items():
            value = getattr(self, name)
            if value not in allowed:
                raise SpecError(f"{name} must be one of {', '.join(allowed)}; got {value!r}")

    def _check_counts(self) -> None:
        if self.warmup < 0:
            raise SpecError(f"warmup must be >= 0; got {self.warmup}")
        if self.repeat is not None and self.repeat < 1:
            raise SpecError(f"repeat must be >= 1; got {self.repeat}")
        if self.budget_s <= 0:
            raise SpecError(f"budget must be > 0 seconds; got {self.budget_s}")
        if self.threads is not None and self.threads < 1:
            raise SpecError(f"threads must be >= 1; got {self.threads}")
        if not 1 <= self.min_repeat <= self.max_repeat:
            raise SpecError(f"min repeat must be 1 to max repeat ({self.max_repeat}); got {self.min_repeat}")
        if self.max_step_s <= 0:
            raise SpecError(f"max step must be > 0 seconds; got {self.max_step_s}")

    def _check_bounds(self) -> None:
        """NaN passes the comparisons of _check_counts and infinity the lower bounds: finite and bounded."""
        from gpuplay.core.storage import bounds

        try:
            bounds.check_number("warmup", self.warmup, bounds.WARMUP, integer=True)
            if self.repeat is not None:
                bounds.check_number("repeat", self.repeat, bounds.REPEAT, integer=True)
            bounds.check_number("budget", self.budget_s, bounds.BUDGET_S)
            bounds.check_number("max step", self.max_step_s, bounds.MAX_STEP_S)
            bounds.check_number("seed", self.seed, bounds.SEED, integer=True)
            bounds.check_number("max repeat", self.max_repeat, bounds.REPEAT, integer=True)
        except bounds.BoundsError as exc:
            raise SpecError(str(exc)) from None

    @property
    def cuda_index(self) -> int | None:
        if not _is_cuda_device(self.device):
            return None
        return int(self.device.split(":")[1]) if ":" in self.device else 0

    def label(self, with_dtype: bool = True) -> str:
        """Short human label of the configuration: 'torch cuda:0 float32 +amp:bf16 +compile'."""
        parts = [self.backend, self.device, self.dtype] if with_dtype else [self.backend, self.device]
        if self.amp != "off":
            parts.append(f"+amp:{self.amp}")
        if self.compile != "off":
            parts.append("+compile" if self.compile == "default" else f"+compile:{self.compile}")
        if self.tf32:
            parts.append("+tf32")
        if self.cuda_graphs:
            parts.append("+graphs")
        if self.linalg_library != "default":
            parts.append(f"+{self.linalg_library}")
        if self.transfers:
            parts.append("+transfers")
        if self.cache == "cold":
            parts.append("+cold")
        if self.alloc != "warm":
            parts.append(f"+alloc:{self.alloc}")
        return " ".join(parts + self._param_parts())

    def _param_parts(self) -> list[str]:
        """The workload parameters a label names: an inference runtime, an autograd method."""
        parts = []
        runtime = self.params.get("runtime")
        if runtime and runtime != "eager":  # gpuplay.core.runtimes
            parts.append(f"+{runtime}")
        method = self.params.get("method")
        if method and method != "auto":
            parts.append(f"({method})")
        return parts

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["params"] = dict(d.pop("params_items"))
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RunSpec:
        d = dict(d)
        params = d.pop("params", {})
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise SpecError(f"unknown spec field(s): {', '.join(sorted(unknown))}")
        return cls.make(params=params, **d)


def _is_xpu_device(device: str) -> bool:
    """Intel GPUs through torch.xpu: 'xpu' or 'xpu:N'."""
    head, sep, idx = device.partition(":")
    return head == "xpu" and (not sep or idx.isdigit())


def _is_cuda_device(device: str) -> bool:
    if device == "cuda":
        return True
    head, _, idx = device.partition(":")
    return head == "cuda" and idx.isdigit()


@dataclass
class Refusal:
    """Why a configuration cannot run here, in words a user can act on."""

    reason: str
    hint: str = ""
    pending: bool = False  # not a verdict yet: the backend's probe has not finished

    def __str__(self) -> str:
        return f"{self.reason} ({self.hint})" if self.hint else self.reason


@dataclass
class Plan:
    """A spec that passed every combination check, with the notes a result must carry."""

    spec: RunSpec
    notes: list[str] = field(default_factory=list)


def pick_names(value: str | Sequence[str], allowed: Sequence[str] | None) -> list[str]:
    """Names given as "a,b" or ["a", "b"] (a flag's text, an API argument), each once, in order.
    Shared by the CLI's list flags and the Python API so both take and refuse the same lists;
    raises SpecError naming the unknown ones (or that none was given) and what to choose from."""
    items = value.split(",") if isinstance(value, str) else [str(x) for x in value]
    chosen = [x.strip() for x in items if x.strip()]
    bad = [x for x in chosen if allowed is not None and x not in allowed]
    if bad or not chosen:
        choose = f"; choose from {', '.join(allowed)}" if allowed else ""
        raise SpecError(f"unknown {', '.join(map(repr, bad)) or '(none given)'}{choose}")
    return list(dict.fromkeys(chosen))


def is_device_name(device: str) -> bool:
    """A device name RunSpec.validate accepts: cpu, mps, cuda, cuda:N, xpu or xpu:N."""
    return device in ("cpu", "mps") or _is_cuda_device(device) or _is_xpu_device(device)
