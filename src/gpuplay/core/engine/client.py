"""The front end's side of the engine: one process per client, killed and replaced when it must be.

`EngineClient` implements the `Engine` protocol (protocol.py): `run` has `gpuplay.core.runner.run`'s
signature and meaning, so the app, `gpuplay run` and `gpuplay compare` measure the same way; the
measurement happens in the engine process. Requests and events are the typed messages of
messages.py; a run and a profile wait for their answer in the same loop (`_request`).
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import math
import os
import queue
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuplay.core.engine import process
from gpuplay.core.engine.messages import (
    PROBED,
    PROTOCOL_VERSION,
    Answer,
    Cancel,
    Failed,
    Finished,
    Pause,
    Phase,
    ProbeAnswer,
    ProbeRequest,
    Profiled,
    ProfileRequest,
    Progress,
    ProtocolError,
    Ready,
    Request,
    RunRequest,
    Samples,
    Shutdown,
    decode,
    encode,
)
from gpuplay.core.engine.process import (  # noqa: F401 - the log's helpers, named here as before
    ENGINE_ENV,
    LOG_CAP_BYTES,
    LOG_KEEP_BYTES,
    LOG_TAIL_BYTES,
    cap_log,
    engine_log_path,
    read_tail,
)
from gpuplay.core.engine.protocol import (
    Engine,
    Listener,
    PhaseCallback,
    ProbeCallback,
    SampleCallback,
)
from gpuplay.core.engine.steplimit import STEP_GRACE_S, STEP_TIMEOUT, advice, held_to_limit, stopped_words
from gpuplay.core.engine.wire import FrameConnection
from gpuplay.core.measure import trace
from gpuplay.core.process.lifeline import kill_descendants
from gpuplay.core.result import RunResult
from gpuplay.core.spec import RunSpec

CANCEL_GRACE_S = 0.3  # an engine that has not stopped this long after a cancel is killed
WAIT_POLITELY_S = 0.2  # close(): how long an engine asked to shut down may take before SIGKILL
POLL_S = 0.02
# The watchdog. A warm-up or timed step that has not finished STEP_GRACE_S after its limit
# (max_step_s) is stopped by ending the engine: the grace (steplimit.py) covers a step timing
# that reaches the client up to one sample batch late (the engine sends them at most ~10 times
# a second) and the cancel grace a cooperative stop would get. The estimate's probes are parts of a step whose sum
# the estimate itself bounds (it refuses what would take too long): they get max_step_s × FACTOR
# + GRACE_S, which also absorbs the first probe's one-off costs. Compile, setup (the inputs) and
# the float64 check have costs of their own that max_step_s does not bound: not watched.
STEP_PHASES = frozenset({"warmup", "timed"})
WATCHDOG_FACTOR = 3.0
WATCHDOG_GRACE_S = 5.0
# A paired run's interleaved phase reports each pair: one element of each side (one step, or
# ~1 ms of µs steps), so a pair of steps each within the limit ends within twice it.
PAIRED_PHASE = "paired"
WATCHED_PHASES = frozenset({"estimate", PAIRED_PHASE, *STEP_PHASES})
HEALTH_CHECK_S = 1.0  # how often a waiting request checks the engine is alive and caps its log


def _now() -> str:
    import datetime as dt

    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def death_cause(exitcode: int | None) -> str:
    """Why an engine process ended, in words."""
    if exitcode is None:
        return "the engine process stopped answering"
    if exitcode < 0:
        sig = -exitcode
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else f"signal {sig}"
        return {
            "SIGKILL": "the engine process was killed (SIGKILL: out of host memory, or killed by hand)",
            "SIGSEGV": "the engine process crashed (SIGSEGV: a segmentation fault in native code)",
            "SIGABRT": "the engine process aborted (SIGABRT: a fatal error in native code)",
            "SIGBUS": "the engine process crashed (SIGBUS: a bad memory access in native code)",
            "SIGFPE": "the engine process crashed (SIGFPE: an arithmetic fault in native code)",
            "SIGTERM": "the engine process was terminated (SIGTERM)",
        }.get(name, f"the engine process was ended by {name}")
    # An exit status alone never says "CUDA error": measured code may call os._exit(N) with any N.
    # A poisoned context is reported by the run's own result (failure "cuda-context") before the
    # engine exits, so it needs no status of its own here.
    return f"the engine process exited with code {exitcode} (os._exit or sys.exit in the measured code?)"


class Watchdog:
    """When the step in progress has run too long. Progress: a phase starting or a step finishing."""

    def __init__(self, max_step_s: float, per_step: bool = True) -> None:
        self.enabled = math.isfinite(max_step_s) and max_step_s > 0
        self.max_step_s = max_step_s
        # Whether each warm-up and timed step reports its end (an unpaired run): a paired run's
        # sides warm up without step timings and time pairs of elements, so its phases get the
        # estimate's bound, and its steps are held to the limit when its result comes (steplimit).
        self.per_step = per_step
        self.current = ""
        self.since = time.monotonic()
        self.told = False  # the over-the-limit notice goes out once a run

    @property
    def limit_s(self) -> float:
        """Seconds without progress after which the current phase is stopped."""
        if not self.enabled:
            return math.inf
        if self.current in STEP_PHASES and self.per_step:
            return self.max_step_s + STEP_GRACE_S
        if self.current == PAIRED_PHASE:
            return 2 * self.max_step_s + STEP_GRACE_S
        return self.max_step_s * WATCHDOG_FACTOR + WATCHDOG_GRACE_S

    def phase(self, name: str) -> None:
        self.current = name
        self.progress()

    def progress(self) -> None:
        self.since = time.monotonic()

    def expired(self) -> bool:
        return self.current in WATCHED_PHASES and time.monotonic() - self.since > self.limit_s

    def overdue(self) -> str | None:
        """Once a run, when a step first runs past max_step_s: what is happening and when the
        watchdog will stop it (a headless wait of a minute and more was silent)."""
        if self.told or not self.enabled or self.current not in WATCHED_PHASES:
            return None
        elapsed = time.monotonic() - self.since
        if elapsed <= self.max_step_s:
            return None
        self.told = True
        left = max(0.0, self.limit_s - elapsed)
        at = time.strftime("%H:%M:%S", time.localtime(time.time() + left))
        return (
            f"a step has run {elapsed:.1f} s in the {self.current} phase, past its limit of "
            f"{self.max_step_s:g} s (--max-step); if it does not finish it is stopped in {left:.1f} s, "
            f"at {at}"
        )

    def hear(self, event: Progress) -> None:
        if isinstance(event, Phase):
            self.phase(event.name)
        else:
            self.progress()


class EngineStartError(RuntimeError):
    """The engine process could not be started: what, and why, in words (no traceback to show)."""

    def __init__(self, executable: str, exc: OSError) -> None:
        why = exc.strerror or str(exc) or type(exc).__name__
        super().__init__(
            f"could not start the measuring engine: {executable} -m gpuplay.core.engine.server: "
            f"{type(exc).__name__}: {why} (is the Python interpreter gone or not executable after "
            "an upgrade? reinstall gpuplay, or run it with a working interpreter)"
        )


class EngineEndedError(EngineStartError):
    """The engine process started, then ended before its probe answered (a broken
    sitecustomize, an import that kills the interpreter, a kill right after the spawn)."""

    def __init__(self, how: str, log_path: Path | None, tail: str) -> None:
        RuntimeError.__init__(
            self,
            f"the measuring engine's process ended before its backends were probed ({how})"
            + (f"; the end of its log ({log_path}):\n{tail}" if tail and log_path is not None else "")
            + (f"; its log: {log_path}" if not tail and log_path is not None else ""),
        )


# What ends a wait besides the engine's answer (client side only, never on the wire).
@dataclass(frozen=True)
class Lost:
    """The engine is gone (`reason`: why, when more is known than its exit status)."""

    reason: str | None = None


@dataclass(frozen=True)
class Replaced:
    """Cancelled, and the engine did not stop within the grace: it was killed and replaced."""

    grace_s: float


@dataclass(frozen=True)
class TimedOut:
    watch: Watchdog


Outcome = Answer | Lost | Replaced | TimedOut


class _Wait:
    """One request's wait in the client: the caller's cancel and pause passed on to the engine,
    the watchdog, and the engine's messages for this request sorted into progress and answer."""

    def __init__(
        self,
        run_id: int,
        cancel: threading.Event,
        pause: threading.Event | None,
        grace_s: float,
        watch: Watchdog | None = None,
        listener: Listener | None = None,
        on_notice: Callable[[str], object] | None = None,
    ) -> None:
        self.run_id = run_id
        self.on_notice = on_notice
        self.cancel, self.pause, self.grace_s = cancel, pause, grace_s
        self.watch = watch or Watchdog(math.inf)
        self.listener = listener or Listener()
        self.paused = False
        self.cancel_sent: float | None = None

    def controls(self, send: Callable[[Request], bool]) -> Replaced | TimedOut | None:
        """Pass on a pause or a cancel; what ends the wait on the client's side, if anything has."""
        if self.pause is not None and self.pause.is_set() != self.paused:
            self.paused = self.pause.is_set()
            send(Pause(self.run_id, self.paused))
            self.watch.progress()
        if self.cancel.is_set() and self.cancel_sent is None:
            self.cancel_sent = time.monotonic()
            send(Cancel(self.run_id))
        if self.cancel_sent is not None and time.monotonic() - self.cancel_sent >= self.grace_s:
            return Replaced(self.grace_s)
        if not self.paused and self.watch.expired():
            return TimedOut(self.watch)
        notice = None if self.paused or self.on_notice is None else self.watch.overdue()
        if notice is not None and self.on_notice is not None:
            self.on_notice(notice)
        return None

    def hear(self, event: Progress | Answer | Lost) -> Answer | Lost | None:
        """Progress goes to the watchdog and the caller; the answer (or the engine lost) ends the wait."""
        if isinstance(event, Lost):
            return event
        if event.run_id != self.run_id:
            return None  # a cancelled request's last messages
        if isinstance(event, Phase | Samples):
            self.watch.hear(event)
            self.listener.hear(event)
            return None
        return event


class EngineClient:
    """Drives one engine process. One measurement at a time; thread-safe to call from a worker."""

    in_process = False

    _ids = itertools.count(1)

    def __init__(
        self, name: str = "engine", on_probe: ProbeCallback | None = None, backends: tuple[str, ...] = PROBED
    ) -> None:
        self.name = name
        self.on_probe = on_probe
        # What the engine probes (and so imports) when it starts: a command names what it needs.
        self.backends = tuple(b for b in PROBED if b in backends)
        self.probe: dict[str, Any] | None = None  # the latest answer (final or not)
        self.probe_final = False
        self.restarts = 0
        self._probe_event = threading.Event()
        self._lock = threading.Lock()  # starting and killing
        self._run_lock = threading.Lock()  # one measurement at a time
        self._proc: Any = None
        self._conn: Any = None
        self._sock: socket.socket | None = None  # our end, kept to wake a blocked reader on a kill
        self._events: queue.Queue[Progress | Answer | Lost] = queue.Queue()
        self._send_lock = threading.Lock()
        self._log_path: Path | None = None
        self._log_start = 0  # engine.log's size when this engine started
        self._closed = False
        self._asked = False  # a run or a profile was sent to an engine of this client
        self._released = False  # asked to end once its command needed it no more (`release`)
        self._shutdown_sent = False  # `release` sent it Shutdown: it is ending on its own
        self.adopt_early = False  # start() takes the engine process.start_early started, if any

    # -- the process ----------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def log_path(self) -> Path | None:
        return self._log_path

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> None:
        """Start the engine if none runs. Returns at once: the engine imports torch on its own time."""
        with self._lock:
            if self._closed or self._released:
                raise RuntimeError("engine client is closed")
            if self.alive():
                return
            self._reap()
            spawned = process.take_early() if self.adopt_early else None
            if spawned is None:
                try:
                    spawned = process.spawn()
                except OSError as exc:
                    raise EngineStartError(sys.executable, exc) from None
            proc, ours, self._log_path = spawned.proc, spawned.sock, spawned.log_path
            self._log_start = spawned.log_start
            # The reader blocks in recv on a duplicate; shutting `ours` down wakes it even when a
            # process the measured code forked still holds the engine's end open.
            self._proc, self._sock, self._conn = proc, ours, FrameConnection(os.dup(ours.fileno()))
            parent = self._conn
            self._events = queue.Queue()
            threading.Thread(target=self._read, args=(parent, self._events), name="gpuplay-engine-client",
                             daemon=True).start()  # fmt: skip
            self._send(ProbeRequest(self.backends))

    def want(self, backends: tuple[str, ...]) -> None:
        """Have the engine probe these backends too (a running engine is asked at once)."""
        more = tuple(b for b in PROBED if b in backends and b not in self.backends)
        if more:
            self.backends = tuple(b for b in PROBED if b in self.backends or b in more)
            if self.alive():
                self._send(ProbeRequest(self.backends))

    def _read(self, conn: Any, events: queue.Queue[Progress | Answer | Lost]) -> None:
        """The engine's messages, in a thread of their own: probe answers are kept here, the rest
        queued for the request that waits on them. Ends on EOF or on an engine that speaks
        another protocol (it is not to be misread)."""
        while True:
            try:
                msg = decode(conn.recv_bytes())
            except (EOFError, OSError):
                events.put(Lost())
                return
            except ProtocolError as exc:
                if exc.run_id is None:  # an engine of another version: nothing it says can be trusted
                    events.put(Lost(f"the engine spoke another protocol ({exc}); is gpuplay being upgraded?"))
                    return
                msg = Failed(exc.run_id, f"unreadable answer from the engine: {exc}")
            if isinstance(msg, Ready) and msg.version != PROTOCOL_VERSION:
                events.put(Lost(f"the engine speaks protocol version {msg.version}, this front end "
                                f"{PROTOCOL_VERSION}: restart gpuplay after an upgrade"))  # fmt: skip
                return
            if trace.ENABLED:
                trace.mark(f"heard {type(msg).__name__}" + (f" {msg.name}" if isinstance(msg, Phase) else ""))
            if isinstance(msg, ProbeAnswer):
                self.probe, self.probe_final = msg.data, msg.final
                self._probe_event.set()
                if self.on_probe is not None:
                    self.on_probe(msg.data, msg.final)
            elif isinstance(msg, Phase | Samples | Finished | Profiled | Failed):
                events.put(msg)

    def _send(self, msg: Request) -> bool:
        with self._send_lock:
            try:
                self._conn.send_bytes(encode(msg))
                return True
            except (BrokenPipeError, EOFError, OSError, AttributeError):
                return False

    def kill(self, wait: bool = True) -> None:
        """Stop the engine now (SIGKILL): a hung compile or a stuck step cannot delay it.

        `wait=False` (a quitting app): SIGKILL cannot be ignored, so the engine is gone either way;
        not waiting for the kernel to tear down its memory (~80 ms with torch loaded, under load)
        leaves a zombie that this process's exit hands to init, which reaps it."""
        with self._lock:
            self._reap(wait)

    def _reap(self, wait: bool = True) -> None:
        """End the engine and everything it started, and close our end of the socket."""
        proc = self._proc
        if proc is not None:
            # The engine leads its own process group (start_new_session): the group takes with it
            # whatever the measured code started (a `sleep 1000`, a multiprocessing pool), which
            # would otherwise outlive it and hold the socket open. Killed before the engine is
            # reaped, so its pid (the group's id) cannot have been reused. A descendant that called
            # setsid() left the group: found through the engine's children (it is their
            # subreaper, core/lifeline.adopt_orphans) while the engine still lives.
            # An engine that has exited (asked to, `release`) ended its descendants itself
            # (server.main); none are left under it to find (nor psutil to import: ~8 ms). One
            # asked to is given the moment it needs (a few ms) rather than searched at once.
            if proc.returncode is None and self._shutdown_sent:
                self._wait_gone(WAIT_POLITELY_S)
            # An engine never asked to run anything (a refused run's early engine) started nothing.
            if proc.returncode is None and self._asked and not self._engine_gone():
                kill_descendants(proc.pid)
            with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError, OSError):
                proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(2.0 if wait else 0.0)
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)
            self._sock.close()
        if self._conn is not None:
            with contextlib.suppress(OSError):
                self._conn.close()
        self._proc = self._conn = self._sock = None

    def _engine_gone(self) -> bool:
        """The engine has exited (checked directly: the socket may not say so, see `_reap`).

        waitid with WNOWAIT leaves it a zombie, so its pid and process group stay ours to kill."""
        proc = self._proc
        if proc is None:
            return True
        try:
            info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return proc.returncode is not None
        return info is not None

    def _wait_gone(self, timeout: float) -> None:
        """Wait up to `timeout` for the engine to exit, without reaping it (its pid and group stay
        ours to kill): woken by a pidfd where Linux has one, else by polling."""
        proc = self._proc
        if proc is None or self._engine_gone():
            return
        with contextlib.suppress(AttributeError, OSError):
            fd = os.pidfd_open(proc.pid)
            try:  # poll, not select: a descriptor past FD_SETSIZE (1024) is a ValueError to select
                waiter = select.poll()
                waiter.register(fd, select.POLLIN)
                waiter.poll(max(0, int(timeout * 1000)))
            finally:
                os.close(fd)
            return
        deadline = time.monotonic() + timeout
        while not self._engine_gone() and time.monotonic() < deadline:
            time.sleep(0.002)

    def close(self, wait: bool = True) -> None:
        """Shut down for good: a polite request, then SIGKILL if it is not gone at once.

        `wait=False` (a command's exit): the request, then at once SIGKILL for the engine's group
        and descendants, without waiting for it to exit on its own (~15 ms here; ~8 ms this way);
        it was idle. It is still reaped: its CPU time and memory count as this process's children's."""
        self._closed = True
        trace.mark("engine: closing")
        # An engine that was never asked to measure (a command that stopped at a usage error
        # after starting it early) holds nothing: it is killed without waiting for it to listen.
        # `_engine_gone`, not `alive`: polling would reap an engine that ended on its own (after
        # `release`) before `_reap` kills its group, whose id could then be another's.
        if self._proc is not None and not self._engine_gone() and self._asked and not self._released:
            self._send(Shutdown())
            if wait:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self._proc.wait(WAIT_POLITELY_S)
        self.kill()
        trace.mark("engine: closed")

    def release(self) -> None:
        """Its command will ask nothing more: the engine is asked to end now, and exits (ending
        what it started, server.main) while the command prints; `close` at exit then finds it
        gone and only reaps it (~10 ms of a NumPy run's 0.6 s on the 2-core machine).
        Final: the client starts no engine after it."""
        with self._lock:
            if self._closed or self._released:
                return
            self._released = True
            asked = self._asked and self._proc is not None and self._proc.returncode is None
        if asked:
            trace.mark("engine: released")
            self._shutdown_sent = self._send(Shutdown())  # one never told is not waited for

    def wait_probe(self, timeout: float | None = None, final: bool = False) -> dict[str, Any] | None:
        """The engine's probe answer (starting the engine if needed), or None after `timeout`.
        Raises EngineEndedError when the engine ends before it has answered: waiting out the
        timeout for it said "NumPy is still being probed" 30 s later."""
        self.start()
        deadline = None if timeout is None else time.monotonic() + timeout
        proc = self._proc
        while True:
            if self._probe_covers(final):
                return self.probe
            if proc is not None and proc.poll() is not None:
                raise self._ended_at_start(proc.returncode)
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None
            self._probe_event.clear()
            self._probe_event.wait(0.1 if left is None else min(0.1, left))

    def _ended_at_start(self, exitcode: int) -> EngineEndedError:
        if exitcode < 0 and -exitcode in signal.Signals._value2member_map_:
            how = f"killed by {signal.Signals(-exitcode).name}"
        else:
            how = f"exit code {exitcode}"
        tail = ""
        if self._log_path is not None:
            with contextlib.suppress(OSError):
                data = read_tail(self._log_path)
                size = self._log_path.stat().st_size
                # Only what this engine wrote (the log's size at its spawn), its last lines.
                own = (
                    data[max(0, len(data) - (size - self._log_start)) :] if size >= self._log_start else data
                )
                tail = "\n".join(own.decode(errors="replace").strip().splitlines()[-6:])[-1000:]
        self.kill()
        return EngineEndedError(how, self._log_path, tail)

    def _probe_covers(self, final: bool) -> bool:
        """The latest answer covers every backend asked for (CuPy's only once `final`)."""
        probe = self.probe
        if probe is None or (final and not self.probe_final):
            return False
        return all(b in probe for b in self.backends if final or b != "cupy")

    # -- measuring ----------------------------------------------------------------------
    def run(
        self,
        spec: RunSpec,
        on_sample: SampleCallback | None = None,
        cancel: threading.Event | None = None,
        *,
        pause: threading.Event | None = None,
        on_phase: PhaseCallback | None = None,
        telemetry: Any = None,
        probe_timeout: float | None = 30.0,
        paired_with: RunSpec | None = None,
        on_notice: Callable[[str], object] | None = None,
        on_baseline: Callable[[RunResult], object] | None = None,
    ) -> RunResult:
        """Measure `spec` in the engine. Never raises for what a user can cause, nor for an engine
        that dies: the result says what happened. With `paired_with` (a NumPy baseline), both
        are timed in interleaved pairs and the result carries the speedup; `on_baseline` then
        hears the baseline's own result from the same pairs (its row), when it has a finished one.
        `on_notice` hears a step that runs past its limit, and when the watchdog will stop it."""
        cancel = cancel or threading.Event()
        with self._run_lock:
            started = _now()
            if cancel.is_set():
                return self._stopped(spec, started, "cancelled", "cancelled by the user")
            # Step timings flow only to a caller that listens; otherwise the engine sends a tick
            # per batch (jobs.run_job), the watchdog's proof of progress.
            watch = Watchdog(spec.max_step_s, per_step=paired_with is None)
            request = RunRequest(next(self._ids), spec, on_sample is not None, paired_with)
            wait = _Wait(
                request.run_id, cancel, pause, CANCEL_GRACE_S, watch, Listener(on_sample, on_phase), on_notice
            )
            outcome = self._request(request, wait)
            if isinstance(outcome, Finished):
                if outcome.baseline is not None and on_baseline is not None:
                    on_baseline(outcome.baseline)
                return outcome.result
            return self._run_stopped(spec, started, outcome)

    def _run_stopped(self, spec: RunSpec, started: str, outcome: Outcome) -> RunResult:
        """The result of a run that ended without the engine's result."""
        if isinstance(outcome, Replaced):
            return self._stopped(
                spec, started, "cancelled",
                f"cancelled by the user; the engine did not stop within {outcome.grace_s:.1f} s "
                "(a long step, a compile or a hang) and was replaced",
            )  # fmt: skip
        if isinstance(outcome, TimedOut):
            return self._step_timeout(spec, started, outcome.watch)
        if isinstance(outcome, Failed):
            return self._stopped(spec, started, "failed", outcome.message, failure="error")
        return self._died(spec, started, outcome.reason if isinstance(outcome, Lost) else None)

    def profile(self, spec: RunSpec, steps: int = 5, cancel: threading.Event | None = None) -> dict[str, Any]:
        """torch.profiler over `steps` steps of `spec`, in the engine (see gpuplay.core.runner.profile)."""
        cancel = cancel or threading.Event()
        with self._run_lock:
            request = ProfileRequest(next(self._ids), spec, steps)
            # A profile holds nothing worth waiting for: a cancel replaces the engine at once.
            outcome = self._request(request, _Wait(request.run_id, cancel, None, 0.0))
            if isinstance(outcome, Profiled):
                return outcome.data
            if isinstance(outcome, Replaced):
                return {"status": "cancelled", "message": "cancelled"}
            if isinstance(outcome, Failed):
                return {"status": "failed", "message": outcome.message}
            reason = outcome.reason if isinstance(outcome, Lost) else None
            return {"status": "failed", "message": self._died(spec, _now(), reason).message}

    def _request(self, request: RunRequest | ProfileRequest, wait: _Wait) -> Outcome:
        """Send `request` and wait for what ends it: the engine's answer, a cancel that replaced
        the engine, a step past the watchdog's limit, or the engine gone."""
        self.start()
        events = self._events
        self._asked = True
        trace.mark(f"sending {type(request).__name__}")
        if not self._send(request):
            return Lost()
        next_check = time.monotonic() + HEALTH_CHECK_S
        while True:
            stop = wait.controls(self._send)
            if isinstance(stop, Replaced):
                self._replace()
            if stop is not None:
                return stop
            try:
                event = events.get(timeout=POLL_S)
            except queue.Empty:
                if time.monotonic() >= next_check:
                    next_check = time.monotonic() + HEALTH_CHECK_S
                    self._cap_log()
                    if self._engine_gone():
                        # A process the measured code forked can hold the socket open: the
                        # reader then never sees EOF, so the engine itself is watched.
                        return Lost()
                continue
            answer = wait.hear(event)
            if answer is not None:
                self._cap_log()
                trace.mark("answer taken")
                return answer

    def _replace(self) -> None:
        """Mid-step, mid-compile or hung in user code: a new engine is quicker than waiting."""
        self.kill()
        self.restarts += 1
        self.start()

    def _step_timeout(self, spec: RunSpec, started: str, watch: Watchdog) -> RunResult:
        """A step ran past its limit: end the engine (user code need not look at a cancel)."""
        self.kill()
        self.restarts += 1
        if watch.current == PAIRED_PHASE:
            what = (
                f"a pair of steps of {spec.label()} and its NumPy baseline had not finished {watch.limit_s:.1f} s "
                "after it started (twice the limit and the grace) and was stopped by ending the engine"
            )
        elif watch.current in STEP_PHASES and watch.per_step:
            what = (
                f"a {'warm-up' if watch.current == 'warmup' else 'timed'} step of {spec.label()} had not "
                f"finished {watch.limit_s:.1f} s after it started and was stopped by ending the engine"
            )
        else:
            what = (
                f"the {watch.current} phase of {spec.label()} made no progress for {watch.limit_s:.0f} s "
                f"(the limit × {WATCHDOG_FACTOR:g} + {WATCHDOG_GRACE_S:g} s) and was stopped by ending the engine"
            )
        result = self._stopped(
            spec, started, "failed",
            f"{stopped_words(spec)}: {what} (a step that never returns, or one too long for the limit); "
            f"{advice(spec)}",
            failure=STEP_TIMEOUT,
        )  # fmt: skip
        result.notes.append("the next measurement runs in a new engine process")
        return result

    def _cap_log(self) -> None:
        if self._log_path is not None:
            with contextlib.suppress(OSError):
                cap_log(self._log_path, LOG_CAP_BYTES, LOG_KEEP_BYTES)

    def _stopped(
        self, spec: RunSpec, started: str, status: str, message: str, failure: str = ""
    ) -> RunResult:
        return RunResult(spec=spec, status=status, message=message, failure=failure, started=started,
                         finished=_now())  # fmt: skip

    def _died(self, spec: RunSpec, started: str, reason: str | None = None) -> RunResult:
        proc = self._proc
        exitcode = None
        pid = proc.pid if proc is not None else None
        with self._lock:
            # Not killed at once: an engine that is still exiting reports its own status.
            deadline = time.monotonic() + 2.0
            while not self._engine_gone() and time.monotonic() < deadline:
                time.sleep(POLL_S)
            self._reap()  # the process group first, then the engine
            exitcode = proc.returncode if proc is not None else None
        self.restarts += 1
        message = reason or death_cause(exitcode)
        tail = self._log_tail(pid)
        if tail:
            message += f": {tail}"
        if self._log_path is not None:
            message += f" (engine log: {self._log_path})"
        result = self._stopped(spec, started, "failed", message, failure="engine-died")
        result.notes.append("the next measurement runs in a new engine process")
        return result

    def _log_tail(self, pid: int | None) -> str:
        """The last meaningful line the dead engine wrote (faulthandler's header, an error)."""
        if self._log_path is None or pid is None:
            return ""
        try:
            text = read_tail(self._log_path).decode(errors="replace")
        except OSError:
            return ""
        marker = f"--- gpuplay engine pid {pid} started"
        if marker in text:
            text = text[text.rindex(marker) :].split("\n", 1)[-1]
        elif "--- gpuplay engine pid " in text:
            return ""  # the tail is another engine's
        # else: this engine wrote more than the tail since it started; the tail is its own
        lines = text.splitlines()
        for line in reversed(lines):
            if line.startswith(("Fatal Python error", "MemoryError")) or "Error:" in line:
                return line.strip()[:200]
        return ""


# -- one engine per front-end process, for the headless commands ---------------------------
_shared: EngineClient | None = None
_shared_lock = threading.Lock()


_shared_env: tuple[str | None, ...] = ()


def shared_client(backends: tuple[str, ...] | None = None) -> EngineClient:
    """This process's engine; `backends`: those its probe must cover besides those already asked
    for (None: nothing more, or every backend for a new engine)."""
    global _shared, _shared_env
    env = process.engine_env()
    stale = None
    with _shared_lock:
        if _shared is not None and env != _shared_env:
            stale, _shared = _shared, None
            backends = backends or stale.backends
        if _shared is None:
            _shared, _shared_env = EngineClient(backends=PROBED if backends is None else backends), env
            _shared.adopt_early = True  # the engine the command's entry started (process.start_early)
            atexit.register(shutdown_shared)
        client = _shared
    if stale is not None:
        stale.close()
    if backends is not None:
        client.want(backends)
    return client


def start_engine_early(backends: tuple[str, ...] = ("numpy",)) -> None:
    """Start this process's engine now, probing `backends`, so that its interpreter and imports
    overlap the front end's own (options, scenarios, planning) instead of following them."""
    if not in_process():
        shared_client(backends).start()


_per_device: dict[str, EngineClient] = {}


def client_for(device: str) -> EngineClient:
    """One engine per device: runs on several GPUs at once never share a process or a CUDA context."""
    with _shared_lock:
        if device not in _per_device:
            if not _per_device and _shared is None:
                atexit.register(shutdown_shared)
            _per_device[device] = EngineClient(name=f"engine-{device}")
        return _per_device[device]


def shutdown_shared() -> None:
    global _shared
    with _shared_lock:
        clients = [c for c in (_shared, *_per_device.values(), *_released) if c is not None]
        _shared = None
        _per_device.clear()
        _released.clear()
    for client in clients:
        client.close(wait=False)  # this process is exiting: its engines need no waiting for


_released: list[EngineClient] = []  # released, not yet reaped: shutdown_shared reaps them at exit


def release_shared() -> None:
    """A command that will measure no more (a `run` before it prints): its engines are asked to
    end now (`EngineClient.release`) and reaped at its exit; a later request would start anew."""
    global _shared
    with _shared_lock:
        clients = [c for c in (_shared, *_per_device.values()) if c is not None]
        _shared = None
        _per_device.clear()
        _released.extend(clients)
    for client in clients:
        client.release()


def adopt_shared_probe(
    timeout: float = 30.0, final: bool = False, backends: tuple[str, ...] | None = None
) -> None:
    """Answer this process's backend questions from the shared engine's probe, so a headless
    command refuses what cannot run without importing torch itself (the engine already does).

    `backends`: those the command uses (None: every one); the engine probes only those, and this
    process marks the others as the engine's too, so nothing here imports them either."""
    if in_process():
        return
    from gpuplay.core.engine.protocol import adopt_probe, await_engine_probe

    await_engine_probe()
    data = shared_client(backends).wait_probe(timeout, final=final)
    if data is not None:
        adopt_probe(data)


def in_process() -> bool:
    """GPUPLAY_IN_PROCESS=1 measures in the calling process (profiling gpuplay itself, some tests)."""
    return os.environ.get("GPUPLAY_IN_PROCESS", "") not in ("", "0")


def measure(
    spec: RunSpec,
    on_sample: Callable[[str, float], None] | None = None,
    cancel: threading.Event | None = None,
    *,
    pause: threading.Event | None = None,
    on_phase: Callable[[str, str], None] | None = None,
    telemetry: Any = None,
    paired_with: RunSpec | None = None,
    on_notice: Callable[[str], object] | None = None,
    on_baseline: Callable[[RunResult], object] | None = None,
) -> RunResult:
    """`runner.run`'s contract, measured in the shared engine process (or in-process if asked).

    With `paired_with`, `spec` and that baseline are timed in interleaved pairs (runner.paired);
    `on_baseline` hears the baseline's own result from those pairs (its row: no second run).
    `telemetry`: the window in-process runs bracket the timed steps with (a new one when None);
    the engine process opens its own, so a front end that leaves it None never imports it."""
    if in_process():
        from gpuplay.core.runner import run
        from gpuplay.core.runner.paired import run_pair

        if telemetry is None:
            from gpuplay.core.measure.telemetry import RunTelemetry

            telemetry = RunTelemetry()

        # Nothing here can stop a step: one that finished over its limit is no result (steplimit).
        if paired_with is not None:
            result, base = run_pair(spec, paired_with, on_sample, cancel, pause=pause, on_phase=on_phase,
                                    telemetry=telemetry)  # fmt: skip
            if base is not None and on_baseline is not None:
                on_baseline(base)
            return held_to_limit(result)
        return held_to_limit(
            run(spec, on_sample, cancel, pause=pause, on_phase=on_phase, telemetry=telemetry)
        )
    return shared_client().run(
        spec, on_sample, cancel, pause=pause, on_phase=on_phase, telemetry=telemetry, paired_with=paired_with,
        on_notice=on_notice, on_baseline=on_baseline,
    )  # fmt: skip


def make_engine(name: str = "engine", on_probe: ProbeCallback | None = None) -> Engine:
    """The engine a front end should use: a process of its own, unless GPUPLAY_IN_PROCESS=1."""
    if in_process():
        from gpuplay.core.engine.inprocess import InProcessEngine

        return InProcessEngine(name, on_probe)
    return EngineClient(name, on_probe)
