"""The engine process's side: receive specs, measure them with the core runner, stream events back.

The main thread measures; a reader thread takes cancel, pause and shutdown at any time. Nothing
here writes to the terminal: the front end may be drawing on it, so the engine's stdout and
stderr (and faulthandler's dump on a crash) go to a log file the client names in its messages.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import queue
import signal
import sys
import threading
import time
from typing import Any

from gpuplay.core.engine.jobs import poisoned, profile_job, run_job
from gpuplay.core.engine.messages import (
    PROBED,
    Cancel,
    Event,
    Failed,
    Pause,
    ProbeAnswer,
    ProbeRequest,
    ProfileRequest,
    ProtocolError,
    Ready,
    RunRequest,
    Shutdown,
    decode,
    encode,
)
from gpuplay.core.engine.protocol import probe_data
from gpuplay.core.engine.wire import FrameConnection
from gpuplay.core.measure import trace
from gpuplay.core.measure.cuda_errors import STICKY_CUDA_ERRORS
from gpuplay.core.process.lifeline import adopt_orphans, end_group_and_exit, end_group_on_sigterm

__all__ = ["STICKY_CUDA_ERRORS", "STICKY_EXIT_CODE", "EngineServer", "main"]

# A CUDA error of these kinds poisons the context for the life of the process: the only recovery
# is a new process, so the engine reports the run (or the profile) and exits.
STICKY_EXIT_CODE = 3


def main(fd: int) -> None:
    """Entry point of the engine process: `python -m gpuplay.core.engine.server FD`.

    The client starts it in a session of its own (Ctrl+C in the terminal is the front end's to
    handle) with stdout and stderr on the engine log, and FD one end of a socket pair.
    """
    trace.mark("server imported")
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    end_group_on_sigterm()  # the parent-death signal the client asks for: the group goes too
    adopt_orphans()  # a setsid'd double-fork daemon of user code re-parents here, so it is ended too
    os.set_inheritable(fd, False)  # pass_fds made it inheritable: no process user code starts gets it
    faulthandler.enable(sys.stderr)  # a segfault leaves the Python stack in the engine log
    print(f"--- gpuplay engine pid {os.getpid()} started {time.strftime('%Y-%m-%d %H:%M:%S')}", flush=True)
    EngineServer(FrameConnection(fd)).serve()
    # Asked to shut down: what the measured code started goes too, a setsid'd daemon included
    # (it re-parented here, `adopt_orphans`; a plain exit would hand it to init).
    sys.stdout.flush()
    sys.stderr.flush()
    trace.mark("exit")
    end_group_and_exit(0)


class EngineServer:
    """The engine process's loop: requests in over `conn`, typed events out (see messages.py)."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.send_lock = threading.Lock()
        self.jobs: queue.Queue[RunRequest | ProfileRequest | None] = queue.Queue()  # None: stop
        self.current: int | None = None
        self.cancel = threading.Event()
        self.pause = threading.Event()
        self.stopping = threading.Event()
        self.warmed = threading.Event()  # the runner is imported (or failed to be): serve() clears it
        self.warmed.set()
        # NumPy and its backend are imported and probed (or failed to be): a NumPy-only probe
        # answers from here, before the rest of the runner is imported (serve() clears it).
        self.numpy_ready = threading.Event()
        self.numpy_ready.set()

    def send(self, msg: Event) -> None:
        with self.send_lock:
            try:
                self.conn.send_bytes(encode(msg))
            except (BrokenPipeError, EOFError, OSError):
                end_group_and_exit(0)  # the front end is gone: nothing left to measure for

    def serve(self) -> None:
        self.warmed.clear()
        self.numpy_ready.clear()
        self.send(Ready(os.getpid()))
        trace.mark("ready sent")
        # No probe here: the client names the backends its command needs (ProbeRequest), so a
        # NumPy-only command never imports torch in the engine.
        threading.Thread(target=self._read, name="gpuplay-engine-reader", daemon=True).start()
        # A slow backend the command line named starts importing first (its own thread: torch
        # shares no module with the runner), then the runner, while the front end still imports
        # and plans: every measurement needs it. Probes wait for it (`warmed`): two threads
        # importing the same modules at once can hand one of them a partly initialised module.
        # Except a NumPy-only probe (what a NumPy run asks): this thread first imports NumPy and
        # its backend and probes it (`warm_numpy_probe`), so the probe thread's answer then reads
        # only modules already imported (a test checks it imports none) and the front end plans
        # while this thread imports the rest of the runner.
        self._head_start()
        try:
            warm_numpy_probe()
        except Exception as exc:  # a NumPy probe then waits for the runner and says why itself
            print(f"gpuplay engine: probing NumPy failed: {exc!r}", file=sys.stderr, flush=True)
        else:  # not on a failure: the probe thread would import what this thread still imports
            self.numpy_ready.set()
        trace.mark("numpy probed")
        try:
            warm_runner()
        except Exception as exc:  # said in the log; the first run then fails with the reason
            print(f"gpuplay engine: importing the runner failed: {exc!r}", file=sys.stderr, flush=True)
        finally:
            self.warmed.set()
            self.numpy_ready.set()
        trace.mark("runner imported")
        with contextlib.suppress(Exception):  # what it cannot do now, the first run does, as before
            prime_first_run()  # after `warmed`: a probe's answer does not wait for it
        trace.mark("first run primed")
        while not self.stopping.is_set():
            job = self.jobs.get()
            if job is None:
                break
            self.do(job)
        self.conn.close()

    def _head_start(self) -> None:
        """Start importing the slow backends the command line named (process.start_early set
        PROBE_ENV): torch's import (~0.8 s) then overlaps the front end's imports and planning;
        the client's own ProbeRequest finds it under way."""
        from gpuplay.core.engine.process import PROBE_ENV, SLOW_BACKENDS

        names = [b for b in os.environ.get(PROBE_ENV, "").split(",") if b in SLOW_BACKENDS]
        if names:
            from gpuplay.core.backends import get_backend

            trace.mark(f"head start: importing {', '.join(names)}")
            for name in names:
                get_backend(name).start_probe()

    def do(self, job: RunRequest | ProfileRequest) -> None:
        """Run one request to its answer; a CUDA error that poisons the context ends the process."""
        self.current = job.run_id
        self.cancel.clear()
        self.pause.clear()
        if isinstance(job, RunRequest):
            answer: Any = run_job(job, self.send, self.cancel, self.pause, telemetry=_run_telemetry())
        else:
            answer = profile_job(job, self.send, self.cancel)
        self.current = None
        # What the measured code printed reaches the engine log before the answer: a command's
        # exit SIGKILLs the idle engine at once (client.close(wait=False)), and a block-buffered
        # stdout (the log is a file) would lose its last lines there.
        with contextlib.suppress(Exception):  # a step may have replaced or closed them
            sys.stdout.flush()
            sys.stderr.flush()
        self.send(answer)
        trace.mark("answer sent")
        if poisoned(answer):
            os._exit(STICKY_EXIT_CODE)

    def _read(self) -> None:
        while True:
            try:
                data = self.conn.recv_bytes()
            except (EOFError, OSError):
                # The front end died (SIGKILL, its terminal closed) or closed the pipe: never
                # outlive it, nor let anything the measured code started outlive it.
                end_group_and_exit(0)
            try:
                msg = decode(data)
            except ProtocolError as exc:  # a client bug, reported rather than killing the engine
                print(f"gpuplay engine: {exc}", file=sys.stderr, flush=True)
                if exc.run_id is not None:
                    self.send(Failed(exc.run_id, str(exc)))
                continue
            if not self.take(msg):
                return

    def take(self, msg: object) -> bool:
        """Act on one message from the client; False once it asked to shut down."""
        if trace.ENABLED:
            trace.mark(f"heard {type(msg).__name__}")
        if isinstance(msg, RunRequest | ProfileRequest):
            self.jobs.put(msg)
        elif isinstance(msg, Cancel) and msg.run_id == self.current:
            self.cancel.set()
        elif isinstance(msg, Pause) and msg.run_id == self.current:
            (self.pause.set if msg.paused else self.pause.clear)()
        elif isinstance(msg, ProbeRequest):
            threading.Thread(target=self._probe, args=(msg.backends,), name="gpuplay-engine-probe",
                             daemon=True).start()  # fmt: skip
        elif isinstance(msg, Shutdown):
            self.stopping.set()
            self.cancel.set()
            self.jobs.put(None)
            return False
        return True

    def _probe(self, names: tuple[str, ...] = PROBED) -> None:
        # NumPy and PyTorch first (the first measurement needs them); CuPy's probe can take >10 s,
        # so it comes in a second answer, the final one. NumPy alone answers once the main thread
        # has imported and probed it; any other backend waits for the whole runner's import.
        (self.numpy_ready if set(names) <= NUMPY_ONLY else self.warmed).wait()
        from gpuplay.core.backends import get_backend

        trace.mark(f"probing {', '.join(names)}")
        for b in names:
            get_backend(b).start_probe()
        quick = tuple(b for b in names if b != "cupy")
        if quick != names:
            self.send(ProbeAnswer(probe_data(quick), False))
        self.send(ProbeAnswer(probe_data(names), True))
        trace.mark("probe answered")


NUMPY_ONLY = frozenset({"numpy"})


def warm_numpy_probe() -> None:
    """Import NumPy and its backend and probe it, in the engine's main thread before the runner:
    what a NumPy probe's answer needs. The answer (`_probe`) then imports
    nothing: the probe's result is cached in the backend."""
    import numpy  # noqa: F401

    probe_data(tuple(NUMPY_ONLY))


def warm_runner() -> None:
    """Import the runner while the front end still plans, so the first run does not wait for it
    (about 50 ms on the development machine). It imports no array library beyond NumPy."""
    import gpuplay.core.engine.devicelock
    import gpuplay.core.runner
    import gpuplay.core.runner.paired  # noqa: F401


def prime_first_run() -> None:
    """What every first run paid after its request (~30 ms on the 2-core
    machine), done while the engine waits for it: NumPy's random module (every workload's
    inputs), the energy module (every run asks for a counter), threadpoolctl (the BLAS thread
    count in a CPU run's conditions) and the installed versions a result records
    (core/measure/provenance.py reads them once per process)."""
    import numpy.random  # noqa: F401

    import gpuplay.core.measure.energy  # noqa: F401
    from gpuplay.core.measure import provenance

    with contextlib.suppress(ImportError):
        import threadpoolctl  # noqa: F401
    provenance.installed()


def _run_telemetry() -> Any:
    # The engine's own telemetry window: the RSS and CPU figures attached to a result are the engine's.
    from gpuplay.core.measure.telemetry import RunTelemetry

    return RunTelemetry()


if __name__ == "__main__":
    main(int(sys.argv[1]))
