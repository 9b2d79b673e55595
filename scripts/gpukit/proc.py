"""Child processes with a deadline, and the environment every child gets on the box."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent
SITE = Path("/tmp/gpukit-site")  # the fallback install (--target) when the box's Python refuses one
# The rehearsal sets a list here: every child's outcome is appended, for rehearse.audit to read.
LOG: list[dict[str, Any]] | None = None


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """gpuplay from the checkout (src/), the fallback site, unbuffered output, a fixed width."""
    env = dict(os.environ)
    paths = [str(ROOT / "src")]
    if SITE.is_dir():
        paths.append(str(SITE))
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("COLUMNS", None)
    env.update(extra or {})
    return env


# What a caller's pytest hands its children and the kit's own pytest must not take: options for
# every pytest run (a CI's `--cov` made each chunk erase the caller's coverage data files in the
# checkout as it started: `gpuplay serve`'s server processes read 0 % in the suite that ran the
# kit's tests) and pytest-cov's per-run settings.
CALLER_PYTEST = ("PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_CURRENT_TEST")


def pytest_env() -> dict[str, str]:
    """child_env() for the kit's pytest chunks: the kit's own options, none of the caller's."""
    env = child_env()
    for name in [*CALLER_PYTEST, *(k for k in env if k.startswith("COV_CORE_"))]:
        env.pop(name, None)
    return env


def tail(text: str, limit: int = 4000) -> str:
    return text if len(text) <= limit else "…" + text[-limit:]


def run(
    argv: list[str],
    timeout: float,
    env: dict[str, str] | None = None,
    cwd: Path = ROOT,
    grace: float = 15.0,
    keep: int = 4000,
    first_signal: int = signal.SIGTERM,
) -> dict[str, Any]:
    """Run `argv`; past `timeout` seconds send `first_signal` to its group (SIGTERM: gpuplay prints
    the finished rows; SIGINT: pytest writes its JUnit XML), then SIGKILL after `grace`.
    Never raises for the child's failure: the dict says what happened."""
    t0 = time.monotonic()
    out: dict[str, Any] = {"argv": argv, "timeout_s": round(timeout, 1)}
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env or child_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            start_new_session=True,  # its group can be ended whole, and no other
        )
    except OSError as exc:
        return _logged({**out, "rc": None, "error": f"{type(exc).__name__}: {exc}", "seconds": 0.0})
    timed_out = False
    try:
        stdout, stderr = proc.communicate(timeout=max(timeout, 1.0))
    except subprocess.TimeoutExpired:
        timed_out = True
        _signal(proc, first_signal)
        try:
            stdout, stderr = proc.communicate(timeout=grace)
        except subprocess.TimeoutExpired:
            _signal(proc, signal.SIGKILL)
            stdout, stderr = proc.communicate()
    out.update(
        rc=proc.returncode,
        timed_out=timed_out,
        seconds=round(time.monotonic() - t0, 2),
        stdout=stdout if keep <= 0 else tail(stdout, keep),
        stderr=tail(stderr, 3000),
    )
    return _logged(out)


def _logged(result: dict[str, Any]) -> dict[str, Any]:
    if LOG is not None:
        LOG.append(result)
    return result


def _signal(proc: subprocess.Popen[str], sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def python(code_or_module: list[str], timeout: float, **kw: Any) -> dict[str, Any]:
    return run([sys.executable, *code_or_module], timeout, **kw)


def gpuplay(args: list[str], timeout: float, **kw: Any) -> dict[str, Any]:
    return python(["-m", "gpuplay", *args], timeout, **kw)


class Deadline:
    """A stage's time box: each step gets what is left, less a reserve for writing the report."""

    def __init__(self, seconds: float, reserve: float = 20.0) -> None:
        self.end = time.monotonic() + seconds
        self.reserve = reserve

    def left(self) -> float:
        return max(0.0, self.end - time.monotonic() - self.reserve)

    def give(self, wanted: float) -> float:
        return min(wanted, self.left())

    def enough(self, seconds: float = 5.0) -> bool:
        return self.left() >= seconds
