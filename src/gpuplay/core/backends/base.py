"""The small interface every array library sits behind."""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpuplay.core.process.lazynumpy import lazy_numpy
from gpuplay.core.spec import RunSpec

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_numpy(globals())


@dataclass(frozen=True)
class Availability:
    ok: bool
    reason: str = ""  # why not, in words a user can act on; empty when ok
    pending: bool = False  # the probe has not finished yet


@dataclass(frozen=True)
class DeviceInfo:
    id: str  # "cpu", "cuda:0", "mps"
    name: str
    memory_bytes: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


StepTimer = Callable[[Callable[[], Any]], tuple[float, Any]]


def host_timer(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Wall time of one synchronous call. The CPU libraries return only when done."""
    t0 = time.perf_counter_ns()
    out = fn()
    return (time.perf_counter_ns() - t0) * 1e-9, out


class Backend(ABC):
    """One array library. Subclasses import their library lazily, inside methods."""

    name: str = ""
    title: str = ""

    def __init__(self) -> None:
        self._probe_lock = threading.Lock()
        self._probe_thread: threading.Thread | None = None
        self._probe_result: tuple[Availability, list[DeviceInfo]] | None = None
        # Set in a process that must not import the library (the UI): answers come from the engine.
        self._remote = False
        self._facts: dict[str, Any] = {}

    # -- availability ------------------------------------------------------
    @abstractmethod
    def _probe(self) -> tuple[Availability, list[DeviceInfo]]:
        """Import the library and list devices. May be slow; runs at most once."""

    def start_probe(self) -> None:
        """Begin probing in the background; callers that cannot wait return at once."""
        if self._remote:
            return  # the engine process probes; its answer arrives through adopt_probe
        with self._probe_lock:
            if self._probe_thread is None and self._probe_result is None:
                self._probe_thread = threading.Thread(
                    target=self._run_probe, name=f"gpuplay-probe-{self.name}", daemon=True
                )
                self._probe_thread.start()

    def _run_probe(self) -> None:
        try:
            result = self._probe()
        except Exception as exc:  # a probe must never take the caller down
            result = (Availability(False, f"{self.title} failed to load: {type(exc).__name__}: {exc}"), [])
        self._probe_result = result

    def probe(self, timeout: float | None = None) -> tuple[Availability, list[DeviceInfo]]:
        """Availability and devices, waiting at most `timeout` seconds (None: as long as it takes)."""
        if self._probe_result is None:
            self.start_probe()
            thread = self._probe_thread
            if thread is not None:
                thread.join(timeout)
        if self._probe_result is None:
            return Availability(
                False, f"{self.title} is still being probed (import, devices)", pending=True
            ), []
        return self._probe_result

    def adopt_probe(self, avail: Availability, devices: list[DeviceInfo], facts: dict[str, Any]) -> None:
        """Take another process's probe answer as this backend's, and never probe here."""
        with self._probe_lock:
            self._remote = True
            self._facts = dict(facts)
            self._probe_result = None if avail.pending else (avail, list(devices))

    def forget_adopted(self) -> None:
        """Probe in this process again (after the engine that answered is gone)."""
        with self._probe_lock:
            if self._remote:
                self._remote, self._facts, self._probe_result, self._probe_thread = False, {}, None, None

    def availability(self, timeout: float | None = None) -> Availability:
        return self.probe(timeout)[0]

    def devices(self, timeout: float | None = None) -> list[DeviceInfo]:
        return self.probe(timeout)[1]

    def device_ids(self, timeout: float | None = None) -> list[str]:
        return [d.id for d in self.devices(timeout)]

    def device_name(self, device: str) -> str:
        for d in self.devices(0):
            if d.id == device or (device == "cuda" and d.id == "cuda:0"):
                return d.name
        return device

    # -- arrays --------------------------------------------------------------
    @abstractmethod
    def version(self) -> str | None: ...

    @abstractmethod
    def from_host(self, host: np.ndarray, device: str, dtype: str) -> Any: ...

    @abstractmethod
    def to_host(self, x: Any) -> Any:
        """Device array (or tuple of them) to NumPy, widened to float64/complex128."""

    @abstractmethod
    def synchronize(self, device: str) -> None: ...

    def download(self, x: Any) -> Any:
        """Copy a result to host memory as it is (no widening): the transfer a user's code pays."""
        return x

    def step_timer(self, device: str) -> StepTimer:
        return host_timer

    def module(self) -> Any:
        """The array module a workload's code uses (numpy, torch, cupy)."""
        raise NotImplementedError

    def free_memory(self, device: str) -> None:
        """Give cached device memory back (after an out-of-memory, between runs)."""
        return None

    def device_memory_free(self, device: str) -> int | None:
        """Bytes free on `device` for the memory check before a run; None for host memory."""
        return None

    def reset_peak_memory(self, device: str) -> None:
        """Start counting the run's own peak device memory from here (before the timed phase)."""
        return None

    def peak_memory(self, device: str) -> tuple[int | None, str] | None:
        """(bytes, how it was counted): the run's own peak device memory since reset_peak_memory;
        (None, why not) where the device's library keeps no peak (MPS); None for host memory."""
        return None

    # -- what only some libraries have (the planner refuses the others first) ----
    def compile(self, fn: Callable[..., Any], mode: str) -> Callable[..., Any]:
        """`fn` compiled by the library's compiler (torch.compile); `mode` as the spec names it."""
        raise NotImplementedError(f"{self.title} has no compiler")

    def compile_counts(self) -> Any:
        """The compiler's own counters (a compile_watch.DynamoCounts), None where there are none."""
        return None

    def autocast(self, fn: Callable[..., Any], device: str, dtype: str) -> Callable[..., Any]:
        """`fn` run under automatic mixed precision in `dtype` (float16 or bfloat16)."""
        raise NotImplementedError(f"{self.title} has no automatic mixed precision")

    def capture_graph(self, step: Callable[[], Any], device: str) -> Callable[[], Any]:
        """`step` recorded once in a device graph; the returned callable replays it."""
        raise NotImplementedError(f"{self.title} cannot capture device graphs")

    def is_out_of_memory(self, exc: BaseException) -> bool:
        return isinstance(exc, MemoryError)

    def cache_flusher(self, device: str) -> Any:
        """A cache_flush.CacheFlusher for `device` (cold-cache runs); None where there is none."""
        if device != "cpu":
            return None
        from gpuplay.core.backends.cache_flush import host_flusher

        return host_flusher()

    # -- conditions ----------------------------------------------------------
    def thread_counts(self) -> dict[str, int | None]:
        return {}

    @contextmanager
    def configured(self, spec: RunSpec) -> Iterator[list[str]]:
        """Apply the spec's library settings (threads, TF32...) for the run, then restore.

        Yields a list the run appends notes to.
        """
        yield []


def widen(a: np.ndarray) -> np.ndarray:
    """Float results to float64 and complex to complex128, for checking against the reference."""
    a = np.asarray(a)
    if np.iscomplexobj(a):
        return a.astype(np.complex128, copy=False)
    if a.dtype.kind == "f":
        return a.astype(np.float64, copy=False)
    return a
