"""The playground's controls as plain data: values, which are available, and why not.

No Textual here: the rules that decide what a user can flip are tested directly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuplay.core.backends import get_backend
from gpuplay.core.planner import check
from gpuplay.core.spec import AMP_MODES, BACKENDS, COMPILE_MODES, DTYPES, Refusal, RunSpec

LABELS = {"numpy": "NumPy", "torch": "PyTorch", "cupy": "CuPy", True: "on", False: "off"}


@dataclass(frozen=True)
class Control:
    field: str  # RunSpec field
    key: str  # keyboard key that cycles it
    title: str


CONTROLS = (
    Control("backend", "b", "backend"),
    Control("device", "d", "device"),
    Control("dtype", "t", "dtype"),
    Control("amp", "a", "AMP"),
    Control("compile", "c", "compile"),
    Control("tf32", "f", "TF32"),
    Control("cuda_graphs", "g", "CUDA graphs"),
)


def device_values() -> list[str]:
    """cpu, then every accelerator any backend has found so far (never waits for a probe)."""
    seen = ["cpu"]
    for name in BACKENDS:
        for d in get_backend(name).devices(timeout=0):
            if d.id not in seen:
                seen.append(d.id)
    if "cuda:0" not in seen:
        seen.append("cuda:0")  # shown disabled, with the reason there is none
    return seen


def values_for(field: str) -> list[Any]:
    values: dict[str, list[Any]] = {
        "backend": list(BACKENDS),
        "device": device_values(),
        "dtype": list(DTYPES),
        "amp": list(AMP_MODES),
        "compile": list(COMPILE_MODES),
        "tf32": [False, True],
        "cuda_graphs": [False, True],
    }
    return values[field]


def normalize(spec: RunSpec, changed: str) -> RunSpec:
    """After the user changes `changed`, adjust the others so the combination makes sense."""
    kw: dict[str, Any] = {}
    if changed == "backend":
        if spec.backend != "torch":
            kw.update(amp="off", compile="off", tf32=False, cuda_graphs=False)
        if spec.backend == "numpy":
            kw["device"] = "cpu"
        if spec.backend == "cupy" and spec.device == "cpu":
            cuda = [d for d in get_backend("cupy").device_ids(timeout=0)] or ["cuda:0"]
            kw["device"] = cuda[0]
        if spec.backend in ("numpy", "cupy") and spec.dtype == "bfloat16":
            kw["dtype"] = "float32"
        if spec.params.get("method") == "autograd" and spec.backend != "torch":
            kw["params"] = {**spec.params, "method": "auto"}
    elif changed == "device":
        if spec.device == "cpu":
            kw.update(tf32=False, cuda_graphs=False)
            if spec.backend == "cupy":
                kw["backend"] = "numpy"
    elif changed == "amp" and spec.amp != "off":
        kw["dtype"] = "float32"
    elif changed == "dtype" and spec.dtype != "float32":
        kw["amp"] = "off"
    elif changed == "compile" and spec.compile == "reduce-overhead":
        kw["cuda_graphs"] = False
    elif changed == "cuda_graphs" and spec.cuda_graphs and spec.compile == "reduce-overhead":
        kw["compile"] = "default"
    return spec.replace(**kw) if kw else spec


def with_value(spec: RunSpec, field: str, value: Any) -> RunSpec:
    return normalize(spec.replace(**{field: value}), field)


def verdict_for(spec: RunSpec, field: str, value: Any) -> Refusal | None:
    """The Refusal for setting `field` to `value` (and what it implies); None when it can run.

    A Refusal with `pending` set is no verdict yet: the backend's probe is still running.
    """
    try:
        candidate = with_value(spec, field, value)
    except ValueError as exc:
        return Refusal(str(exc))
    verdict = check(candidate, probe_timeout=0)
    return verdict if isinstance(verdict, Refusal) else None


def refusal_for(spec: RunSpec, field: str, value: Any) -> str | None:
    """Why setting `field` to `value` (and the adjustments it implies) cannot run here."""
    verdict = verdict_for(spec, field, value)
    return str(verdict) if verdict is not None else None


def cycle(spec: RunSpec, field: str, step: int = 1) -> tuple[RunSpec, str | None]:
    """The next available value of `field`; (spec unchanged, why) when none other is."""
    values = values_for(field)
    current = getattr(spec, field)
    start = values.index(current) if current in values else -1
    reasons = []
    for i in range(1, len(values)):
        value = values[(start + step * i) % len(values)]
        why = refusal_for(spec, field, value)
        if why is None:
            return with_value(spec, field, value), None
        reasons.append(f"{label(value)}: {why}")
    return spec, "; ".join(reasons) or None


def label(value: Any) -> str:
    if isinstance(value, bool):
        return LABELS[value]
    return LABELS.get(value, str(value))


def live_threads(cores: int) -> int:
    """Leave one core to the UI: on 2 cores torch's OpenMP threads otherwise starve the event loop."""
    return max(1, cores - 1)
