"""The engine's process: spawned with its socket and its log, as early as the front end can.

`spawn()` starts `python -m gpuplay.core.engine.server FD` with one end of a socket pair, its
stdout and stderr on the engine log, in a session of its own, from lifeline's long-lived spawner
thread (the parent-death signal). `EngineClient.start` drives it from there.

`start_early()` is what the `gpuplay` command's entry calls before it imports click and the rest
of the front end: for `run`, `sweep` and `compare` the engine's interpreter and imports (~0.25 s
on the development machine) then overlap the front end's own (~0.25 s) instead of following them.
This module imports only what a spawn needs (not even core.config on Linux: core/storage/statedir.py); the
process's first `EngineClient` that is the shared one (`client.shared_client`) adopts the early
engine; one never adopted (a usage error, `--help`) is killed at exit.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from gpuplay.core.measure import trace
from gpuplay.core.process.command import is_gpuplay_command
from gpuplay.core.process.lifeline import spawn as spawn_child
from gpuplay.core.storage.statedir import state_dir

LOG_CAP_BYTES = 10 * 2**20  # engine.log is cut to its last LOG_KEEP_BYTES at an engine start past this
LOG_KEEP_BYTES = 1 * 2**20
LOG_TAIL_BYTES = 64 * 2**10  # what the error path reads of it
# The engine inherits these when it starts; a caller that changes them needs a new engine.
# TF32 on AMD GPUs goes through hipBLASLt, which ATen allows only with HIPBLASLT_ALLOW_TF32=1 set
# before torch loads (core/hw/amd.py, HIPBLASLT_TF32): named here, not imported from there, so a
# spawn does not import the AMD glue and typing (13 ms) before the engine starts.
HIPBLASLT_TF32 = "HIPBLASLT_ALLOW_TF32"
ENGINE_ENV = ("GPUPLAY_STATE_DIR", "GPUPLAY_CONFIG_DIR", "OMP_NUM_THREADS", HIPBLASLT_TF32)


def amd_env(environ: dict[str, str] | os._Environ[str]) -> dict[str, str]:
    """HIPBLASLT_ALLOW_TF32=1 where it is not set (a value the user set is kept)."""
    return {} if HIPBLASLT_TF32 in environ else {HIPBLASLT_TF32: "1"}


# The commands that measure in the shared engine as soon as they have planned.
EARLY_COMMANDS = frozenset({"run", "sweep", "compare"})
# Flags with which one of them measures nothing: `compare --from FILE…` merges result files.
NO_ENGINE_FLAGS = {"compare": frozenset({"--from"})}


def engine_log_path() -> Path:
    folder = state_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "engine.log"
    with contextlib.suppress(OSError):
        cap_log(path)
    return path


def cap_log(path: Path, cap: int | None = None, keep: int | None = None) -> None:
    """Past `cap` bytes, keep only the last `keep` (from a line start): the latest crashes are
    what matter. Run at each engine start and while a run waits, so a chatty step that prints in a
    loop cannot fill the disk: the engine writes with O_APPEND, so cutting the file under it is safe."""
    cap = LOG_CAP_BYTES if cap is None else cap
    keep = min(cap, LOG_KEEP_BYTES if keep is None else keep)
    if path.stat().st_size <= cap:
        return
    tail = read_tail(path, keep)
    cut = tail.find(b"\n")
    tail = tail[cut + 1 :] if 0 <= cut < len(tail) - 1 else tail
    with open(path, "r+b") as f:
        f.write(b"--- gpuplay: engine.log was cut to its last part\n" + tail)
        f.truncate(f.tell())


def read_tail(path: Path, limit: int = LOG_TAIL_BYTES) -> bytes:
    """The last `limit` bytes of a file, never more, whatever its size."""
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - limit))
        return f.read(limit)


def engine_env() -> tuple[str | None, ...]:
    return tuple(os.environ.get(k) for k in ENGINE_ENV)


class Spawned:
    """An engine process just started: the process, our end of its socket, its log, the
    environment it inherited (ENGINE_ENV's values)."""

    __slots__ = ("env", "log_path", "log_start", "proc", "sock")

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        sock: socket.socket,
        log_path: Path | None,
        env: tuple[str | None, ...],
        log_start: int = 0,
    ) -> None:
        self.proc, self.sock, self.log_path, self.env = proc, sock, log_path, env
        self.log_start = log_start  # engine.log's size before it started: what follows is its own

    def kill(self) -> None:
        """End it and its group (it never measured: nothing of user code runs there yet)."""
        with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, OSError):
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(2.0)
        with contextlib.suppress(OSError):
            self.sock.close()


PROBE_ENV = "GPUPLAY_ENGINE_PROBE"  # backends an early engine starts importing at once (server.py)
SLOW_BACKENDS = ("torch", "cupy")  # an import of a second or more: worth starting before asked


def probe_hint(argv: list[str]) -> tuple[str, ...]:
    """The slow backends a command line names (`-b torch`, `--backend=cupy`, `--backends
    numpy,torch`), read before click parses it: only a head start, the parsed command still asks."""
    names: list[str] = []
    for i, arg in enumerate(argv):
        flag, eq, value = arg.partition("=")
        if flag in ("-b", "--backend", "--backends"):
            value = value if eq else (argv[i + 1] if i + 1 < len(argv) else "")
            names.extend(v.strip() for v in value.split(","))
    return tuple(b for b in SLOW_BACKENDS if b in names)


def spawn(env: dict[str, str] | None = None) -> Spawned:
    """Start an engine process (`env`: variables to add to what it inherits). Raises OSError when
    the interpreter cannot be started."""
    ours, theirs = socket.socketpair()
    log_path: Path | None = None
    log = None
    log_start = 0
    try:
        path = engine_log_path()
        log = open(path, "ab")  # noqa: SIM115 - closed below, once the child holds it
        log_path, log_start = path, log.seek(0, os.SEEK_END)
    except OSError:
        pass
    trace_fds, trace_env = trace.child_fds()  # GPUPLAY_TRACE: the engine marks on our stderr
    trace.mark("engine: spawning")
    # A fresh interpreter, not multiprocessing's spawn: it never re-imports the caller's
    # __main__, and its own process group keeps the terminal's Ctrl+C for the front end. The
    # caller's session, not one of its own: with the kernel's autogroup scheduling each session
    # is one share of a busy CPU, and a session of its own gave the engine a share a user's
    # script in that terminal does not get (a plain loop read 44–48 ms for elementwise torch 4M
    # sharing a busy session, 34–39 ms in its own, on the 2-core machine 8 processes loaded).
    # Forked from a thread that lives as long as this process, with a parent-death signal:
    # the engine ends its group if this process dies by SIGKILL (core/process/lifeline.py).
    try:
        proc = spawn_child(
            [sys.executable, "-m", "gpuplay.core.engine.server", str(theirs.fileno())],
            pass_fds=(theirs.fileno(), *trace_fds),
            stdin=subprocess.DEVNULL,
            stdout=log or subprocess.DEVNULL,
            stderr=log or subprocess.DEVNULL,
            process_group=0,
            close_fds=True,
            # HIPBLASLT_ALLOW_TF32=1 unless set: TF32 on AMD GPUs needs it before torch loads
            env={**os.environ, **amd_env(os.environ), **trace_env, **(env or {})},
        )
    except OSError:  # the interpreter gone or not executable (an upgrade, a venv moved)
        ours.close()
        raise
    finally:
        theirs.close()
        for fd in trace_fds:
            os.close(fd)
        if log is not None:
            log.close()
    trace.mark("engine: spawned")
    return Spawned(proc, ours, log_path, engine_env(), log_start)


_early: Spawned | None = None


def wanted_early(argv: list[str]) -> bool:
    """A command that will measure in the shared engine: `gpuplay run|sweep|compare …`, not asking
    for help, not merging files (`compare --from`), not measuring in-process. Group options before the command (rare) start it later."""
    return (
        is_gpuplay_command(argv)
        and len(argv) > 1
        and argv[1] in EARLY_COMMANDS
        and not any(a in ("-h", "--help") for a in argv[2:])
        and not any(a in NO_ENGINE_FLAGS.get(argv[1], ()) for a in argv[2:])
        and os.environ.get("GPUPLAY_IN_PROCESS", "") in ("", "0")
    )


def start_early(argv: list[str] | None = None) -> None:
    """Start the engine now if this process is a `gpuplay` command that measures (`wanted_early`).
    A slow backend the command line names (torch, CuPy) starts importing in it at once; the rest
    waits until its client names the backends the parsed command needs."""
    global _early
    if _early is not None or not wanted_early(sys.argv if argv is None else argv):
        return
    argv = sys.argv if argv is None else argv
    hint = probe_hint(argv[2:])
    try:
        _early = spawn({PROBE_ENV: ",".join(hint)} if hint else None)
    except OSError:
        return  # the command's own start says what could not start, in words (EngineStartError)
    atexit.register(discard_early)


def take_early() -> Spawned | None:
    """The engine `start_early` started, once, if it is alive and inherited the environment the
    engine would inherit now; otherwise None (and a stale one is ended)."""
    global _early
    early, _early = _early, None
    if early is None:
        return None
    if early.proc.poll() is None and early.env == engine_env():
        return early
    early.kill()
    return None


def discard_early() -> None:
    """End the early engine if no client took it (at exit, or a Ctrl+C before the command ran)."""
    early = take_early()
    if early is not None:
        early.kill()
