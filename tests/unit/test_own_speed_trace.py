"""gpuplay's own speed: the trace of a whole command, the engine started
before the front end's imports, and what neither process does any more. Checked by order and by
what is imported, never by timing."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuplay.core.engine import messages as m
from gpuplay.core.result import RunResult
from gpuplay.core.spec import RunSpec

RUN = ("run", "matmul", "-s", "n=64", "--budget", "0.05", "--warmup", "1")


def gpuplay(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {
        k: v for k, v in os.environ.items() if k not in ("GPUPLAY_IN_PROCESS", "COLUMNS", "GPUPLAY_TRACE")
    }
    full.update(GPUPLAY_STATE_DIR=str(tmp_path / "state"), GPUPLAY_CONFIG_DIR=str(tmp_path / "config"), **env)
    return subprocess.run([sys.executable, "-m", "gpuplay", *args], capture_output=True, text=True, env=full,
                          stdin=subprocess.DEVNULL, timeout=300)  # fmt: skip


def trace_lines(stderr: str) -> list[tuple[float, str, str]]:
    """(seconds, process, what) of each GPUPLAY_TRACE line."""
    pattern = re.compile(r"^gpuplay trace +([\d.]+) s +cpu +[\d.]+ s +(front end|engine) +(.+)$")
    return [(float(x[1]), x[2], x[3]) for line in stderr.splitlines() if (x := pattern.match(line))]


def test_gpuplay_trace_puts_both_processes_on_one_timeline_and_is_silent_when_off(tmp_path):
    out = gpuplay(tmp_path, *RUN, GPUPLAY_TRACE="1")
    assert out.returncode == 0, out.stderr[-2000:]
    lines = trace_lines(out.stderr)
    seen = [(who, what) for _, who, what in lines]
    for mark in [("front end", "engine: spawned"), ("engine", "runner imported"), ("front end", "sending RunRequest"),
                 ("engine", "phase warmup"), ("engine", "phase timed"), ("engine", "phase check"),
                 ("front end", "answer taken"), ("front end", "run: printed"), ("front end", "exit")]:  # fmt: skip
        assert mark in seen, f"{mark} not traced:\n{out.stderr[-3000:]}"
    at = {(who, what): t for t, who, what in lines}
    # One clock: the engine's phases fall between the request and the answer the front end saw.
    assert (
        at["front end", "sending RunRequest"]
        <= at["engine", "phase timed"]
        <= at["front end", "answer taken"]
    )
    assert "gpuplay trace" not in gpuplay(tmp_path, *RUN).stderr  # off by default


def test_the_engine_starts_before_the_front_end_imports_click(tmp_path):
    # The entry spawns the engine first: its interpreter and imports overlap the front end's.
    out = gpuplay(tmp_path, *RUN, GPUPLAY_TRACE="1", PYTHONPROFILEIMPORTTIME="1")
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stderr.splitlines()
    spawned = next(i for i, line in enumerate(lines) if line.endswith("front end  engine: spawned"))
    # importtime writes a module's line when its import ends: the first of click's modules.
    click = next(i for i, line in enumerate(lines) if re.match(r"^import time:.*\| +click(\.\S+)?$", line))
    assert spawned < click
    log = (tmp_path / "state" / "engine.log").read_text()
    assert log.count("--- gpuplay engine pid ") == 1  # the command used the engine it started early


def test_an_engine_started_early_for_a_command_that_stops_is_ended_with_it(tmp_path):
    import psutil

    out = gpuplay(tmp_path, "run", "no-such-scenario")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    state = str(tmp_path / "state")

    def engines() -> list[int]:
        found = []
        for p in psutil.process_iter(["cmdline"]):
            try:
                if "gpuplay.core.engine.server" in " ".join(p.info["cmdline"] or ()) and (
                    p.environ().get("GPUPLAY_STATE_DIR") == state
                ):
                    found.append(p.pid)
            except psutil.Error:
                continue
        return found

    deadline = time.monotonic() + 5
    while engines() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not engines()


def test_an_early_engine_is_taken_once_and_one_not_taken_or_stale_is_ended(monkeypatch, tmp_path):
    from gpuplay.core.engine import process

    def early() -> process.Spawned:
        process.start_early(["/venv/bin/gpuplay", "run", "matmul"])
        assert process._early is not None
        return process._early

    first = early()
    assert process.take_early() is first and process.take_early() is None  # adopted once
    first.kill()
    second = early()
    process.discard_early()  # at exit: never adopted (a usage error), ended at once
    assert second.proc.poll() is not None
    third = early()
    monkeypatch.setenv("GPUPLAY_STATE_DIR", str(tmp_path / "elsewhere"))
    assert process.take_early() is None  # it inherited another state folder: a new engine instead
    assert third.proc.poll() is not None


def test_no_early_engine_outside_the_gpuplay_command():
    from gpuplay.core.engine.process import wanted_early

    assert wanted_early(["/venv/bin/gpuplay", "run", "matmul"])
    assert wanted_early(["/src/gpuplay/__main__.py", "sweep", "x"])
    assert not wanted_early(["/venv/bin/gpuplay", "run", "matmul", "--help"])
    assert not wanted_early(["/venv/bin/gpuplay", "list"])
    assert not wanted_early(["/venv/bin/gpuplay"])  # the app starts its own engines
    assert not wanted_early(["-c", "run"])  # a program that imports the CLI (a notebook, a test)
    assert not wanted_early(["/usr/bin/ipykernel_launcher.py", "run"])


def test_a_numpy_run_front_end_imports_what_it_reads_before_the_answer_and_no_more(tmp_path):
    out = gpuplay(tmp_path, *RUN, PYTHONPROFILEIMPORTTIME="1", GPUPLAY_TRACE="1")
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stderr.splitlines()
    front = {x[1] for line in lines if (x := re.match(r"^import time:.*\| *(\S+)$", line))}
    assert "gpuplay.core.runner.measure" not in front
    # The engine opens the telemetry window; the front end built one it never used (33 ms).
    assert "gpuplay.core.measure.telemetry" not in front
    # The table's footer names the CPU: no package versions read from installed metadata (15 ms).
    assert "importlib.metadata" not in front
    # What reading the answer needs is imported while the engine starts, not after it answers.
    noise = next(
        i
        for i, line in enumerate(lines)
        if re.match(r"^import time:.*\| +gpuplay\.core\.measure\.noise$", line)
    )
    sent = next(i for i, line in enumerate(lines) if line.endswith("front end  sending RunRequest"))
    assert noise < sent


def test_a_command_s_exit_does_not_wait_for_its_engine_to_be_torn_down(monkeypatch):
    from gpuplay.core.engine import client as client_module

    c = client_module.shared_client(("numpy",))
    assert c.run(RunSpec.make("matmul", {"n": 16}, budget_s=0.01, warmup=1)).status == "ok"
    proc, waits = c._proc, []
    real = proc.wait
    monkeypatch.setattr(proc, "wait", lambda timeout=None: waits.append(timeout) or real(timeout))
    client_module.shutdown_shared()  # what atexit runs
    assert client_module.WAIT_POLITELY_S not in waits  # SIGKILLed at once: it was idle
    assert proc.returncode is not None  # and reaped: its rusage is its parent's to read


def test_the_engine_answer_leaves_what_the_front_end_derives_to_it(monkeypatch):
    from gpuplay.core.measure import roofline

    r = RunResult(spec=RunSpec.make("matmul", {"n": 64}), samples=[3e-3, 1e-3, 2e-3], warmup=[4e-3],
                  flops=5e5, bytes=4e4, error=1e-7, tolerance=1e-5, conditions={"threads": 2},
                  telemetry={"noise": {}}, started="a", finished="b")  # fmt: skip
    full = r.to_dict()

    def no_cache_read(**_kw: object) -> None:
        raise AssertionError("the engine read the roofline cache for its answer")

    with monkeypatch.context() as patched:
        patched.setattr(roofline, "roof_for", no_cache_read)
        wire = m.encode(m.Finished(1, r))  # the engine's side: no roof, no summary, no verdicts
    back = m.decode(wire)
    assert isinstance(back, m.Finished)
    assert back.result.to_dict() == full  # the front end derives the same figures
    for derived in ("summary", "gflops", "check_ok", "unstable", "noise_warnings"):
        assert f'"{derived}"'.encode() not in wire


@pytest.mark.gpu_fake
def test_nvml_is_not_imported_where_its_library_cannot_load():
    # nvidia-ml-py opens libnvidia-ml.so.1; where that fails it only says so, after 9-30 ms of import.
    probe = (
        "import sys\nfrom gpuplay.core.measure import telemetry\n"
        "telemetry.NVML_LIBRARY = sys.argv[1]\n"
        "print(telemetry.nvml_status()); print('pynvml' in sys.modules)\n"
    )
    absent = subprocess.run([sys.executable, "-c", probe, "libno-such-nvml.so.1"], capture_output=True, text=True,
                            check=True).stdout.splitlines()  # fmt: skip
    assert absent == [
        "NVML unavailable: the NVIDIA driver library (libnvidia-ml.so) was not found: no NVIDIA driver "
        "installed (NVMLError_LibraryNotFound)",
        "False",
    ]
    # A library that loads: nvidia-ml-py is imported and initialised as before (here it then finds
    # no driver itself, in the same words).
    present = subprocess.run([sys.executable, "-c", probe, "libc.so.6"], capture_output=True, text=True,
                             check=True).stdout.splitlines()  # fmt: skip
    assert present[1] == "True"
    if not Path("/proc/driver/nvidia").exists():
        assert present[0] == absent[0]


def test_a_result_s_step_timings_travel_packed_and_exact():
    samples = [1e-6 * (1 + i / 7) for i in range(20_000)] + [0.1 + 1e-17, 5e-324]
    r = RunResult(spec=RunSpec.make("elementwise", {"n": 4096}), samples=samples, warmup=[2e-6])
    wire = m.encode(m.Finished(3, r))
    assert len(wire) < 300_000 and b"1.142857" not in wire  # bytes, not 20,000 numbers in digits
    back = m.decode(wire)
    assert isinstance(back, m.Finished)
    assert back.result.samples == samples and back.result.warmup == [2e-6]  # bit for bit
    cut = wire.replace(b'"warmup_s": {"f64": "', b'"warmup_s": {"f64": "AAAA')
    with pytest.raises(m.ProtocolError, match="bad result message"):
        m.decode(cut)


def test_a_request_nobody_listens_to_streams_ticks_not_every_timing():
    # The client's watchdog needs proof of progress, not 10,000 timings a sweep point encoded in
    # the engine between timed steps and decoded in the front end.
    import threading

    from gpuplay.core.engine.jobs import run_job

    spec = RunSpec.make("elementwise", {"n": 1024}, budget_s=0.3, warmup=1)
    heard: dict[bool, list[m.Samples]] = {}
    for live in (True, False):
        sent: list[object] = []
        answer = run_job(m.RunRequest(1, spec, live), sent.append, threading.Event(), threading.Event(),
                         batch_s=0.05)  # fmt: skip
        heard[live] = [e for e in sent if isinstance(e, m.Samples)]
        steps = len(answer.result.samples) + len(answer.result.warmup)
        if live:
            assert sum(len(b.samples) for b in heard[live]) >= steps  # every timing (and the estimate's)
        else:
            assert heard[live] and all(len(b.samples) == 1 for b in heard[live])  # one per batch
            assert len(heard[live]) < steps / 10


def test_the_noise_check_s_process_listing_reads_what_psutil_reads():
    # Read from /proc without psutil's per-process objects (half the time, at both ends of every
    # sweep point on a busy machine): the keys (pid, create time) and CPU seconds must be psutil's,
    # or a window's two ends would not pair up and a process would be misattributed.
    import psutil

    from gpuplay.core.measure import noise

    if not noise._PROC_STAT:
        pytest.skip("no /proc here: psutil's listing is used")
    me = os.getpid()
    ours = noise.process_cpu_seconds(me)
    theirs = {}
    for p in psutil.process_iter(["cpu_times", "create_time"]):
        ct, created = p.info["cpu_times"], p.info["create_time"]
        if p.pid != me and ct is not None and created is not None:
            theirs[(p.pid, created)] = ct.user + ct.system
    both = set(ours) & set(theirs)
    assert len(both) >= 0.9 * max(len(ours), len(theirs))  # a process may start or end between the two
    # psutil read after us and CPU time only grows (a fixed tolerance fails when a busy process
    # runs between the two readings); the exact figures: test_noise's stopped child.
    assert all(ours[k] <= theirs[k] + 1e-9 for k in both)
    assert (me, psutil.Process().create_time()) not in ours


def _count_inputs(monkeypatch, workload_name: str) -> list[int]:
    from gpuplay.core.workloads import get_workload

    cls = type(get_workload(workload_name))
    made: list[int] = []
    real = cls.inputs
    monkeypatch.setattr(cls, "inputs", lambda self, p, rng: made.append(p["n"]) or real(self, p, rng))
    return made


def test_a_checked_run_makes_its_inputs_once_and_its_reference_from_them(monkeypatch):
    from gpuplay.core.runner import clear_caches, run

    clear_caches()
    made = _count_inputs(monkeypatch, "matmul")
    r = run(RunSpec.make("matmul", {"n": 96}, budget_s=0.02, warmup=1, seed=11))
    assert r.status == "ok" and r.check_ok and r.error is not None and r.error < r.tolerance
    # (the step-cost estimate makes smaller ones of its own)
    assert made.count(96) == 1  # set-up's inputs served the reference too (it used to make them again)
    again = run(RunSpec.make("matmul", {"n": 96}, budget_s=0.02, warmup=1, seed=11, dtype="float64"))
    assert (
        again.check_ok and made.count(96) == 2
    )  # the second configuration: its inputs; the reference cached


def test_a_reference_that_writes_into_its_inputs_is_made_from_fresh_ones(monkeypatch):
    # The run's own inputs may be the very arrays (NumPy float64): a reference may not touch them.
    from gpuplay.core.runner import clear_caches, run
    from gpuplay.core.workloads import get_workload

    clear_caches()
    cls = type(get_workload("matmul"))

    def scribbling(self, p, inputs):
        inputs[0][...] = 0.0  # raises on a read-only array; corrupted the run's input otherwise
        return np.zeros((p["n"], p["n"]))

    import numpy as np

    monkeypatch.setattr(cls, "reference", scribbling)
    try:
        r = run(RunSpec.make("matmul", {"n": 64}, budget_s=0.02, warmup=1, dtype="float64"))
    finally:
        clear_caches()  # its all-zeros reference must not serve a later test's matmul n=64
    # The reference (here all zeros) was made after the run from fresh inputs: the step's output
    # is the real product, so the check compares it against zeros and fails. Had the reference
    # been made from the run's inputs, their zeroed A would have made both zero: a false pass.
    assert r.status == "ok" and r.check_ok is False


def test_a_run_still_carries_its_cold_allocation_probe_of_three_steps():
    from gpuplay.core.runner import run

    r = run(RunSpec.make("matmul", {"n": 1024}, budget_s=0.05, warmup=1))
    probe = r.conditions["alloc_cold_probe"]  # 4 MiB of output a step: probed beside the warm figure
    assert probe["steps"] == 3 and probe["cold_median_s"] > 0 and probe["cold_faults_per_step"] > 0


def test_a_slow_backend_on_the_command_line_starts_importing_in_the_early_engine(monkeypatch):
    from types import SimpleNamespace

    from gpuplay.core import backends
    from gpuplay.core.engine import process, server

    assert process.probe_hint(["matmul", "-b", "torch", "--baseline"]) == ("torch",)
    assert process.probe_hint(["x", "--backend=cupy"]) == ("cupy",)
    assert process.probe_hint(["x", "--backends", "numpy,torch,cupy"]) == ("torch", "cupy")
    assert process.probe_hint(["x", "-s", "n=64"]) == ()  # NumPy only: nothing imported early
    started: list[str] = []
    monkeypatch.setattr(
        backends, "get_backend", lambda n: SimpleNamespace(start_probe=lambda: started.append(n))
    )
    monkeypatch.setenv(process.PROBE_ENV, "torch,os")  # only the backends it knows
    server.EngineServer(SimpleNamespace(send_bytes=lambda d: None))._head_start()
    assert started == ["torch"]


def test_a_trace_line_shows_outside_text_escaped(monkeypatch, tmp_path):
    # A phase's words can name another process (a device wait): one line, controls shown.
    from gpuplay.core.measure import trace

    out = tmp_path / "trace"
    fd = os.open(out, os.O_WRONLY | os.O_CREAT)
    monkeypatch.setattr(trace, "ENABLED", True)
    monkeypatch.setattr(trace, "_fd", fd)
    monkeypatch.setattr(trace, "_zero", time.monotonic())
    trace.mark("heard Phase waiting for \x1b[2J\x1b]0;evil\x07 (pid 1)\nnext")
    os.close(fd)
    text = out.read_text()
    assert text.count("\n") == 1 and "\x1b" not in text and "\x07" not in text
    assert "waiting for" in text and "evil" in text
