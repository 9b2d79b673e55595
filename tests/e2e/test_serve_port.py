"""`gpuplay serve` on a port another program holds: the error alone, never the tokened URL and the
`ssh -L` line first (they pointed at a server that never listened)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from tests.e2e.serve_helpers import SRC, start_server

pytest.importorskip("textual_serve")


def test_a_port_in_use_is_said_before_any_url_is_printed(tmp_path):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        env = {**os.environ, "PYTHONPATH": SRC, "GPUPLAY_STATE_DIR": str(tmp_path / "state")}
        env.pop("COLUMNS", None)
        proc = subprocess.run(
            [sys.executable, "-m", "gpuplay", "serve", "--port", str(port)],
            capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    said = proc.stdout + proc.stderr
    assert proc.returncode == 1, said
    assert f"cannot listen on 127.0.0.1:{port}" in said and "choose another --port" in said
    assert "http://" not in said and "token" not in said and "ssh -L" not in said
    assert "Traceback" not in said


def test_the_server_answers_on_the_socket_it_bound_before_printing(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = start_server(port, env={"GPUPLAY_STATE_DIR": str(tmp_path / "state")})
    try:  # start_server read the URL line and saw it answer (403 without the token)
        with socket.socket() as other, pytest.raises(OSError):
            other.bind(("127.0.0.1", port))  # the port is the server's
    finally:
        server.terminate()
        server.wait(timeout=20)
