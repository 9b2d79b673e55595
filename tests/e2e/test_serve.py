"""`gpuplay serve`: loopback by default, and no gpuplay process outlives the server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest
from click.testing import CliRunner

from gpuplay.cli import main
from gpuplay.cli.serve import app_command, is_loopback, stop_process_groups
from tests.e2e.serve_helpers import alive, app_processes, free_port, start_server, wait_gone


def test_non_loopback_host_needs_public_flag():
    result = CliRunner().invoke(main, ["serve", "--host", "0.0.0.0"])
    assert result.exit_code == 2
    assert "not a loopback address" in result.output and "--public" in result.output


def test_loopback_detection_and_command():
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.0.0.5") and not is_loopback("gpu-box")
    cmd = app_command(("my scenarios",), "numpy-to-gpu", "projector")
    assert cmd.startswith("exec ") and "'my scenarios'" in cmd
    assert cmd.endswith("demo numpy-to-gpu --theme projector")


def test_stop_process_groups_reaches_the_whole_tree():
    # A leader that ignores SIGTERM, a child in its group, and a grandchild in a session of its own.
    code = (
        "import os, signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "subprocess.Popen(['sleep', '60'])\n"
        "subprocess.Popen([sys.executable, '-c', 'import os, time; os.setsid(); time.sleep(60)'])\n"
        "print('ready', flush=True); time.sleep(60)\n"
    )
    leader = subprocess.Popen(
        [sys.executable, "-c", code], start_new_session=True, stdout=subprocess.PIPE, text=True
    )
    assert leader.stdout is not None and leader.stdout.readline().strip() == "ready"
    tree = [leader.pid, *(c.pid for c in psutil.Process(leader.pid).children(recursive=True))]
    assert len(tree) == 3
    t0 = time.monotonic()
    stop_process_groups([leader.pid], grace_s=0.5)
    leader.wait(timeout=5)
    assert not wait_gone(tree, 5)
    assert time.monotonic() - t0 < 5


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_app_processes_stop_with_the_server(sig):
    """Two browser sessions start two gpuplay apps; stopping the server leaves none running."""
    port = free_port()
    server = start_server(port)
    sessions: list[subprocess.Popen] = []
    try:
        # Keep two websocket sessions open in helper processes (as two browser tabs would).
        client = (
            "import asyncio, aiohttp, sys\n"
            "async def main():\n"
            "    async with aiohttp.ClientSession() as s, s.ws_connect(sys.argv[1]) as ws:\n"
            "        async for _ in ws:\n"
            "            print('frame', flush=True)\n"
            "            async for _ in ws: pass\n"
            "asyncio.run(main())\n"
        )
        url = f"http://127.0.0.1:{port}/ws?width=100&height=30"
        sessions = [
            subprocess.Popen([sys.executable, "-c", client, url], stdout=subprocess.PIPE, text=True)
            for _ in range(2)
        ]
        for s in sessions:  # each app has drawn its first frame
            assert s.stdout is not None and s.stdout.readline().strip() == "frame"
        time.sleep(4)  # torch imported, a measurement running: the case a bare textual-serve orphans
        apps = app_processes(server.pid)
        assert len(apps) == 2, "two sessions should have started two gpuplay apps"
        for p in apps:
            assert os.getpgid(p.pid) == p.pid  # each leads its own process group
        pids = [p.pid for p in apps]
        children = [c for p in apps for c in p.children(recursive=True)]
        assert any("gpuplay.core.engine.server" in " ".join(c.cmdline()) for c in children)
        pids += [c.pid for c in children]  # the apps' engine processes must go too
        t0 = time.monotonic()
        server.send_signal(sig)
        server.wait(timeout=20)
        assert time.monotonic() - t0 < 10, "the server took more than 10 s to stop"
        assert not wait_gone(pids, 15), f"gpuplay processes left running after {sig.name}: {alive(pids)}"
    finally:
        for s in sessions:
            s.kill()
        if server.poll() is None:
            server.kill()
