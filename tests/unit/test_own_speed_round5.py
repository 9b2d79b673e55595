"""Issue 34, round 5, row 1: the engine's path to a NumPy run's first request."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from types import SimpleNamespace

import pytest

from gpuplay.core.engine import messages as m
from gpuplay.core.engine import server


def _engine(monkeypatch, runner_gate: threading.Event, log: list[str]) -> tuple[server.EngineServer, list]:
    sent: list = []

    def send_bytes(data: bytes) -> None:
        msg = m.decode(data)
        sent.append(msg)
        if isinstance(msg, m.ProbeAnswer):
            log.append(f"answered {sorted(msg.data)}")

    def runner() -> None:
        log.append("runner importing")
        runner_gate.wait(5)
        log.append("runner imported")

    monkeypatch.setattr(server, "probe_data", lambda names: {n: {} for n in names})
    monkeypatch.setattr(server, "warm_runner", runner)
    monkeypatch.setattr(server, "prime_first_run", lambda: None)
    monkeypatch.setattr(server.EngineServer, "_read", lambda self: None)  # the test feeds `take`
    engine = server.EngineServer(SimpleNamespace(send_bytes=send_bytes, close=lambda: None))
    return engine, sent


def _wait(cond, timeout: float = 5.0) -> bool:
    import time

    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            return False
        time.sleep(0.005)
    return True


def test_a_numpy_probe_answers_while_the_engine_still_imports_its_runner(monkeypatch):
    gate, log = threading.Event(), []
    engine, _ = _engine(monkeypatch, gate, log)
    serving = threading.Thread(target=engine.serve, daemon=True)
    serving.start()
    try:
        engine.take(m.ProbeRequest(("numpy",)))
        assert _wait(lambda: "answered ['numpy']" in log, 3.0), log
        assert "runner imported" not in log  # answered while the runner's import was still going
    finally:
        gate.set()
        engine.jobs.put(None)
        serving.join(5)


def test_a_probe_for_another_backend_still_waits_for_the_whole_runner(monkeypatch):
    gate, log = threading.Event(), []
    engine, _ = _engine(monkeypatch, gate, log)
    serving = threading.Thread(target=engine.serve, daemon=True)
    serving.start()
    try:
        assert _wait(lambda: "runner importing" in log)
        engine.take(m.ProbeRequest(("numpy", "torch")))
        assert not _wait(lambda: any(e.startswith("answered") for e in log), 0.3)
        gate.set()
        assert _wait(lambda: "answered ['numpy', 'torch']" in log)
        assert log.index("runner imported") < log.index("answered ['numpy', 'torch']")
    finally:
        gate.set()
        engine.jobs.put(None)
        serving.join(5)


def test_a_numpy_probe_waits_for_the_runner_where_probing_numpy_first_failed(monkeypatch):
    # Its own probe would then import what the main thread is still importing.
    gate, log = threading.Event(), []
    engine, _ = _engine(monkeypatch, gate, log)

    def broken() -> None:
        log.append("numpy probe failed")
        raise ImportError("a broken NumPy")

    monkeypatch.setattr(server, "warm_numpy_probe", broken)
    serving = threading.Thread(target=engine.serve, daemon=True)
    serving.start()
    try:
        assert _wait(lambda: "runner importing" in log)
        engine.take(m.ProbeRequest(("numpy",)))
        assert not _wait(lambda: any(e.startswith("answered") for e in log), 0.3)
        gate.set()
        assert _wait(lambda: "answered ['numpy']" in log)
        assert log.index("runner imported") < log.index("answered ['numpy']")
    finally:
        gate.set()
        engine.jobs.put(None)
        serving.join(5)


def test_the_numpy_probe_s_answer_imports_nothing_after_the_main_thread_probed_numpy():
    # The probe thread answers while the main thread imports the runner: if the answer imported
    # a module, two threads could import the same module at once (a partly initialised module).
    code = (
        "import sys, threading\n"
        "from types import SimpleNamespace\n"
        "from gpuplay.core.engine import server\n"
        "server.warm_numpy_probe()\n"
        "before = set(sys.modules)\n"
        "sent = []\n"
        "engine = server.EngineServer(SimpleNamespace(send_bytes=sent.append))\n"
        "engine._probe(('numpy',))\n"
        "assert len(sent) == 1, sent\n"
        "print(sorted(set(sys.modules) - before))\n"
        "print('torch' in sys.modules, 'gpuplay.core.runner' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[:2] == ["[]", "False False"]


def test_the_entry_spawns_the_engine_without_importing_config(tmp_path):
    # The early engine's spawn needs the engine log's folder; core.config (tomllib, dataclasses,
    # platformdirs) is imported by the front end after the spawn, not before it.
    code = (
        "import sys\n"
        "from gpuplay.core.engine import process\n"
        "path = process.engine_log_path()\n"
        "print(path.parent.is_dir(), path.name)\n"
        "print([m for m in ('gpuplay.core.storage.config', 'tomllib', 'platformdirs') if m in sys.modules])\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("GPUPLAY_STATE_DIR", "XDG_STATE_HOME")}
    env["HOME"] = str(tmp_path)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[:2] == ["True engine.log", "[]"]
    assert (tmp_path / ".local" / "state" / "gpuplay").is_dir()


def test_the_entry_imports_neither_config_nor_typing_before_it_spawns_the_engine(tmp_path):
    # What `gpuplay run ...` imports before the early spawn is the engine's head start lost.
    code = (
        "import sys\n"
        "sys.argv = ['/venv/bin/gpuplay', 'run', 'matmul', '-p', 'quick']\n"
        "from gpuplay.core.engine import process\n"
        "seen = []\n"
        "def spawn(env=None):\n"
        "    seen.append('spawn')\n"
        "    seen.extend(m for m in ('gpuplay.core.storage.config', 'typing', 'click', 'numpy') if m in sys.modules)\n"
        "    raise OSError('not here')\n"
        "process.spawn = spawn\n"
        "import gpuplay.cli\n"
        "print(process._early is None, seen)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("GPUPLAY_STATE_DIR", "XDG_STATE_HOME")}
    env["HOME"] = str(tmp_path)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[0] == "True ['spawn']"


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


def test_a_numpy_run_s_engine_imports_no_other_vendor_s_glue():
    # Telemetry's AMD, Intel and Apple glue (core/hw/devices) is imported where such a device asks.
    code = (
        "import sys\n"
        "from gpuplay.core.engine import server\n"
        "server.warm_numpy_probe(); server.warm_runner(); server.prime_first_run()\n"
        "window = server._run_telemetry().begin('cpu')\n"
        "print(window.vendor is None, [m for m in ('gpuplay.core.hw.devices', 'gpuplay.core.hw.amd',"
        " 'gpuplay.core.hw.intel', 'gpuplay.core.hw.apple') if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[0] == "True []"


@pytest.mark.parametrize("device", ["cuda:0", "xpu:0", "mps"])
def test_an_accelerator_s_run_window_still_asks_its_vendor(monkeypatch, device):
    from gpuplay.core.hw import devices
    from gpuplay.core.measure import telemetry

    asked: list[str] = []
    vendor = SimpleNamespace(note="the vendor's note")
    monkeypatch.setattr(devices, "run_window", lambda d: asked.append(d) or vendor)
    window = telemetry.RunTelemetry().begin(device)
    assert asked == [device] and window.vendor is vendor and window.gpu_note == "the vendor's note"
