"""The engine process's side: receive specs, measure them with the core runner, stream events back.

The main thread measures; a reader thread takes cancel, pause and shutdown at any time. Nothing
here writes to the terminal: the front end may be drawing on it, so the engine's stdout and
stderr (and faulthandler's dump on a crash) go to a log file the client names in its messages.
"""

from __future__ import annotations

import faulthandler
import functools
import json
import os
import queue
import signal
import sys
import threading
import time
from multiprocessing.connection import Connection
from typing import Any

from gpuplay.core.cuda_errors import STICKY_CUDA_ERRORS, is_sticky_cuda_error
from gpuplay.core.engine.protocol import SampleBatcher, probe_data

__all__ = ["STICKY_CUDA_ERRORS", "STICKY_EXIT_CODE", "Engine", "main"]

# A CUDA error of these kinds poisons the context for the life of the process: the only recovery
# is a new process, so the engine reports the run (or the profile) and exits.
STICKY_EXIT_CODE = 3


def main(fd: int) -> None:
    """Entry point of the engine process: `python -m gpuplay.core.engine.server FD`.

    The client starts it in a session of its own (Ctrl+C in the terminal is the front end's to
    handle) with stdout and stderr on the engine log, and FD one end of a socket pair.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    os.set_inheritable(fd, False)  # pass_fds made it inheritable: no process user code starts gets it
    faulthandler.enable(sys.stderr)  # a segfault leaves the Python stack in the engine log
    print(f"--- gpuplay engine pid {os.getpid()} started {time.strftime('%Y-%m-%d %H:%M:%S')}", flush=True)
    Engine(Connection(fd)).serve()


class Engine:
    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.send_lock = threading.Lock()
        self.jobs: queue.Queue[tuple[Any, ...]] = queue.Queue()
        self.current: int | None = None
        self.cancel = threading.Event()
        self.pause = threading.Event()
        self.stopping = threading.Event()

    def send(self, msg: tuple[Any, ...]) -> None:
        with self.send_lock:
            try:
                self.conn.send(msg)
            except (BrokenPipeError, EOFError, OSError):
                os._exit(0)  # the front end is gone: nothing left to measure for

    def serve(self) -> None:
        self.send(("ready", os.getpid()))
        threading.Thread(target=self._read, name="gpuplay-engine-reader", daemon=True).start()
        threading.Thread(target=self._probe, name="gpuplay-engine-probe", daemon=True).start()
        while not self.stopping.is_set():
            job = self.jobs.get()
            if job[0] == "stop":
                break
            if job[0] == "run":
                _, run_id, spec_dict, live, *rest = job  # a client of before pairs sends four
                self._run(run_id, spec_dict, live, rest[0] if rest else None)
            elif job[0] == "profile":
                _, run_id, spec_dict, steps = job
                self._profile(run_id, spec_dict, steps)
        self.conn.close()

    def _read(self) -> None:
        while True:
            try:
                msg = self.conn.recv()
            except (EOFError, OSError):
                os._exit(0)  # the front end died or closed the pipe: never outlive it
            kind = msg[0]
            if kind in ("run", "profile"):
                self.jobs.put(msg)
            elif kind == "cancel":
                if msg[1] == self.current:
                    self.cancel.set()
            elif kind == "pause":
                if msg[1] == self.current:
                    (self.pause.set if msg[2] else self.pause.clear)()
            elif kind == "probe":
                threading.Thread(target=self._probe, daemon=True).start()
            elif kind == "shutdown":
                self.stopping.set()
                self.cancel.set()
                self.jobs.put(("stop",))
                return

    def _probe(self) -> None:
        # NumPy and PyTorch first (the first measurement needs them); CuPy's probe can take >10 s.
        from gpuplay.core.backends import get_backend

        for b in ("numpy", "torch", "cupy"):
            get_backend(b).start_probe()
        self.send(("probe", json.dumps(probe_data(("numpy", "torch")), default=str), False))
        self.send(("probe", json.dumps(probe_data(("numpy", "torch", "cupy")), default=str), True))

    def _profile(self, run_id: int, spec_dict: dict[str, Any], steps: int) -> None:
        from gpuplay.core.devicelock import WaitCancelled, device_lock
        from gpuplay.core.profile import profile_spec
        from gpuplay.core.spec import RunSpec

        self.current = run_id
        self.cancel.clear()
        try:
            spec = RunSpec.from_dict(spec_dict)
            # A profile runs the workload too: it waits for the device like a measurement.
            with device_lock(spec.device, self.cancel, lambda m: self.send(("phase", run_id, m))):
                data = profile_spec(spec, steps=steps)
        except WaitCancelled as exc:
            data = {"status": "cancelled", "message": str(exc)}
        except BaseException as exc:  # profile_spec reports what a user can cause; anything else is ours
            data = {"status": "failed", "message": f"engine: {exc!r}"}
        self.current = None
        sticky = data.get("failure") == "cuda-context" or (
            data.get("status") == "failed" and is_sticky_cuda_error(str(data.get("message", "")))
        )
        if sticky:
            data["failure"] = "cuda-context"
            data.setdefault("notes", []).append(
                "the CUDA context is poisoned by this error; the engine restarts"
            )
        self.send(("profiled", run_id, json.dumps(data, default=str)))
        if sticky:
            os._exit(STICKY_EXIT_CODE)

    def _run(
        self, run_id: int, spec_dict: dict[str, Any], live: bool, baseline_dict: dict[str, Any] | None = None
    ) -> None:
        from gpuplay.core.devicelock import measure_exclusively
        from gpuplay.core.result import RunResult
        from gpuplay.core.runner import run
        from gpuplay.core.runner.paired import run_paired
        from gpuplay.core.spec import RunSpec
        from gpuplay.core.telemetry import RunTelemetry

        self.current = run_id
        self.cancel.clear()
        self.pause.clear()
        batcher = SampleBatcher(lambda batch: self.send(("samples", run_id, batch)))
        try:
            spec = RunSpec.from_dict(spec_dict)
            baseline = RunSpec.from_dict(baseline_dict) if baseline_dict is not None else None
        except Exception as exc:  # a client bug, reported rather than killing the engine
            self.send(("error", run_id, f"bad spec: {exc}"))
            return
        on_phase = lambda name, _detail: self.send(("phase", run_id, name))  # noqa: E731
        try:
            measure: Any = run if baseline is None else functools.partial(run_paired, baseline=baseline)
            # One measurement per device across every gpuplay process: a second one waits here.
            result = measure_exclusively(
                spec,
                lambda: measure(
                    spec,
                    on_sample=batcher.add if live else None,
                    cancel=self.cancel,
                    pause=self.pause,
                    on_phase=on_phase,
                    telemetry=RunTelemetry(),
                ),
                self.cancel,
                on_phase,
            )
        except BaseException as exc:  # run() reports what a user can cause; anything else is ours
            result = RunResult(spec=spec, status="failed", failure="error", message=f"engine: {exc!r}")
        batcher.flush()
        sticky = result.status == "failed" and is_sticky_cuda_error(result.message)
        if sticky:
            result.failure = "cuda-context"
            result.notes.append("the CUDA context is poisoned by this error; the engine restarts")
        self.current = None
        # JSON on the wire: plain data only (a torch version string would make the client import torch)
        self.send(("result", run_id, json.dumps(result.to_dict(), default=str)))
        if sticky:
            os._exit(STICKY_EXIT_CODE)


if __name__ == "__main__":
    main(int(sys.argv[1]))
