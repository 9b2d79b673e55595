"""Review of issue 34's speed work (the early engine, the SIGKILL at exit, the reference from the
set-up's inputs, the noise check's own /proc reader): what it must not have broken."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import types

import numpy as np
import pytest

from gpuplay.core.spec import RunSpec


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


def test_a_reference_made_from_inputs_that_are_views_of_one_another(monkeypatch):
    # The set-up's inputs are shown to the reference read-only; an input that is a view of another
    # (a transpose beside its matrix) must come back writeable, and the set-up must not fail.
    from gpuplay.core.catalogue import planner
    from gpuplay.core.runner import clear_caches, run

    clear_caches()
    # The very workload object the run's planner finds, patched on the object: whatever an earlier
    # test left in the registry, the run generates its inputs through this method.
    workload = planner.get_workload("matmul")
    kept: list[np.ndarray] = []

    def transposed(self, p, rng):
        b = rng.standard_normal((p["n"], p["n"]))
        kept.append(b)
        return b.T, b  # the view first: its base is made read-only after it

    monkeypatch.setattr(workload, "inputs", types.MethodType(transposed, workload))
    try:
        r = run(RunSpec.make("matmul", {"n": 32}, budget_s=0.02, warmup=1, dtype="float64"))
    finally:
        # The reference of these patched inputs sits in the cache under matmul n=32's own key:
        # a later test's matmul n=32 would be checked against it.
        clear_caches()
    assert r.status == "ok", r.message
    assert r.check_ok and r.error is not None and r.error < r.tolerance
    assert kept and all(b.flags.writeable for b in kept)  # NumPy float64: the run's own inputs


def _stopped_child(tmp_path, name: str) -> subprocess.Popen[bytes]:
    """A child that burns user and system CPU, names itself `name` (its /proc comm), then stops
    itself: its figures are then fixed, so two readers must agree exactly."""
    ready = tmp_path / "ready"
    script = textwrap.dedent(
        f"""
        import os, signal, time
        with open("/proc/self/comm", "w") as f:
            f.write({name!r})
        t = time.process_time()
        while time.process_time() - t < 0.3:
            os.stat("/")  # system time as well as user time
        open({str(ready)!r}, "w").close()
        os.kill(os.getpid(), signal.SIGSTOP)
        """
    )
    child = subprocess.Popen([sys.executable, "-c", script])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with open(f"/proc/{child.pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
        if ready.exists() and state == b"T":
            return child
        time.sleep(0.01)
    child.kill()
    pytest.fail("the child never stopped")


def test_the_noise_check_reads_a_process_whose_name_has_parentheses_as_psutil_does(tmp_path):
    # /proc/PID/stat's second field is the command name in parentheses, which may itself hold
    # spaces and parentheses: the fields after it are found from the last ")".
    import psutil

    from gpuplay.core.measure import noise

    if not noise._PROC_STAT:
        pytest.skip("no /proc here: psutil's listing is used")
    child = _stopped_child(tmp_path, "a) b (c")
    try:
        assert psutil.Process(child.pid).name() == "a) b (c"
        ours = noise.process_cpu_seconds(os.getpid())
        ct = psutil.Process(child.pid).cpu_times()
        key = (child.pid, psutil.Process(child.pid).create_time())
        assert key in ours  # the same key psutil gives: a window's two ends pair up
        assert ours[key] == pytest.approx(ct.user + ct.system, abs=1e-9)  # stopped: the same ticks
        assert ct.user > 0 and ct.system > 0 and ours[key] >= 0.2
        # Every process seen by both: psutil read after us, and CPU time only grows.
        listing = psutil.process_iter(["cpu_times", "create_time"])
        theirs = {(p.pid, p.info["create_time"]): p.info["cpu_times"] for p in listing}
        both = set(ours) & set(theirs)
        assert key in both
        assert all(ours[k] <= theirs[k].user + theirs[k].system + 1e-9 for k in both)
    finally:
        child.kill()
        child.wait()


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


def test_packed_step_timings_come_back_bit_for_bit_whatever_they_are():
    # NaN (a payload included), infinities, a negative zero, the extremes and an empty warm-up:
    # the front end reads back the very float64s the engine measured.
    import struct

    from gpuplay.core.engine import messages as m
    from gpuplay.core.result import RunResult

    odd_nan = struct.unpack("<d", struct.pack("<Q", 0x7FF8_0000_0000_BEEF))[0]
    samples = [float("nan"), odd_nan, float("inf"), -float("inf"), -0.0, 1.7976931348623157e308, 5e-324, 1e-9]
    r = RunResult(spec=RunSpec.make("matmul", {"n": 64}), samples=samples, warmup=[])
    back = m.decode(m.encode(m.Finished(1, r)))
    assert isinstance(back, m.Finished)
    assert [struct.pack("<d", x) for x in back.result.samples] == [struct.pack("<d", x) for x in samples]
    assert back.result.warmup == []
    for bad in (
        '{"f64": "AAAA"}',
        '{"f64": "\\u00e9"}',
        "[1.0]",
        '{"f64": 1}',
    ):  # cut short, not base64, not packed
        wire = m.encode(m.Finished(2, r)).replace(b'"warmup_s": {"f64": ""}', b'"warmup_s": ' + bad.encode())
        assert bad.encode() in wire
        with pytest.raises(m.ProtocolError, match="bad result message"):
            m.decode(wire)


def test_a_result_field_missing_from_the_key_order_is_still_written(monkeypatch):
    # to_dict orders its keys as files always had them (result._KEY_ORDER); a field added to the
    # result later but not to that list must still reach the files and the wire, not vanish.
    from gpuplay.core.engine import messages as m
    from gpuplay.core.result import _KEY_ORDER, RunResult

    r = RunResult(
        spec=RunSpec.make("matmul", {"n": 64}), samples=[1e-3, 2e-3, 3e-3], error=1e-7, tolerance=1e-5
    )
    assert list(r.to_dict())[: len(_KEY_ORDER)] == list(_KEY_ORDER)  # the order files have had
    real = RunResult._fields
    monkeypatch.setattr(RunResult, "_fields", lambda self: {**real(self), "a_new_field": 42})
    assert r.to_dict()["a_new_field"] == 42
    assert list(r.to_dict())[: len(_KEY_ORDER)] == list(_KEY_ORDER)
    assert b'"a_new_field": 42' in m.encode(m.Finished(1, r))
