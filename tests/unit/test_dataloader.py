"""The dataloader workload: one batch per step, its time split, and workers that never outlive it."""

from __future__ import annotations

import gc
import time

import psutil
import pytest

from gpuplay.core.catalogue.planner import check
from gpuplay.core.engine.client import EngineClient
from gpuplay.core.reports.report import split_note
from gpuplay.core.runner import run
from gpuplay.core.spec import Refusal, RunSpec
from gpuplay.core.workloads import get_workload

TINY = {"batch": 4, "size": 32}


def spec(**params: object) -> RunSpec:
    p = get_workload("dataloader").resolve({**TINY, **params})
    return RunSpec.make("dataloader", p, backend="torch", warmup=1, repeat=4, energy=False)


def workers_of(pid: int) -> list[psutil.Process]:
    try:
        return [c for c in psutil.Process(pid).children(recursive=True) if c.is_running()]
    except psutil.NoSuchProcess:
        return []


def gone(p: psutil.Process, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if p.status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def test_each_step_splits_into_data_wait_copy_and_model():
    r = run(spec(workers=0))
    assert r.status == "ok" and r.check_ok, (r.message, r.error, r.tolerance)
    assert set(r.split) == {"data_wait_s", "h2d_s", "model_s"}
    assert all(len(v) == len(r.samples) == 4 for v in r.split.values())  # the timed steps, not the warm-up
    # the phases are inside the step: together no longer than it
    for i, total in enumerate(r.samples):
        assert sum(r.split[k][i] for k in r.split) <= total * 1.05 + 1e-4
    d = r.to_dict()["split"]
    assert d["data_wait_s"] > 0 and d["model_s"] > 0 and len(d["per_step"]["h2d_s"]) == 4
    assert split_note(r.split).startswith("split: data wait ")
    # The playground's stats panel says the same as the CLI: shares of the median step, with the rest
    import dataclasses

    from gpuplay.core.catalogue.scenarios import load_scenarios
    from gpuplay.core.studies.session import LiveSession
    from gpuplay.tui import viewmodels

    live = LiveSession(load_scenarios([]), threads=1)
    # A step of 100 ms whose phases cover 20 ms of it: the rest is "other", as the CLI says.
    split = {"data_wait_s": [0.01] * 4, "h2d_s": [0.0] * 4, "model_s": [0.01] * 4}
    live.live_result = dataclasses.replace(r, samples=[0.1] * 4, split=split)
    assert viewmodels.stats_info(live)["split"] == split_note(split, 0.1)
    assert "other" in viewmodels.stats_info(live)["split"]


def test_the_split_says_when_the_loader_is_the_bottleneck():
    note = split_note({"data_wait_s": [0.08], "h2d_s": [0.005], "model_s": [0.015]})
    assert "idle 80 %" in note and "the loader is the bottleneck" in note
    assert "bottleneck" not in split_note({"data_wait_s": [0.01], "h2d_s": [0.0], "model_s": [0.09]})


def test_workers_run_during_the_run_and_are_gone_after_it():
    me = psutil.Process().pid
    before = {p.pid for p in workers_of(me)}
    seen: list[psutil.Process] = []

    def on_phase(name: str, _detail: str) -> None:
        if name == "timed":
            seen.extend(p for p in workers_of(me) if p.pid not in before)

    r = run(spec(workers=2), on_phase=on_phase)
    assert r.status == "ok" and r.check_ok, r.message
    assert r.conditions["loader_workers"] == 2
    assert len(seen) >= 2  # started once, alive through the timed steps
    del r
    gc.collect()
    assert all(gone(p) for p in seen), [p.pid for p in seen if not gone(p, 0)]


@pytest.mark.slow
def test_no_worker_outlives_the_engine(tmp_path, monkeypatch):
    """A killed engine takes its loader's workers with it (no orphans in the process table)."""
    monkeypatch.setenv("GPUPLAY_STATE_DIR", str(tmp_path / "state"))
    client = EngineClient()
    seen: list[psutil.Process] = []
    try:
        engine = None

        def on_phase(name: str, _detail: str) -> None:
            if name == "timed" and client.pid is not None:
                seen.extend(workers_of(client.pid))

        r = client.run(spec(workers=2).replace(repeat=20), on_phase=on_phase)
        assert r.status == "ok", r.message
        engine = client.pid
        assert engine is not None and len(seen) >= 2
        assert all(gone(p) for p in seen)  # after the run, in a live engine
    finally:
        client.close()


ORPHAN_SCRIPT = """
import sys, threading
from gpuplay.core.runner import run
from gpuplay.core.spec import RunSpec
from gpuplay.core.workloads import get_workload
p = get_workload("dataloader").resolve({"batch": 4, "size": 32, "workers": 2})
def on_phase(name, detail):
    if name == "timed":
        print("timed", flush=True)
        threading.Event().wait()  # hold the run here until this process is killed
run(RunSpec.make("dataloader", p, backend="torch", repeat=5), on_phase=on_phase)
"""


@pytest.mark.slow
def test_no_worker_outlives_a_killed_engine_process():
    """An engine killed with no one left to reap its group (SIGKILL, its client gone too) still
    takes the loader's workers with it at once (PR_SET_PDEATHSIG), not at torch's own check of
    the parent every 5 seconds."""
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-c", ORPHAN_SCRIPT], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "timed"
        seen = workers_of(proc.pid)
        assert len(seen) >= 2
    finally:
        proc.kill()
        proc.wait()
    assert all(gone(p, within=1.0) for p in seen), "a loader worker outlived its engine"


def test_refusals_name_the_reason():
    numpy_spec = spec().replace(backend="numpy")
    assert "backend torch" in str(check(numpy_spec))
    v = check(spec(decode="torchvision"))
    assert isinstance(v, Refusal) and "torchvision" in str(v) and "decode=pillow" in str(v)
    v = check(spec(pin="on"))
    assert isinstance(v, Refusal) and "cpu" in str(v)
    v = check(spec(workers=64))
    assert isinstance(v, Refusal) and "cores" in str(v)


def test_a_hostile_split_or_build_time_read_back_is_dropped():
    from gpuplay.core.result import RunResult

    d = RunResult(spec=spec()).to_dict()
    d["split"] = {"per_step": {"data_wait_s": [0.1, "x", float("inf"), -1, True, 1e300], "[red]": "no"}}
    d["build_s"] = float("nan")
    r = RunResult.from_dict(d)
    assert r.split == {"data_wait_s": [0.1]} and r.build_s is None


BURNER = "import sys\nprint('burning', flush=True)\nwhile True:\n    pass\n"


@pytest.mark.slow
def test_the_noise_check_counts_the_workers_as_the_runs_own_but_still_names_a_cpu_burner():
    """The loader's workers decode for the run: their CPU is the run's own (own_helper_cores), not
    "other processes". A CPU burner that is also a child of this process is still named: only the
    PIDs the workload reports are the run's."""
    import subprocess
    import sys

    from gpuplay.core.measure.telemetry import RunTelemetry

    burner = subprocess.Popen([sys.executable, "-c", BURNER], stdout=subprocess.PIPE, text=True)
    try:
        assert burner.stdout is not None and burner.stdout.readline().strip() == "burning"
        p = get_workload("dataloader").resolve({"batch": 16, "size": 128, "workers": 2})
        s = RunSpec.make("dataloader", p, backend="torch", warmup=1, budget_s=1.5, energy=False)
        me, seen = psutil.Process().pid, set()

        def on_phase(name: str, _detail: str) -> None:
            if name == "timed":
                seen.update(c.pid for c in workers_of(me) if c.pid != burner.pid)

        r = run(s, telemetry=RunTelemetry(), on_phase=on_phase)
    finally:
        burner.kill()
        burner.wait(5)
    assert r.status == "ok", r.message
    host = r.telemetry["noise"]["host"]
    named = {o["pid"] for o in host["other_top"]}
    assert burner.pid in named, host  # a real CPU burner is not hidden
    assert len(seen) >= 2 and not seen & named, (seen, host)
    assert host["own_helper_cores"] > 0.01 and host["own_cores"] >= host["own_helper_cores"], host
