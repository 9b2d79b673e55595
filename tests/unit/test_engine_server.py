"""The engine server (core/engine/server.py): what it does before its first request (probes,
the runner's import, the primed first run) and what the measured code prints."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from types import SimpleNamespace

from gpuplay.core.engine import messages as m
from gpuplay.core.engine import server
from gpuplay.core.spec import RunSpec


def test_the_engine_does_before_its_first_request_what_every_first_run_paid_after_it():
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from gpuplay.core.engine.server import prime_first_run, warm_runner\n"
        "from gpuplay.core.measure import provenance\n"
        "warm_runner()\n"
        "prime_first_run()\n"
        "print(sorted(m for m in ('numpy.random', 'gpuplay.core.measure.energy', 'threadpoolctl', 'torch')"
        " if m in sys.modules), provenance.installed.cache_info().currsize)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    # read once per process, before the request: the versions, the random module, the energy
    # module, BLAS's thread count reader; never torch
    import importlib.util

    wanted = ["gpuplay.core.measure.energy", "numpy.random"]
    if importlib.util.find_spec("threadpoolctl") is not None:
        wanted.append("threadpoolctl")
    assert out.stdout.split("]")[0] == repr(wanted)[:-1] and out.stdout.split()[-1] == "1"


def test_the_engine_primes_its_first_run_after_a_probe_may_answer_and_before_any_request(monkeypatch):
    import threading
    from types import SimpleNamespace

    from gpuplay.core.engine import messages as m
    from gpuplay.core.engine import server

    order: list[str] = []
    engine = server.EngineServer(SimpleNamespace(send_bytes=lambda d: None, close=lambda: None))
    monkeypatch.setattr(server, "warm_runner", lambda: order.append("runner"))
    monkeypatch.setattr(
        server, "prime_first_run", lambda: order.append(f"primed, warmed={engine.warmed.is_set()}")
    )
    # The NumPy probe is another test's; here it would cache a probe thread that never starts
    # (Thread.start is a no-op below) in the process's numpy backend, for every later test to join.
    monkeypatch.setattr(server, "warm_numpy_probe", lambda: None)
    monkeypatch.setattr(threading.Thread, "start", lambda self: None)  # no reader: the queue is fed here
    monkeypatch.setattr(engine, "do", lambda job: order.append("request"))
    engine.jobs.put(m.RunRequest(1, RunSpec.make("matmul", {"n": 8}), live=False))
    engine.jobs.put(None)
    engine.serve()
    assert order == ["runner", "primed, warmed=True", "request"]


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


def test_what_the_measured_code_printed_is_in_the_engine_log_before_its_answer(tmp_path, monkeypatch):
    # A command's exit SIGKILLs its idle engine at once (client.close(wait=False)): whatever the
    # step printed must already be in the log by the time the answer arrives. The engine's stdout
    # is a file, block-buffered unless PYTHONUNBUFFERED is set (it is not, for a user).
    from gpuplay.core.engine.client import EngineClient
    from gpuplay.core.workloads.usercode import code_ref

    monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)
    monkeypatch.setenv("GPUPLAY_STATE_DIR", str(tmp_path / "state"))
    code = tmp_path / "chatty.py"
    code.write_text(
        textwrap.dedent(
            """
            def inputs(rng, n=16):
                return (rng.random(n),)

            def step(xp, x):
                print("a line the step printed")
                return x * 2
            """
        )
    )
    client = EngineClient(backends=("numpy",))
    try:
        r = client.run(RunSpec.make(code_ref(code), {}, warmup=1, repeat=3, check=False))
        assert r.status == "ok", r.message
        pid = client.pid
        assert pid is not None
        os.killpg(pid, signal.SIGKILL)  # the worst case of the exit's race: no polite shutdown at all
        client.kill()
    finally:
        client.close()
    log = (tmp_path / "state" / "engine.log").read_text()
    assert "a line the step printed" in log
