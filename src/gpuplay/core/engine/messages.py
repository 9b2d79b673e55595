"""Every message between a front end and its engine process, typed, and their one wire format.

Client → engine: `RunRequest`, `ProfileRequest`, `Cancel`, `Pause`, `ProbeRequest`, `Shutdown`.
Engine → client: `Ready` (first, with the protocol version), `ProbeAnswer`, `Phase`, `Samples`,
`Finished` (a run's result), `Profiled` (a profile's data), `Failed` (a request the engine could
not take, e.g. a spec it cannot read).

On the wire a message is one JSON object `{"kind": …, "v": PROTOCOL_VERSION, …fields}`, sent with
`FrameConnection.send_bytes` (wire.py): plain data only, never a pickle, so the front end cannot import torch by
unpickling an engine's object, and a message from another version of gpuplay is recognised as such.
`encode` and `decode` are the only (de)serialisers; nothing else reads or builds the dicts.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from gpuplay.core.measure.packed import TIMING_KEYS, pack, unpack
from gpuplay.core.result import RunResult
from gpuplay.core.spec import RunSpec

# Bump when a message's kind or fields change meaning. The engine announces it in `Ready`; a client
# that speaks another version stops that engine instead of misreading it.
# 3: the engine probes only the backends a ProbeRequest names; 4: a result's step timings travel
# packed (float64 bytes in base64), not as JSON numbers; 5: a paired run's `Finished` carries the
# baseline's own result from the same pairs (`baseline`), so its row is not measured a second time.
PROTOCOL_VERSION = 5


class ProtocolError(ValueError):
    """A message that cannot be read. `run_id` names the request it belonged to, where known."""

    def __init__(self, message: str, run_id: int | None = None) -> None:
        super().__init__(message)
        self.run_id = run_id


# -- client → engine ------------------------------------------------------------------------------
@dataclass(frozen=True)
class RunRequest:
    """Measure `spec`; `live`: stream step timings; `baseline`: time it in interleaved pairs with
    this (NumPy) spec and answer with the speedup (runner.paired)."""

    kind: ClassVar[str] = "run"
    run_id: int
    spec: RunSpec
    live: bool
    baseline: RunSpec | None = None


@dataclass(frozen=True)
class ProfileRequest:
    kind: ClassVar[str] = "profile"
    run_id: int
    spec: RunSpec
    steps: int


@dataclass(frozen=True)
class Cancel:
    kind: ClassVar[str] = "cancel"
    run_id: int


@dataclass(frozen=True)
class Pause:
    kind: ClassVar[str] = "pause"
    run_id: int
    paused: bool


# Every backend the engine can probe, in the order it probes them (CuPy's probe can take >10 s).
PROBED = ("numpy", "torch", "cupy")


@dataclass(frozen=True)
class ProbeRequest:
    """Probe these backends (import, devices, versions). The engine probes nothing until asked: a
    NumPy-only command never makes it import torch (0.8 s and ~200 MiB on the development machine)."""

    kind: ClassVar[str] = "probe-request"
    backends: tuple[str, ...] = PROBED


@dataclass(frozen=True)
class Shutdown:
    kind: ClassVar[str] = "shutdown"


# -- engine → client ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Ready:
    kind: ClassVar[str] = "ready"
    pid: int
    version: int = PROTOCOL_VERSION


@dataclass(frozen=True)
class ProbeAnswer:
    """Backends' availability, devices and versions (`protocol.probe_data`); `final` once CuPy's
    slower probe is in too."""

    kind: ClassVar[str] = "probe"
    data: dict[str, Any]
    final: bool


@dataclass(frozen=True)
class Phase:
    kind: ClassVar[str] = "phase"
    run_id: int
    name: str


@dataclass(frozen=True)
class Samples:
    """Step timings in seconds, by phase, batched (at most ~10 a second from the engine)."""

    kind: ClassVar[str] = "samples"
    run_id: int
    samples: tuple[tuple[str, float], ...]


@dataclass(frozen=True)
class Finished:
    """A run's result; for a paired request, the baseline's own result from the same pairs too
    (None where it has none: runner.paired.run_pair)."""

    kind: ClassVar[str] = "result"
    run_id: int
    result: RunResult
    baseline: RunResult | None = None


@dataclass(frozen=True)
class Profiled:
    kind: ClassVar[str] = "profiled"
    run_id: int
    data: dict[str, Any]


@dataclass(frozen=True)
class Failed:
    kind: ClassVar[str] = "error"
    run_id: int
    message: str


Request = RunRequest | ProfileRequest | Cancel | Pause | ProbeRequest | Shutdown
Event = Ready | ProbeAnswer | Phase | Samples | Finished | Profiled | Failed
Message = Request | Event
# What a run or a profile hears while it goes on, and what ends it.
Progress = Phase | Samples
Answer = Finished | Profiled | Failed


# -- the wire -------------------------------------------------------------------------------------
def _fields(msg: Message) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in msg.__dataclass_fields__:
        value = getattr(msg, name)
        if isinstance(value, RunResult):
            value = value.to_dict(derived=False)  # the front end derives the rest (summary, roof)
            for key in PACKED:
                value[key] = pack(value[key])
        elif isinstance(value, RunSpec):
            value = value.to_dict()
        out[name] = value
    return out


# A result's step timings go packed (core/measure/packed.py: float64 bytes in base64), not as JSON numbers.
PACKED = TIMING_KEYS


def _result(d: Mapping[str, Any], key: str = "result") -> RunResult:
    if not isinstance(d[key], Mapping):
        raise ValueError(f"{key}: a result expected")
    data = dict(d[key])
    for name in PACKED:
        data[name] = unpack(data.get(name))
    return RunResult.from_dict(data)


def _finished(d: Mapping[str, Any]) -> Finished:
    base = _result(d, "baseline") if d.get("baseline") is not None else None
    return Finished(int(d["run_id"]), _result(d), base)


def encode(msg: Message) -> bytes:
    # default=str: a stray non-JSON value (a dtype, a path) travels as its text, never as an object
    return json.dumps({"kind": msg.kind, "v": PROTOCOL_VERSION, **_fields(msg)}, default=str).encode()


def _spec(d: Mapping[str, Any], key: str) -> RunSpec:
    return RunSpec.from_dict(d[key])


def _baseline(d: Mapping[str, Any]) -> RunSpec | None:
    return RunSpec.from_dict(d["baseline"]) if d.get("baseline") is not None else None


def _backends(d: Mapping[str, Any]) -> tuple[str, ...]:
    names = d.get("backends", PROBED)
    if not isinstance(names, list | tuple) or any(n not in PROBED for n in names):
        raise ValueError(f"unknown backends {str(names)[:80]!r}")
    return tuple(n for n in PROBED if n in names)


def _samples(d: Mapping[str, Any]) -> tuple[tuple[str, float], ...]:
    return tuple((str(phase), float(dt)) for phase, dt in d["samples"])


_READERS: dict[str, Callable[[Mapping[str, Any]], Message]] = {
    RunRequest.kind: lambda d: RunRequest(int(d["run_id"]), _spec(d, "spec"), bool(d["live"]), _baseline(d)),
    ProfileRequest.kind: lambda d: ProfileRequest(int(d["run_id"]), _spec(d, "spec"), int(d["steps"])),
    Cancel.kind: lambda d: Cancel(int(d["run_id"])),
    Pause.kind: lambda d: Pause(int(d["run_id"]), bool(d["paused"])),
    ProbeRequest.kind: lambda d: ProbeRequest(_backends(d)),
    Shutdown.kind: lambda d: Shutdown(),
    Ready.kind: lambda d: Ready(int(d["pid"]), int(d["version"])),
    ProbeAnswer.kind: lambda d: ProbeAnswer(dict(d["data"]), bool(d["final"])),
    Phase.kind: lambda d: Phase(int(d["run_id"]), str(d["name"])),
    Samples.kind: lambda d: Samples(int(d["run_id"]), _samples(d)),
    Finished.kind: _finished,
    Profiled.kind: lambda d: Profiled(int(d["run_id"]), dict(d["data"])),
    Failed.kind: lambda d: Failed(int(d["run_id"]), str(d["message"])),
}


def decode(data: bytes) -> Message:
    """The message in `data`. Raises ProtocolError, naming the request where it can, for anything
    that is not a message of this version."""
    try:
        d = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise ProtocolError(f"not a message: {exc}") from None
    if not isinstance(d, dict) or d.get("kind") not in _READERS:
        raise ProtocolError(f"unknown message: {str(d)[:80]!r}")
    run_id = d.get("run_id") if isinstance(d.get("run_id"), int) else None
    if d.get("v") != PROTOCOL_VERSION and d["kind"] != Ready.kind:  # Ready says its version itself
        raise ProtocolError(f"protocol version {d.get('v')!r}, expected {PROTOCOL_VERSION}", run_id)
    try:
        return _READERS[d["kind"]](d)
    except Exception as exc:  # a field missing or of the wrong type, a spec that does not validate
        raise ProtocolError(f"bad {d['kind']} message: {exc}", run_id) from None
