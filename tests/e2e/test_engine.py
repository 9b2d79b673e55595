"""The measurement engine as a real process: results, cancel, kill and crash recovery."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from gpuplay.core.engine import EngineClient
from gpuplay.core.engine.client import death_cause
from gpuplay.core.spec import RunSpec

pytestmark = pytest.mark.slow


@pytest.fixture
def engine():
    client = EngineClient()
    assert client.wait_probe(120) is not None, "the engine never answered its probe"
    yield client
    client.close()
    assert not client.alive()


def _later(seconds: float, fn) -> threading.Timer:
    timer = threading.Timer(seconds, fn)
    timer.start()
    return timer


def test_measures_in_another_process_and_streams_samples(engine):
    phases, samples = [], []
    spec = RunSpec.make("matmul", {"n": 64}, backend="torch", budget_s=0.2)
    r = engine.run(spec, on_sample=lambda ph, dt: samples.append(ph), on_phase=lambda n, _d: phases.append(n))
    assert r.status == "ok", r.message
    assert r.spec == spec
    assert engine.pid != os.getpid()
    assert phases == ["estimate", "setup", "warmup", "timed", "check"]
    assert samples.count("timed") == len(r.samples) >= 5
    assert r.check_ok
    assert r.telemetry["duration_s"] > 0
    assert r.conditions["backend_version"].startswith("2.")


def test_probe_answer_is_plain_data(engine):
    data = engine.probe
    assert data["numpy"]["ok"] and data["torch"]["ok"]
    assert "CPU-only build" in data["torch"]["cuda_reason"]


def test_cancel_between_steps_keeps_the_engine(engine):
    pid = engine.pid
    cancel = threading.Event()
    _later(1.0, cancel.set)
    t0 = time.monotonic()
    r = engine.run(RunSpec.make("matmul", {"n": 128}, backend="torch", budget_s=30), cancel=cancel)
    assert r.status == "cancelled"
    assert time.monotonic() - t0 < 1.0 + 0.5
    assert r.samples, "a cancelled run keeps what it measured"
    assert engine.pid == pid, "a run that stopped within one step needs no new engine"


def test_cancel_mid_step_kills_and_replaces_the_engine(engine):
    pid = engine.pid
    cancel = threading.Event()
    # float64 SVD at 1800: one step takes ~1 s on 2 cores, well over the 0.3 s grace (1200 took
    # 0.3 s on an idle machine: the step then ended inside the grace and the test flickered).
    spec = RunSpec.make("svd", {"n": 1800}, backend="numpy", dtype="float64", budget_s=30, warmup=0)
    timer = _later(0.0, lambda: None)
    phases: list[str] = []

    def on_phase(name: str, _d: str) -> None:
        phases.append(name)
        if name == "timed":
            timer.cancel()
            _later(0.2, cancel.set)

    t0 = time.monotonic()
    r = engine.run(spec, cancel=cancel, on_phase=on_phase)
    assert r.status == "cancelled"
    assert "replaced" in r.message
    assert engine.pid != pid
    assert engine.restarts == 1
    assert time.monotonic() - t0 < 60
    again = engine.run(RunSpec.make("matmul", {"n": 64}, budget_s=0.1))
    assert again.status == "ok", again.message


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSEGV])
def test_an_engine_that_dies_becomes_a_failed_result_and_the_next_run_works(engine, sig):
    pid = engine.pid

    def on_phase(name: str, _d: str) -> None:
        if name == "timed":
            os.kill(pid, sig)

    r = engine.run(RunSpec.make("matmul", {"n": 128}, backend="torch", budget_s=30), on_phase=on_phase)
    assert r.status == "failed"
    assert r.failure == "engine-died"
    assert signal.Signals(sig).name in r.message
    assert "new engine" in " ".join(r.notes)
    again = engine.run(RunSpec.make("matmul", {"n": 64}, budget_s=0.1))
    assert again.status == "ok", again.message
    assert engine.pid != pid


def test_the_engine_does_not_outlive_its_front_end(tmp_path):
    import subprocess
    import sys

    import psutil

    script = (
        "from gpuplay.core.engine import EngineClient\n"
        "c = EngineClient(); c.wait_probe(120); print(c.pid, flush=True)\n"
        "import time; time.sleep(60)\n"
    )
    front = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "GPUPLAY_STATE_DIR": str(tmp_path)})  # fmt: skip
    engine_pid = int(front.stdout.readline())
    assert psutil.pid_exists(engine_pid)
    front.kill()  # SIGKILL: no atexit, no cleanup code runs in the front end
    front.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if psutil.Process(engine_pid).status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the engine outlived its front end")


def test_death_causes_in_words():
    assert "SIGKILL" in death_cause(-9) and "memory" in death_cause(-9)
    assert "segmentation fault" in death_cause(-11)
    assert "code 7" in death_cause(7)
    assert "code 3" in death_cause(3) and "CUDA" not in death_cause(3)  # os._exit(3) is not CUDA


# -- users' code that takes its process down: the engine's reason to exist -----------------
FAULTY = {
    "segfault": "import ctypes\n\ndef step(xp, x):\n    return ctypes.string_at(0)\n",
    "exit": "import os\n\ndef step(xp, x):\n    os._exit(7)\n",
    "hang_in_c": "import time\n\ndef step(xp, x):\n    time.sleep(3600)\n    return x\n",
    "hang_in_python": "def step(xp, x):\n    while True:\n        pass\n",
}
INPUTS = "\n\ndef inputs(rng):\n    return (rng.standard_normal(64),)\n"


def _code_spec(tmp_path, kind: str) -> RunSpec:
    from gpuplay.core.workloads.usercode import code_ref

    path = tmp_path / f"{kind}.py"
    path.write_text(FAULTY[kind] + INPUTS)
    return RunSpec.make(code_ref(path), {}, budget_s=0.2, warmup=1, max_step_s=3600)


@pytest.mark.parametrize(
    ("kind", "words"),
    [("segfault", "SIGSEGV"), ("exit", "exited with code 7")],
)
def test_users_code_that_kills_its_process_is_reported_and_the_next_run_works(engine, tmp_path, kind, words):
    r = engine.run(_code_spec(tmp_path, kind))
    assert r.status == "failed" and r.failure == "engine-died", r.message
    assert words in r.message
    if kind == "segfault":
        assert "Fatal Python error: Segmentation fault" in r.message  # faulthandler, from the engine log
    again = engine.run(RunSpec.make("matmul", {"n": 64}, budget_s=0.1))
    assert again.status == "ok", again.message


@pytest.mark.parametrize("kind", ["hang_in_python", "hang_in_c"])
def test_users_code_that_never_returns_is_cancelled_or_killed(engine, tmp_path, kind):
    cancel = threading.Event()

    def on_phase(name: str, _d: str) -> None:
        if name in ("estimate", "warmup"):
            _later(1.0, cancel.set)

    t0 = time.monotonic()
    r = engine.run(_code_spec(tmp_path, kind), cancel=cancel, on_phase=on_phase)
    assert r.status == "cancelled"
    assert time.monotonic() - t0 < 1.0 + 3.0
    if kind == "hang_in_c":
        assert "replaced" in r.message  # time.sleep ignores Python-level interrupts: killed
    again = engine.run(RunSpec.make("matmul", {"n": 64}, budget_s=0.1))
    assert again.status == "ok", again.message


def test_an_engine_of_another_protocol_version_is_stopped_not_misread(monkeypatch):
    """The handshake: the engine announces its protocol version; a front end that speaks another
    stops it and says why, rather than reading its messages as its own."""
    from gpuplay.core.engine import client as client_module

    monkeypatch.setattr(client_module, "PROTOCOL_VERSION", client_module.PROTOCOL_VERSION + 1)
    client = EngineClient()
    try:
        r = client.run(RunSpec.make("matmul", {"n": 16}, budget_s=0.05))
        assert r.status == "failed" and r.failure == "engine-died"
        assert "protocol version" in r.message and "restart gpuplay" in r.message
        assert not client.alive()
    finally:
        client.close()
