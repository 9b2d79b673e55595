"""Start `gpuplay serve` as a real subprocess on a free loopback port, and find what it spawned."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import psutil

SRC = str(Path(__file__).resolve().parents[2] / "src")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(port: int, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    """`gpuplay serve --port PORT ARGS` up and answering; `.url` is the URL it printed (with its
    token) and `.token` the token, read from its first line."""
    full_env = {**os.environ, **(env or {})}
    full_env["PYTHONPATH"] = SRC + os.pathsep + full_env.get("PYTHONPATH", "")
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpuplay", "serve", "--port", str(port), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=full_env,
        text=True,
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()  # "gpuplay serve: http://127.0.0.1:PORT/?token=…"
    match = re.search(r"(http://\S+)", first)
    if match is None:
        proc.kill()
        raise AssertionError(f"gpuplay serve did not print its URL: {first}{proc.stdout.read()}")
    proc.url = match.group(1)  # type: ignore[attr-defined]
    proc.token = parse_qs(urlsplit(proc.url).query).get("token", [""])[0]  # type: ignore[attr-defined]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"gpuplay serve exited: {first}{proc.stdout.read()}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2):
                return proc
        except urllib.error.HTTPError:
            return proc  # it answers (403 without the token): it is up
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise AssertionError("gpuplay serve did not answer within 30 s")


def app_processes(server_pid: int) -> list[psutil.Process]:
    """gpuplay app processes the server started (each leads its own process group); not their
    engine processes, which are the apps' own children, nor the fresh plain loops an engine
    starts to time a step as a user's script would (core/runner/plainloop.py)."""
    try:
        kids = psutil.Process(server_pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    return [
        p for p in kids
        if "gpuplay" in (cmd := " ".join(_cmdline(p)))
        and not any(m in cmd for m in ("gpuplay.core.engine.server", "gpuplay.core.workloads.plainloop"))
    ]  # fmt: skip


def _cmdline(p: psutil.Process) -> list[str]:
    try:
        return p.cmdline()
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
        return []


def alive(pids: list[int]) -> list[int]:
    out = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
        except psutil.NoSuchProcess:
            pass
    return out


def wait_gone(pids: list[int], timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    while (left := alive(pids)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left
