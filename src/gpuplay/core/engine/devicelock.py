"""One measurement per device at a time, across threads, tabs and processes.

Two gpuplay processes timing the same device at once slow each other down and neither says so
(two browser tabs on one talk: a 1.48 s FFT became 2.6 s). The engine holds an advisory lock on
`<state>/locks/<device>.lock` (fcntl.flock) around each measurement; a second one waits, polling
so that cancel still works, and reports "cuda:0 busy: measuring in another session (pid N)"
through the phase callback the front ends already show. flock is released by the kernel when a
process dies, so a crashed engine never leaves a device locked.

Where locking is impossible (no fcntl, a read-only state folder) a measurement goes ahead
unlocked and says so in its notes: a lock must never stop a talk.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from gpuplay.core.storage.statedir import state_dir  # not core.config: the engine's start

if TYPE_CHECKING:
    from gpuplay.core.result import RunResult
    from gpuplay.core.spec import RunSpec

try:
    import fcntl
except ImportError:  # Windows: no advisory locks here; measurements go unlocked
    fcntl = None  # type: ignore[assignment]

POLL_S = 0.05  # how often a waiting measurement retries the lock and looks at cancel
_SAFE = re.compile(r"[^A-Za-z0-9_.-]")


class WaitCancelled(Exception):
    """Cancel (or the timeout) came while waiting for the device; nothing was measured."""


def device_key(device: str) -> str:
    """The lock's name for a device: 'cuda' is the current device, index 0 ('cuda:0')."""
    device = device.strip().lower() or "cpu"
    if device in ("cuda", "gpu"):
        return "cuda:0"
    if device == "mps":
        return "mps:0"
    return device


def device_uuid(device: str, root: Path | None = None) -> str | None:
    """The UUID of the physical GPU (or MIG instance) behind 'cuda:N' in this process, or None.

    CUDA's ordinal names a different board in each session whose CUDA_VISIBLE_DEVICES differs:
    the lock is keyed by what the ordinal names. Found as telemetry finds it (core/measure/telemetry.py
    cuda_device_uuids): from torch or CuPy where loaded, else a CUDA_VISIBLE_DEVICES listing
    UUIDs, or NVML's UUIDs under CUDA_DEVICE_ORDER=PCI_BUS_ID. A process that can tell none of
    these (a front end, which never loads torch) reads what an engine on this machine recorded
    under the same CUDA environment when it took the lock (`remember_uuid`), so both name one lock.
    """
    key = device_key(device)
    if not key.startswith("cuda:"):
        return None
    from gpuplay.core.measure.telemetry import cuda_device_uuids

    # One spelling whoever tells it (32 hex digits, as telemetry matches them): NVML's "GPU-…",
    # torch's and a CUDA_VISIBLE_DEVICES entry name the same lock. A MIG instance has its own.
    index = key.split(":")[1]
    uuids = cuda_device_uuids()
    if uuids is None:
        return _recorded_uuid(key, root)
    return uuids[int(index)] if index.isdigit() and int(index) < len(uuids) else None


def _uuid_record(key: str, root: Path | None) -> Path:
    """Where the UUID that `key` ('cuda:N') names is recorded: per host and CUDA environment (the
    variables that decide what an ordinal names), since the state folder may be shared."""
    import hashlib
    import platform

    scope = "\n".join((platform.node(), os.environ.get("CUDA_VISIBLE_DEVICES", "\0unset"),
                       os.environ.get("CUDA_DEVICE_ORDER", "")))  # fmt: skip
    digest = hashlib.sha256(scope.encode(errors="replace")).hexdigest()[:16]
    return (root or state_dir()) / "locks" / "names" / f"{key.replace(':', '-')}.{digest}"


_UUID_TEXT = re.compile(r"[0-9a-f]{32}")


def _recorded_uuid(key: str, root: Path | None) -> str | None:
    try:
        with open(_uuid_record(key, root), "rb") as f:
            text = f.read(64).decode("ascii", errors="replace").strip()
    except OSError:
        return None
    return text if _UUID_TEXT.fullmatch(text) else None


def remember_uuid(device: str, root: Path | None = None) -> None:
    """Record the UUID this process (which loaded the GPU library) knows for `device`, for the front
    ends on this machine under the same CUDA environment (`device_uuid`); nothing when unknown."""
    key = device_key(device)
    if not key.startswith("cuda:"):
        return
    uuid = device_uuid(device, root)
    if uuid is None or not _UUID_TEXT.fullmatch(uuid) or _recorded_uuid(key, root) == uuid:
        return
    path = _uuid_record(key, root)
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(uuid + "\n")
        os.replace(tmp, path)  # whole or absent: a reader never sees half a UUID


def lock_name(device: str, root: Path | None = None) -> str:
    """The lock file's stem: the GPU's UUID where known ('cuda-<32 hex digits>'), else the device key."""
    uuid = device_uuid(device, root)
    key = f"cuda-{uuid}" if uuid else device_key(device).replace(":", "-")
    return _SAFE.sub("-", key)


def lock_path(device: str, root: Path | None = None) -> Path:
    return (root or state_dir()) / "locks" / f"{lock_name(device, root)}.lock"


COMMAND_CHARS = 120  # what the lock file keeps of the holder's command line
BUSY = " busy: measuring in another session"  # how a front end tells a wait from a phase name


def holder_pid(path: Path) -> int | None:
    """The pid written in the lock file by whoever holds it (None when unknown)."""
    return holder(path)[0]


def holder(path: Path) -> tuple[int | None, str]:
    """The pid and the command line written in the lock file by whoever holds it."""
    try:
        with open(path, "rb") as f:
            lines = f.read(4096).decode("utf-8", errors="replace").splitlines()
    except OSError:
        return None, ""
    try:
        pid = int(lines[0]) if lines else None
    except ValueError:
        pid = None
    return pid, (lines[1][:COMMAND_CHARS] if len(lines) > 1 else "")


def busy_message(device: str, pid: int | None, command: str = "") -> str:
    """What a waiting session says: who holds the device (pid, command) and that it waits.
    The command is the holder's own text: a front end shows it escaped (safetext.visible)."""
    who = f" (pid {pid}: {command})" if pid and command else f" (pid {pid})" if pid else ""
    return f"{device_key(device)}{BUSY}{who}; waiting for it to finish"


def is_busy_message(text: str) -> bool:
    return BUSY in text


# This process's holder_command, found once: reading it is four /proc reads (~0.4 ms), paid by
# every point of a sweep; a process's command line, and an engine's front end, stay for its life.
_holder_command: tuple[int, str] | None = None


def holder_command() -> str:
    """This session's command line for the lock file, as a user typed it: the front end's, when
    this is the engine process (its own is `python -m gpuplay.core.engine.server FD`)."""
    global _holder_command
    known = _holder_command
    if known is not None and known[0] == os.getpid():  # a forked child finds its own
        return known[1]
    text = _find_holder_command()
    if text:  # an unreadable process table is tried again next time
        _holder_command = (os.getpid(), text)
    return text


def _proc_cmdline(pid: int) -> list[str]:
    """psutil.Process(pid).cmdline() as _pslinux.Process.cmdline reads it, without importing psutil
    (~7-14 ms of a NumPy run's engine): /proc/PID/cmdline in the file system's
    encoding, split at NULs, or at spaces for a process that rewrote its title without them."""
    with open(f"/proc/{pid}/cmdline", encoding=sys.getfilesystemencoding(), errors="surrogateescape") as f:
        data = f.read()
    if not data:
        return []
    sep = "\x00" if data.endswith("\x00") else " "
    if data.endswith(sep):
        data = data[:-1]
    argv = data.split(sep)
    if sep == "\x00" and len(argv) == 1 and " " in data:
        argv = data.split(" ")
    return argv


def _command_and_pid() -> tuple[list[str], int]:
    """This process's command line and pid, or its front end's (its parent) when this is the engine."""
    if os.path.isfile("/proc/self/cmdline"):
        with contextlib.suppress(OSError):
            argv, pid = _proc_cmdline(os.getpid()), os.getpid()
            if "gpuplay.core.engine.server" in argv:
                with contextlib.suppress(OSError):  # a parent gone or not ours to read: our own
                    argv, pid = _proc_cmdline(os.getppid()), os.getppid()
            return argv, pid
    import psutil  # elsewhere (macOS, Windows), or a /proc that cannot be read

    proc = psutil.Process()
    argv = proc.cmdline()
    if "gpuplay.core.engine.server" in argv:
        proc, argv = proc.parent() or proc, (proc.parent() or proc).cmdline()
    return argv, proc.pid


def _find_holder_command() -> str:
    try:
        argv, pid = _command_and_pid()
    except Exception:  # no psutil, or the process table unreadable: the pid alone says enough
        return ""
    if len(argv) > 1 and os.path.basename(argv[1]) == "gpuplay":  # the console script
        argv = ["gpuplay", *argv[2:]]
    elif argv[1:3] == ["-m", "gpuplay"]:
        argv = ["gpuplay", *argv[3:]]
    text = " ".join(argv).replace("\n", " ").replace("\r", " ")
    return text[:COMMAND_CHARS] + (f" [front end pid {pid}]" if pid != os.getpid() else "")


def who_holds(device: str, root: Path | None = None) -> str | None:
    """The busy message if another session holds `device` now, else None; waits for nothing.
    Read by a front end before its engine is even ready, so a wait is said at once."""
    if fcntl is None:
        return None
    path = lock_path(device, root)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None  # never locked here
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return busy_message(device, *holder(path))
        except OSError:
            return None
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


@contextlib.contextmanager
def device_lock(
    device: str,
    cancel: threading.Event | None = None,
    on_wait: Callable[[str], None] | None = None,
    *,
    timeout_s: float | None = None,
    root: Path | None = None,
    notes: list[str] | None = None,
) -> Iterator[None]:
    """Hold `device`'s lock for the body; wait (reporting through `on_wait`) while another holds it.

    Raises WaitCancelled when `cancel` is set, or `timeout_s` passes, before the lock is free.
    """
    path = lock_path(device, root)
    remember_uuid(device, root)
    if notes is not None and device_key(device).startswith("cuda:") and device_uuid(device, root) is None:
        notes.append(
            f"device lock keyed by the CUDA ordinal ({device_key(device)}): its GPU's UUID is unknown, "
            "so a session with another CUDA_VISIBLE_DEVICES may overlap on the same GPU"
        )
    try:
        if fcntl is None:
            raise OSError("advisory locks are not available on this platform")
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        if notes is not None:
            notes.append(f"measured without the device lock ({exc}): another session may have overlapped")
        yield
        return
    try:
        _acquire(fd, path, device, cancel, on_wait, timeout_s)
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n{holder_command()}\n".encode(errors="replace"), 0)
            yield
        finally:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)  # no stale pid for the next waiter to blame
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _acquire(
    fd: int,
    path: Path,
    device: str,
    cancel: threading.Event | None,
    on_wait: Callable[[str], None] | None,
    timeout_s: float | None,
) -> None:
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    told: str | None = None
    marker = path.with_name(f"{path.stem}.waiting.{os.getpid()}.{threading.get_ident()}")
    if _others_waiting(path, marker):
        # flock is not a queue: a session measuring back to back would re-take the lock within
        # microseconds of releasing it, and a waiter polling every 50 ms could wait for ever.
        # A newcomer lets the sessions already waiting go first.
        _pause(cancel, 2 * POLL_S)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                pass
            if not marker.exists():
                with contextlib.suppress(OSError):
                    marker.touch()
            told = _wait_once(path, device, cancel, on_wait, deadline, timeout_s, told)
    finally:
        with contextlib.suppress(OSError):
            marker.unlink()


def _wait_once(
    path: Path,
    device: str,
    cancel: threading.Event | None,
    on_wait: Callable[[str], None] | None,
    deadline: float | None,
    timeout_s: float | None,
    told: str | None,
) -> str:
    """One poll interval of waiting: cancel and the timeout honoured, the holder named once."""
    if cancel is not None and cancel.is_set():
        raise WaitCancelled(f"cancelled while waiting: {busy_message(device, *holder(path))}")
    if deadline is not None and time.monotonic() >= deadline:
        raise WaitCancelled(f"gave up after {timeout_s:g} s: {busy_message(device, *holder(path))}")
    message = busy_message(device, *holder(path))
    if message != told and on_wait is not None:
        on_wait(message)  # once per holder: a phase line, not a stream
    _pause(cancel, POLL_S)
    return message


def _pause(cancel: threading.Event | None, seconds: float) -> None:
    if cancel is not None:
        cancel.wait(seconds)
    else:
        time.sleep(seconds)


def _others_waiting(path: Path, own: Path) -> bool:
    """Whether another live session is waiting for this lock (stale markers are removed)."""
    found = False
    for marker in path.parent.glob(f"{path.stem}.waiting.*"):
        if marker == own:
            continue
        try:
            os.kill(int(marker.name.split(".")[-2]), 0)
            found = True
        except ProcessLookupError:
            with contextlib.suppress(OSError):
                marker.unlink()  # its process died while waiting
        except (ValueError, IndexError, PermissionError):
            found = True  # alive but not ours to signal, or a name we did not write: respect it
    return found


def load_library(backend: str, device: str) -> None:
    """Import the run's library before the lock is named (the run imports it anyway): the UUIDs
    come from it, and an engine that had not loaded it yet would key the GPU by its ordinal
    while another, which had, keys the same GPU by its UUID. Only for a CUDA device."""
    if not device_key(device).startswith("cuda:"):
        return
    from gpuplay.core.backends import get_backend

    with contextlib.suppress(Exception):
        get_backend(backend).module()


def measure_exclusively(
    spec: RunSpec,
    measure: Callable[[], RunResult],
    cancel: threading.Event | None = None,
    on_phase: Callable[[str, str], None] | None = None,
) -> RunResult:
    """`measure()` while holding the lock of `spec.device`; a cancelled wait is a cancelled result."""
    from gpuplay.core.result import RunResult

    notes: list[str] = []
    load_library(spec.backend, spec.device)
    started = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    on_wait = (lambda message: on_phase(message, "")) if on_phase is not None else None
    try:
        with device_lock(spec.device, cancel, on_wait, notes=notes):
            result = measure()
    except WaitCancelled as exc:
        finished = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
        return RunResult(spec=spec, status="cancelled", message=str(exc), started=started, finished=finished)
    result.notes.extend(notes)
    return result
