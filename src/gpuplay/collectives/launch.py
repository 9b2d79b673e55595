"""Launch local ranks of `python -m gpuplay.collectives` and watch them until they end.

The transport is torch.distributed's own (a TCPStore rendezvous and the gloo or NCCL process
group). All ranks are on this machine, so nothing listens beyond loopback: torch's TCPStore binds
every interface whatever MASTER_ADDR says, so the launcher binds the store's socket to 127.0.0.1
itself and hands it to rank 0 (STORE_FD_ENV), and gloo and NCCL are told to use the loopback
interface. This module only starts processes, reads their progress lines, enforces the
timeout and, whatever happens, leaves no process behind. A failure is reported with the rank that
caused it: a rank that died (exit code or signal), one that never joined, or a port already taken.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuplay.collectives.bench import EVENT_PREFIX, EVENTS_ENV, STORE_FD_ENV

HOST = "127.0.0.1"
GRACE_S = 10.0  # beyond --timeout, for a rank's own timeout error to arrive before the launcher's
# Starting Python and importing torch is not part of the timeout (several ranks importing torch at
# once on a small machine take tens of seconds); it has its own limit.
STARTUP_S = 120.0


class LaunchError(Exception):
    """The run could not start or did not finish; the message names the rank and the cause."""


@dataclass
class _Rank:
    rank: int
    proc: subprocess.Popen[bytes]
    tail: collections.deque[str] = field(default_factory=lambda: collections.deque(maxlen=20))
    events: list[dict[str, Any]] = field(default_factory=list)
    last_seen: float = field(default_factory=time.monotonic)
    joining_at: float | None = None  # when it reported it was about to join the process group
    reader: threading.Thread | None = None

    def has(self, event: str) -> bool:
        return any(e.get("event") == event for e in self.events)

    def error(self) -> dict[str, Any] | None:
        return next((e for e in self.events if e.get("event") == "error"), None)

    def where(self) -> str:
        """Where the rank was: during the (op, size) it started last, or the phase before any."""
        seen = [e for e in self.events if e.get("event") in ("case", "progress", "ready")]
        if seen:
            last = seen[-1]
            return f"{'during' if last['event'] == 'case' else 'after'} {last['where']}"
        if self.has("joined"):
            return "before its first collective"
        return "while joining" if self.has("joining") else "before joining"


def port_user(port: int, host: str = HOST) -> str:
    """'' if `port` can be bound on `host`, else who holds it, as far as psutil may tell."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
            return ""
        except OSError as exc:
            why = exc.strerror or str(exc)
    try:
        import psutil

        for c in psutil.net_connections("tcp"):
            if c.laddr and c.laddr.port == port and c.status == psutil.CONN_LISTEN and c.pid:
                return f"{why}: held by pid {c.pid} ({psutil.Process(c.pid).name()})"
    except Exception:
        pass
    return why


def loopback_interface() -> str:
    """The name of the interface that carries 127.0.0.1 ('lo' on Linux, 'lo0' on macOS)."""
    try:
        import psutil

        for name, addrs in psutil.net_if_addrs().items():
            if any(a.family == socket.AF_INET and a.address == HOST for a in addrs):
                return name
    except Exception:
        pass
    return "lo" if sys.platform.startswith("linux") else "lo0"


def listen_loopback(port: int | None) -> socket.socket:
    """The store's listening socket, on 127.0.0.1 only (port None: one the OS picks)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((HOST, port or 0))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


def _exit_text(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def _die_with_parent() -> None:
    """In the child, before exec: get SIGKILL if the launcher dies (Linux), so no rank is orphaned."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def launch(
    nproc: int,
    rank_args: Sequence[str],
    *,
    timeout_s: float,
    port: int | None = None,
    env: dict[str, str] | None = None,
    on_event: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Run `nproc` local ranks to the end; return rank 0's results document or raise LaunchError."""
    if nproc < 1:
        raise LaunchError(f"--nproc must be ≥ 1; got {nproc}")
    try:
        store_sock = listen_loopback(port)
    except OSError:
        held = port_user(port or 0) or "cannot listen"
        raise LaunchError(
            f"port {port} on {HOST} is in use ({held}); leave out --port to pick a free one"
        ) from None
    port = int(store_sock.getsockname()[1])
    with store_sock, tempfile.TemporaryDirectory(prefix="gpuplay-collectives-") as tmp:
        results = Path(tmp) / "results.json"
        cmd = [sys.executable, "-m", "gpuplay.collectives", *rank_args, "--results-json", str(results)]
        base = {**os.environ, **(env or {})}
        lo = loopback_interface()
        base.update(
            {
                "WORLD_SIZE": str(nproc),
                "LOCAL_WORLD_SIZE": str(nproc),
                "MASTER_ADDR": HOST,
                "MASTER_PORT": str(port),
                # every rank is here: the process group's own sockets stay on loopback too
                "GLOO_SOCKET_IFNAME": lo,
                "NCCL_SOCKET_IFNAME": lo,
                EVENTS_ENV: "1",
                "PYTHONUNBUFFERED": "1",
            }
        )
        base.pop(STORE_FD_ENV, None)
        ranks: list[_Rank] = []
        try:
            for r in range(nproc):
                rank_env = {**base, "RANK": str(r), "LOCAL_RANK": str(r)}
                if r == 0:  # rank 0 hosts the store, on the socket bound here
                    rank_env[STORE_FD_ENV] = str(store_sock.fileno())
                proc = subprocess.Popen(
                    cmd,
                    env=rank_env,
                    pass_fds=(store_sock.fileno(),) if r == 0 else (),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
                )
                ranks.append(_Rank(r, proc))
            # Rank 0 holds the store's socket now; with ours closed, a store that dies refuses
            # connections instead of leaving them queued on a socket nobody accepts from.
            store_sock.close()
            # Readers start once every rank is forked, so none of our threads runs across a fork
            # (preexec_fn runs between fork and exec).
            for rk in ranks:
                rk.reader = threading.Thread(
                    target=_read, args=(rk, on_event), name=f"gpuplay-rank{rk.rank}-reader", daemon=True
                )
                rk.reader.start()
            _watch(ranks, timeout_s, port)
        finally:
            _stop_all(ranks)
        try:
            return dict(json.loads(results.read_text(encoding="utf-8")))
        except (OSError, ValueError) as exc:
            raise LaunchError(f"rank 0 finished but wrote no results ({exc})") from None


def _read(rk: _Rank, on_event: Callable[[dict[str, Any]], None] | None) -> None:
    assert rk.proc.stderr is not None
    for raw in rk.proc.stderr:
        line = raw.decode("utf-8", "replace").rstrip()
        rk.last_seen = time.monotonic()
        if line.startswith(EVENT_PREFIX):
            try:
                ev = json.loads(line[len(EVENT_PREFIX) :])
            except ValueError:
                continue
            rk.events.append(ev)
            if ev.get("event") == "joining":
                rk.joining_at = time.monotonic()
            if on_event is not None:
                on_event(ev)
        elif line.strip():
            rk.tail.append(line)


def _watch(ranks: list[_Rank], timeout_s: float, port: int) -> None:
    """Return when every rank exited 0; raise LaunchError naming the culprit otherwise."""
    start = time.monotonic()
    while True:
        time.sleep(0.05)
        codes = [rk.proc.poll() for rk in ranks]
        if all(c == 0 for c in codes):
            return
        failed = [rk for rk, c in zip(ranks, codes) if c not in (None, 0)]
        now = time.monotonic()
        if failed:
            time.sleep(0.3)  # let the other ranks' reports of the same failure arrive, then pick the cause
            for rk in ranks:
                if rk.reader is not None:
                    rk.reader.join(timeout=1.0)
            raise LaunchError(_failure_text(ranks, timeout_s, port))
        # The join timeout runs from the moment the first rank is ready to join.
        first = min((rk.joining_at for rk in ranks if rk.joining_at is not None), default=None)
        not_joining = [rk for rk in ranks if rk.joining_at is None]
        if not_joining and (
            (first is not None and now - first > timeout_s) or (first is None and now - start > STARTUP_S)
        ):
            raise LaunchError(_never_joined_text(ranks, not_joining, timeout_s if first else STARTUP_S))
        stalled = [rk for rk in ranks if rk.proc.poll() is None and now - rk.last_seen > timeout_s + GRACE_S]
        if stalled and first is not None and not not_joining:
            names = ", ".join(f"rank {rk.rank} ({rk.where() or 'no progress'})" for rk in stalled)
            raise LaunchError(
                f"no progress for {timeout_s + GRACE_S:g} s from {names}: stopped all ranks (a rank is stuck; "
                "raise --timeout if one collective legitimately takes longer)"
            )


def _never_joined_text(ranks: list[_Rank], missing: list[_Rank], timeout_s: float) -> str:
    who = ("rank " if len(missing) == 1 else "ranks ") + ", ".join(str(rk.rank) for rk in missing)
    joined = [str(rk.rank) for rk in ranks if rk.has("joining")]
    waiting = (
        f"{'rank' if len(joined) == 1 else 'ranks'} {', '.join(joined)} waited"
        if joined
        else "no rank started"
    )
    return f"{who} never joined the process group within {timeout_s:g} s ({waiting}); stopped all ranks"


def _failure_text(ranks: list[_Rank], timeout_s: float, port: int) -> str:
    failed = [rk for rk in ranks if rk.proc.poll() not in (None, 0)]
    primary = [rk for rk in failed if not (rk.error() or {}).get("secondary")]
    culprit = primary[0] if primary else failed[0]
    err = culprit.error()
    missing = [rk for rk in ranks if not rk.has("joining")]
    if err and err.get("kind") == "join-timeout" and missing:
        return _never_joined_text(ranks, missing, timeout_s)
    if err and err.get("kind") == "op-timeout":
        stuck = _behind(ranks, culprit)
        if stuck:
            return (
                f"{stuck} never reached {culprit.where().removeprefix('during ')}: rank {culprit.rank} waited "
                f"{timeout_s:g} s for it there; stopped all ranks"
            )
    code = culprit.proc.returncode
    if err:
        cause = err.get("message", "")
    elif code == 17:
        cause = "the injected failure (GPUPLAY_COLLECTIVES_INJECT)"
    else:
        cause = culprit.tail[-1] if culprit.tail else "no message"
    where = culprit.where()
    others = [rk for rk in failed if rk is not culprit]
    tail = ""
    if others:
        tail = "; then " + "; ".join(
            f"rank {rk.rank}: {(rk.error() or {}).get('message') or _exit_text(rk.proc.returncode or 0)}"
            for rk in others
        )
    return (
        f"rank {culprit.rank} {_exit_text(code or 0)}{' ' + where if where else ''}: {cause}{tail}; "
        "stopped all ranks"
    )


def _behind(ranks: list[_Rank], waiting: _Rank) -> str:
    """The live ranks that never started the collective `waiting` timed out in, as words ('' if none)."""
    case = [e for e in waiting.events if e.get("event") == "case"]
    if not case:
        return ""
    where = case[-1]["where"]
    late = [
        rk for rk in ranks
        if rk is not waiting and not any(e.get("event") == "case" and e.get("where") == where for e in rk.events)
    ]  # fmt: skip
    if not late:
        return ""
    return ("rank " if len(late) == 1 else "ranks ") + ", ".join(
        f"{rk.rank} ({rk.where() or 'no progress'})" for rk in late
    )


def _stop_all(ranks: list[_Rank]) -> None:
    """SIGTERM, a short wait, then SIGKILL; every rank is reaped before this returns."""
    alive = [rk for rk in ranks if rk.proc.poll() is None]
    for rk in alive:
        try:
            rk.proc.terminate()
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 3.0
    for rk in alive:
        try:
            rk.proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            rk.proc.kill()
            rk.proc.wait()
    for rk in ranks:
        if rk.reader is not None:
            rk.reader.join(timeout=2.0)  # the rank is gone: its stderr reaches EOF
        if rk.proc.stderr is not None and (rk.reader is None or not rk.reader.is_alive()):
            rk.proc.stderr.close()
