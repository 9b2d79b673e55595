"""The engine process's plumbing (core/engine/process.py): where its spawn keeps its state, its
socket's frames, and which commands start an engine early."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from multiprocessing.connection import Connection

import pytest

from gpuplay.core.engine.wire import FrameConnection


@pytest.mark.skipif(sys.platform != "linux", reason="the XDG rule is Linux's; elsewhere it is config's own")
@pytest.mark.parametrize(
    "xdg", [None, "", "   ", "/tmp/xdg-state", "/tmp/xdg-state/", "//tmp//x", "rel/state"]
)
@pytest.mark.parametrize("home", ["ABS", "", "rel/home"])
@pytest.mark.parametrize("ours", [None, "/tmp/gpuplay-state"])
def test_the_spawn_s_state_folder_is_config_s(monkeypatch, tmp_path, xdg, home, ours):
    from gpuplay.core.engine import process
    from gpuplay.core.storage import config

    monkeypatch.setenv("HOME", str(tmp_path) if home == "ABS" else home)
    for name, value in (("XDG_STATE_HOME", xdg), ("GPUPLAY_STATE_DIR", ours)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    assert process.state_dir() == config.state_dir()


# -- the engine's socket -----------------------------------------------------------------------
@pytest.mark.parametrize("size", [0, 1, 16384, 16385, 3 * 2**20 + 7])
def test_frames_are_multiprocessing_s_own_both_ways(size):
    a, b = socket.socketpair()
    ours, theirs = FrameConnection(os.dup(a.fileno())), Connection(os.dup(b.fileno()))
    a.close()
    b.close()
    payload = bytes(range(256)) * (size // 256) + bytes(size % 256)
    try:
        import threading

        got: list[bytes] = []
        reader = threading.Thread(target=lambda: got.append(theirs.recv_bytes()))
        reader.start()
        ours.send_bytes(payload)
        reader.join(10)
        assert got == [payload]
        writer = threading.Thread(target=theirs.send_bytes, args=(payload[::-1],))
        writer.start()
        assert ours.recv_bytes() == payload[::-1]
        writer.join(10)
    finally:
        ours.close()
        theirs.close()


def test_a_stream_that_ends_says_so_and_a_closed_end_raises():
    a, b = socket.socketpair()
    ours = FrameConnection(os.dup(a.fileno()))
    a.close()
    b.sendall((10).to_bytes(4, "big") + b"abc")  # a frame cut short
    b.close()
    with pytest.raises(EOFError, match="during message"):
        ours.recv_bytes()
    with pytest.raises(EOFError):
        ours.recv_bytes()  # at a frame's start: the plain end of the stream
    ours.close()
    ours.close()  # twice is harmless
    with pytest.raises(OSError, match="closed"):
        ours.send_bytes(b"x")


def test_compare_from_files_starts_no_engine(tmp_path):
    # `compare --from FILE…` merges result files: the entry must not start an engine for it
    # (an interpreter and its imports on a busy machine, then a kill at exit, for nothing).
    from gpuplay.core.engine.process import wanted_early

    assert not wanted_early(["/venv/bin/gpuplay", "compare", "--from", "a.json", "b.json"])
    assert not wanted_early(["/venv/bin/gpuplay", "compare", "a.json", "--from", "b.json"])
    assert wanted_early(["/venv/bin/gpuplay", "compare", "matmul", "svd"])
    assert wanted_early(["/venv/bin/gpuplay", "run", "matmul"])
    env = {k: v for k, v in os.environ.items() if k not in ("GPUPLAY_IN_PROCESS", "COLUMNS")}
    env.update(GPUPLAY_STATE_DIR=str(tmp_path / "state"), GPUPLAY_CONFIG_DIR=str(tmp_path / "config"),
               GPUPLAY_TRACE="1")  # fmt: skip
    files = []
    for name in ("a", "b"):
        files.append(tmp_path / f"{name}.json")
        run = subprocess.run([sys.executable, "-m", "gpuplay", "run", "matmul", "-s", "n=32", "--repeat", "3",
                              "--warmup", "1", "--format", "json", "--out", str(files[-1])],
                             capture_output=True, text=True, env={**env, "GPUPLAY_TRACE": ""}, stdin=subprocess.DEVNULL,
                             timeout=300)  # fmt: skip
        assert run.returncode == 0, run.stderr[-2000:]
    out = subprocess.run([sys.executable, "-m", "gpuplay", "compare", "--from", *map(str, files)],
                         capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert "matmul" in out.stdout
    assert "engine: spawn" not in out.stderr  # GPUPLAY_TRACE marks every engine spawn
