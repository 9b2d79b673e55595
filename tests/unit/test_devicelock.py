"""One measurement per device: a lock in the state folder, held around each measurement.

The two-process test runs real measurements in two Python processes asking for the same device
and checks that their measurement intervals never overlap.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from gpuplay.core.engine.devicelock import (
    WaitCancelled,
    device_key,
    device_lock,
    lock_path,
    measure_exclusively,
)
from gpuplay.core.result import RunResult
from gpuplay.core.spec import RunSpec

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="flock is POSIX")


def test_device_keys_and_lock_files(tmp_path):
    assert device_key("cuda") == "cuda:0" and device_key("CUDA:1") == "cuda:1" and device_key("cpu") == "cpu"
    assert lock_path("cuda", tmp_path) == tmp_path / "locks" / "cuda-0.lock"
    assert lock_path("cpu", tmp_path).name == "cpu.lock"
    assert lock_path("../../etc/x", tmp_path).parent == tmp_path / "locks"  # no escaping the folder


def _hold_in_child(tmp_path: Path, device: str) -> subprocess.Popen[str]:
    """Another process holding `device`'s lock until its stdin closes."""
    code = (
        "import sys; from pathlib import Path; from gpuplay.core.engine.devicelock import device_lock\n"
        f"with device_lock({device!r}, root=Path({str(tmp_path)!r})):\n"
        "    print('held', flush=True); sys.stdin.read()\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "held"
    return child


def test_a_second_process_waits_says_who_is_measuring_and_honours_cancel(tmp_path):
    child = _hold_in_child(tmp_path, "cuda:0")
    try:
        said: list[str] = []
        cancel = threading.Event()
        threading.Timer(0.4, cancel.set).start()
        t0 = time.monotonic()
        busy = f"cuda:0 busy: measuring in another session \\(pid {child.pid}: "
        with (
            pytest.raises(WaitCancelled, match=busy),
            device_lock("cuda", cancel, said.append, root=tmp_path),
        ):
            raise AssertionError("must not get the lock while another process holds it")
        assert 0.3 < time.monotonic() - t0 < 3.0  # waited, then stopped soon after cancel
        assert len(said) == 1 and said[0].startswith(
            f"cuda:0 busy: measuring in another session (pid {child.pid}: "
        )
        assert said[0].endswith("waiting for it to finish")  # said once, with the holder's command
        with (
            pytest.raises(WaitCancelled, match="gave up after 0.2 s"),
            device_lock("cuda:0", timeout_s=0.2, root=tmp_path),
        ):
            pass
        with device_lock("cpu", timeout_s=0.2, root=tmp_path):  # another device is free
            pass
    finally:
        child.communicate("")
    with device_lock("cuda:0", timeout_s=2.0, root=tmp_path):  # released when the holder ends
        assert lock_path("cuda:0", tmp_path).read_text().splitlines()[0] == str(os.getpid())


def test_a_cancelled_wait_is_a_cancelled_result_and_nothing_is_measured(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUPLAY_STATE_DIR", str(tmp_path))
    child = _hold_in_child(tmp_path, "cpu")
    try:
        phases: list[str] = []
        cancel = threading.Event()
        threading.Timer(0.3, cancel.set).start()
        spec = RunSpec.make("matmul", {"n": 8})

        def measure() -> RunResult:
            raise AssertionError("measured alongside another session")

        r = measure_exclusively(spec, measure, cancel, lambda name, _d: phases.append(name))
        assert r.status == "cancelled" and "cpu busy: measuring in another session" in r.message
        assert phases and phases[0].startswith("cpu busy")
    finally:
        child.communicate("")


def test_a_session_measuring_back_to_back_lets_a_waiting_one_in(tmp_path):
    """flock is no queue: without the waiters' markers, a holder that re-takes the lock at once
    would keep a 50 ms poller out for all its 30 measurements (~3 s)."""
    code = (
        "import sys, time; from pathlib import Path; from gpuplay.core.engine.devicelock import device_lock\n"
        f"root = Path({str(tmp_path)!r})\n"
        "with device_lock('cpu', root=root):\n"
        "    print('held', flush=True); time.sleep(0.3)\n"
        "for _ in range(30):\n"
        "    with device_lock('cpu', root=root):\n"
        "        time.sleep(0.1)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "held"
        t0 = time.monotonic()
        with device_lock("cpu", timeout_s=20, root=tmp_path):
            waited = time.monotonic() - t0
        assert waited < 1.5, f"waited {waited:.1f} s behind a session measuring back to back"
        assert child.poll() is None  # it was still measuring: we got in between, not after
    finally:
        child.kill()
        child.wait()
    assert not list((tmp_path / "locks").glob("*.waiting.*"))  # no marker left behind


def test_an_unwritable_state_folder_measures_unlocked_and_says_so(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("GPUPLAY_STATE_DIR", str(blocker))  # locks/ cannot be made under a file
    spec = RunSpec.make("matmul", {"n": 8})
    r = measure_exclusively(spec, lambda: RunResult(spec, samples=[0.1] * 3))
    assert r.status == "ok" and any("without the device lock" in n for n in r.notes)


class Conn:
    """The engine's end of the pipe, keeping what the engine sends as typed messages."""

    def __init__(self):
        self.sent = []

    def send_bytes(self, data):
        from gpuplay.core.engine.messages import decode

        self.sent.append(decode(data))


def test_the_engine_waits_for_the_device_and_reports_it_as_a_phase(tmp_path, monkeypatch):
    """The engine process's run loop takes the lock: its phase line names the other session."""
    from gpuplay.core.engine.messages import Finished, Phase, RunRequest
    from gpuplay.core.engine.server import EngineServer

    monkeypatch.setenv("GPUPLAY_STATE_DIR", str(tmp_path))
    conn = Conn()
    sent = conn.sent
    engine = EngineServer(conn)
    child = _hold_in_child(tmp_path, "cpu")
    spec = RunSpec.make("matmul", {"n": 16}, budget_s=0.01, warmup=0)
    worker = threading.Thread(target=engine.do, args=(RunRequest(7, spec, False),))
    try:
        worker.start()
        deadline = time.monotonic() + 10
        while not any(isinstance(m, Phase) for m in sent) and time.monotonic() < deadline:
            time.sleep(0.02)
        busy = [
            m
            for m in sent
            if isinstance(m, Phase)
            and m.name.startswith(f"cpu busy: measuring in another session (pid {child.pid}: ")
        ]
        assert busy
        assert not any(isinstance(m, Finished) for m in sent)  # still waiting, not measuring alongside
        engine.cancel.set()
        worker.join(10)
        result = next(m for m in sent if isinstance(m, Finished)).result
        assert result.status == "cancelled"
    finally:
        child.communicate("")
        worker.join(10)


def test_a_profile_waits_for_the_device_too(tmp_path, monkeypatch):
    from gpuplay.core.engine.messages import Phase, Profiled, ProfileRequest
    from gpuplay.core.engine.server import EngineServer

    monkeypatch.setenv("GPUPLAY_STATE_DIR", str(tmp_path))
    conn = Conn()
    sent = conn.sent
    engine = EngineServer(conn)
    child = _hold_in_child(tmp_path, "cpu")
    spec = RunSpec.make("matmul", {"n": 16})
    worker = threading.Thread(target=engine.do, args=(ProfileRequest(3, spec, 2),))
    try:
        worker.start()
        deadline = time.monotonic() + 10
        while not sent and time.monotonic() < deadline:
            time.sleep(0.02)
        assert isinstance(sent[0], Phase) and sent[0].run_id == 3
        assert sent[0].name.startswith(f"cpu busy: measuring in another session (pid {child.pid}: ")
        engine.cancel.set()
        worker.join(10)
        assert isinstance(sent[-1], Profiled) and sent[-1].data["status"] == "cancelled"
    finally:
        child.communicate("")
        worker.join(10)


TWO_PROCESS_SCRIPT = """
import json, pathlib, sys, time
import gpuplay.core.runner as runner
from gpuplay.core.engine.inprocess import InProcessEngine
from gpuplay.core.spec import RunSpec

real_run = runner.run
intervals = []

def timed_run(*a, **k):  # the measurement itself: when it started and ended, in wall-clock time
    t0 = time.time()
    try:
        return real_run(*a, **k)
    finally:
        intervals.append((t0, time.time()))

runner.run = timed_run
folder = pathlib.Path(sys.argv[1])
(folder / f"ready-{sys.argv[2]}").touch()
deadline = time.monotonic() + 60
while len(list(folder.glob("ready-*"))) < 2 and time.monotonic() < deadline:
    time.sleep(0.01)  # both processes ask for the device together
engine = InProcessEngine()
phases = []
spec = RunSpec.make("elementwise", {"n": 100000}, budget_s=0.3, warmup=1, check=False)
for _ in range(2):
    r = engine.run(spec, on_phase=lambda name, _d: phases.append(name))
    assert r.status == "ok", r.message
print(json.dumps({"intervals": intervals, "phases": phases}))
"""


def test_two_processes_asking_for_one_device_never_measure_at_once(tmp_path):
    env = {**os.environ, "GPUPLAY_STATE_DIR": str(tmp_path), "OMP_NUM_THREADS": "1"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", TWO_PROCESS_SCRIPT, str(tmp_path), str(i)],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i in range(2)
    ]
    outs = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    intervals = sorted(tuple(i) for out in outs for i in out["intervals"])
    assert len(intervals) == 4
    for (_, end), (start, _) in zip(intervals, intervals[1:]):
        assert start >= end, f"two measurements of cpu overlapped: {intervals}"
    # Both started together, so at least one of them waited and said why.
    assert any(
        ph.startswith("cpu busy: measuring in another session") for out in outs for ph in out["phases"]
    )


def test_the_holder_command_is_read_once_a_process(monkeypatch):
    """A sweep takes the lock at every point: the command line written in the lock file is read
    from /proc once a process (four reads, ~0.4 ms a point), and afresh in a forked child."""
    from gpuplay.core.engine import devicelock

    looks = []
    real = devicelock._command_and_pid

    def counted():
        looks.append(os.getpid())  # a look at /proc (or psutil's, where there is none)
        return real()

    monkeypatch.setattr(devicelock, "_command_and_pid", counted)
    monkeypatch.setattr(devicelock, "_holder_command", None)
    first = devicelock.holder_command()
    assert first and looks == [os.getpid()]
    assert devicelock.holder_command() == first and len(looks) == 1
    real_pid = os.getpid()
    monkeypatch.setattr(devicelock.os, "getpid", lambda: real_pid + 1)  # as a forked child sees it
    devicelock.holder_command()
    assert len(looks) == 2


GPU_A = "GPU-aaaaaaaa-0000-0000-0000-000000000000"


GPU_B = "GPU-bbbbbbbb-1111-1111-1111-111111111111"


# -- the device lock names the GPU, not the ordinal ---------------------------------------------
@pytest.mark.gpu_fake
def test_the_lock_is_the_gpus_whatever_cuda_visible_devices_says(monkeypatch, tmp_path):
    from gpuplay.core.engine import devicelock

    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"{GPU_A},{GPU_B}")
    path = devicelock.lock_path("cuda:1", tmp_path)  # board B in this session
    assert "bbbbbbbb" in path.name and path.name.startswith("cuda-")
    held, release = threading.Event(), threading.Event()

    def first_session():
        with devicelock.device_lock("cuda:1", root=tmp_path):
            held.set()
            release.wait(10)

    t = threading.Thread(target=first_session)
    t.start()
    try:
        assert held.wait(10)
        # Another session that sees only board B calls it cuda:0: the same lock, so it waits.
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", GPU_B)
        assert devicelock.lock_path("cuda:0", tmp_path) == path
        with (
            pytest.raises(devicelock.WaitCancelled),
            devicelock.device_lock("cuda:0", root=tmp_path, timeout_s=0.3),
        ):
            pass
        # ...and board A, cuda:0 of a third session, is free.
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", GPU_A)
        notes: list[str] = []
        with devicelock.device_lock("cuda:0", root=tmp_path, timeout_s=0.3, notes=notes):
            pass
        assert notes == []
    finally:
        release.set()
        t.join(10)


@pytest.mark.gpu_fake
def test_a_lock_without_a_known_uuid_says_it_is_keyed_by_the_ordinal(monkeypatch, tmp_path):
    from gpuplay.core.engine import devicelock

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,0")
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    notes: list[str] = []
    with devicelock.device_lock("cuda:0", root=tmp_path, notes=notes):
        pass
    assert devicelock.lock_path("cuda:0", tmp_path).name == "cuda-0.lock"
    assert any("keyed by the CUDA ordinal" in n for n in notes)


@pytest.mark.gpu_fake
def test_the_runs_library_is_loaded_before_the_lock_is_named(monkeypatch):
    import sys

    import torch

    from gpuplay.core.backends import get_backend
    from gpuplay.core.engine import devicelock
    from gpuplay.core.result import RunResult

    # An engine that has not imported torch yet: no library can tell the UUID until it does.
    monkeypatch.delitem(sys.modules, "torch")
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    loaded = []
    monkeypatch.setattr(get_backend("torch"), "module", lambda: loaded.append("torch") or torch)
    named = []
    real_path = devicelock.lock_path
    monkeypatch.setattr(
        devicelock, "lock_path", lambda d, r=None: named.append(list(loaded)) or real_path(d, r)
    )
    spec = RunSpec.make("matmul", {"n": 8}, backend="torch", device="cuda:0")
    devicelock.measure_exclusively(spec, lambda: RunResult(spec))
    assert named == [["torch"]]
