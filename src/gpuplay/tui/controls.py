"""The playground's controls as plain data: values, which are available, and why not.

No Textual here: the rules that decide what a user can flip are tested directly.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from gpuplay.core.backends import all_backends, get_backend
from gpuplay.core.catalogue import levers
from gpuplay.core.catalogue.levers import Lever
from gpuplay.core.catalogue.planner import check
from gpuplay.core.spec import BACKENDS, Refusal, RunSpec
from gpuplay.core.workloads import get_workload
from gpuplay.core.workloads.base import Param

LABELS = {"numpy": "NumPy", "torch": "PyTorch", "cupy": "CuPy", True: "on", False: "off"}


@dataclass(frozen=True)
class Control:
    """A live lever: the key that cycles it and its words on screen (from core/catalogue/levers.py)."""

    lever: Lever

    @property
    def field(self) -> str:  # the RunSpec field, or the workload parameter
        return self.lever.name

    @property
    def key(self) -> str:
        return self.lever.key

    @property
    def title(self) -> str:
        return self.lever.label

    def applies_to(self, spec: RunSpec) -> bool:
        return self.lever.live_in(spec)

    def value(self, spec: RunSpec) -> Any:
        value = self.lever.value(spec)
        return _param(self.lever).default if value is None and self.lever.is_param else value


def _param(lever: Lever) -> Param:
    """A workload parameter lever's declaration in its workload (default, choices, limits)."""
    return next(p for p in get_workload(lever.workloads[0]).params if p.name == lever.name)


CONTROLS = tuple(Control(lv) for lv in levers.live_levers())


def controls_for(spec: RunSpec) -> tuple[Control, ...]:
    """The controls this spec has: every RunSpec lever, and its own workload's parameters."""
    return tuple(c for c in CONTROLS if c.applies_to(spec))


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
    lever = levers.get(field)
    if field == "device":
        return device_values()
    choices = _param(lever).choices if lever.is_param else None
    if choices:
        return list(choices)
    return list(lever.values())


def normalize(spec: RunSpec, changed: str) -> RunSpec:
    """After the user changes `changed`, adjust the others so the combination makes sense."""
    return levers.adjust(spec, changed)


def with_value(spec: RunSpec, field: str, value: Any) -> RunSpec:
    return normalize(levers.get(field).set(spec, value), field)


def _probe_state() -> tuple[Any, ...]:
    """What a verdict depends on besides the spec: each backend's probe answer so far."""
    return tuple((b.availability(0), tuple(b.device_ids(0))) for b in all_backends())


@functools.lru_cache(maxsize=1024)
def _verdict(spec: RunSpec, field: str, value: Any, probes: tuple[Any, ...]) -> Refusal | None:
    try:
        candidate = with_value(spec, field, value)
    except ValueError as exc:
        return Refusal(str(exc))
    verdict = check(candidate, probe_timeout=0)
    return verdict if isinstance(verdict, Refusal) else None


def verdict_for(spec: RunSpec, field: str, value: Any) -> Refusal | None:
    """The Refusal for setting `field` to `value` (and what it implies); None when it can run.

    A Refusal with `pending` set is no verdict yet: the backend's probe is still running.
    Assessed once per (spec, value, probe answers): drawing the controls does not plan.
    """
    return _verdict(spec, field, value, _probe_state())


def refusal_for(spec: RunSpec, field: str, value: Any) -> str | None:
    """Why setting `field` to `value` (and the adjustments it implies) cannot run here."""
    verdict = verdict_for(spec, field, value)
    return str(verdict) if verdict is not None else None


def cycle(spec: RunSpec, field: str, step: int = 1) -> tuple[RunSpec, str | None]:
    """The next available value of `field`; (spec unchanged, why) when none other is."""
    lever = levers.get(field)
    if not lever.live_in(spec):
        return spec, f"{spec.workload} has no {lever.label}"
    values = values_for(field)
    current = Control(lever).value(spec)
    start = values.index(current) if current in values else -1
    reasons = []
    for i in range(1, len(values)):
        value = values[(start + step * i) % len(values)]
        why = refusal_for(spec, field, value)
        if why is None:
            return with_value(spec, field, value), None
        reasons.append(f"{lever.label} {label(value)} is not possible: {why}")  # a sentence, not "on: …"
    return spec, "; ".join(reasons) or None


def label(value: Any) -> str:
    if isinstance(value, bool):
        return LABELS[value]
    # only a name has a label: 0 == False to a dict, and a count of 0 is not "off"
    return LABELS.get(value, value) if isinstance(value, str) else str(value)


def live_threads(cores: int) -> int:
    """Leave one core to the UI: on 2 cores torch's OpenMP threads otherwise starve the event loop."""
    return max(1, cores - 1)
