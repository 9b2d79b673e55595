"""gpuplay's own cost between figures: what a sweep point pays besides its budget, and
the engine asked to probe (import) only what a command needs. Checked by counting, never by timing."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gpuplay.core import result as result_module
from gpuplay.core.engine import messages as m
from gpuplay.core.result import RunResult
from gpuplay.core.spec import RunSpec
from tests.process_helpers import gpuplay_env as _env
from tests.process_helpers import run_python as _python


def test_a_result_summarizes_its_samples_once_until_they_change(monkeypatch):
    calls = []
    real = result_module.summarize
    monkeypatch.setattr(result_module, "summarize", lambda s: calls.append(len(s)) or real(s))
    r = RunResult(spec=RunSpec.make("matmul", {"n": 64}), samples=[3e-3, 1e-3, 2e-3], flops=1e6, bytes=1e6)
    r.to_dict()
    assert (r.median, r.gflops, r.unstable) == (2e-3, 1e6 / 2e-3 / 1e9, r.unstable)
    assert calls == [3]  # a sweep point's log line and table read it ~9 times: sorted once
    r.samples.append(4e-3)  # a live run's samples grow: the summary follows them
    assert r.median == 2.5e-3 and calls == [3, 4]
    r.samples[0] = 5e-3  # changed in place, same length: recomputed too
    assert r.summary.max == 5e-3 and calls == [3, 4, 4]


def test_a_probe_request_names_its_backends_on_the_wire():
    req = m.decode(m.encode(m.ProbeRequest(("numpy",))))
    assert req == m.ProbeRequest(("numpy",))
    assert m.decode(m.encode(m.ProbeRequest())).backends == ("numpy", "torch", "cupy")
    doc = m.encode(m.ProbeRequest()).replace(b'"cupy"', b'"os"')
    with pytest.raises(m.ProtocolError, match="unknown backends"):
        m.decode(doc)


def test_the_engine_probes_only_what_it_is_asked_for(monkeypatch):
    from types import SimpleNamespace

    from gpuplay.core import backends
    from gpuplay.core.engine import server

    probed, sent, started = [], [], []
    monkeypatch.setattr(
        backends, "get_backend", lambda name: SimpleNamespace(start_probe=lambda: started.append(name))
    )
    monkeypatch.setattr(server, "probe_data", lambda names: probed.append(names) or {n: {} for n in names})
    monkeypatch.setattr(server, "warm_runner", lambda: None)
    engine = server.EngineServer(SimpleNamespace(send_bytes=lambda d: sent.append(m.decode(d))))
    engine._probe(("numpy",))
    assert probed == [("numpy",)] and sent == [m.ProbeAnswer({"numpy": {}}, True)]
    engine._probe(("numpy", "torch", "cupy"))  # CuPy's slow probe answers second, as the final one
    assert probed[1:] == [("numpy", "torch"), ("numpy", "torch", "cupy")]
    assert [a.final for a in sent[1:]] == [False, True]
    assert started == ["numpy", "numpy", "torch", "cupy"]


async def test_a_new_choice_is_painted_before_it_is_measured(tmp_path, monkeypatch):
    # A key's repaint must not share the machine with the start of a measurement: the app paints
    # the new choice (the session's "queued" run on screen) and starts the run after that frame.
    monkeypatch.setenv("GPUPLAY_IN_PROCESS", "1")
    from textual.screen import Screen

    from gpuplay.tui.app import GpuPlayApp
    from tests.tui_helpers import tiny_scenarios, wait_until

    app = GpuPlayApp([tiny_scenarios(tmp_path / "sc")], export_dir=tmp_path / "out", budget_s=0.05,
                     telemetry=False)  # fmt: skip
    events: list[str] = []
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(pilot, lambda: app.session.live_result is not None)
        real_start, real_refresh = app.runs.start, Screen._refresh_layout
        monkeypatch.setattr(
            app.runs, "start", lambda spec, run_id: events.append("start") or real_start(spec, run_id)
        )
        monkeypatch.setattr(
            Screen, "_refresh_layout", lambda *a, **k: events.append("paint") or real_refresh(*a, **k)
        )
        names = list(app.scenario_set.scenarios)
        app.choose_scenario(names[1])
        assert "start" not in events  # not in the key's handler
        await wait_until(pilot, lambda: "start" in events)
        assert events.index("paint") < events.index("start")
        await wait_until(pilot, lambda: app.session.live_result is not None)
        assert app.session.live_result.spec.scenario == names[1]


def test_an_engine_started_early_but_never_asked_is_killed_without_waiting(monkeypatch):
    # `gpuplay run nosuch` starts the engine before it finds the name unknown: quitting must not
    # wait for an engine still importing to read a polite Shutdown (up to 0.2 s).
    from gpuplay.core.engine.client import EngineClient
    from gpuplay.core.engine.messages import Shutdown
    from gpuplay.core.spec import RunSpec

    def recording(client):
        sent = []
        real = client._send
        monkeypatch.setattr(client, "_send", lambda msg: sent.append(msg) or real(msg))
        return sent

    idle = EngineClient(backends=("numpy",))
    idle.start()
    sent = recording(idle)
    idle.close()
    assert not idle.alive() and not any(isinstance(m, Shutdown) for m in sent)

    used = EngineClient(backends=("numpy",))
    assert used.run(RunSpec.make("matmul", {"n": 16}, budget_s=0.01, warmup=1)).status == "ok"
    sent = recording(used)
    used.close()
    assert not used.alive() and any(isinstance(m, Shutdown) for m in sent)  # it may finish cleanly


def test_the_check_reads_the_cold_probe_s_last_output_instead_of_one_more_step(monkeypatch):
    from gpuplay.core.runner import clear_caches, run
    from gpuplay.core.workloads import linalg

    n = 640  # 3 × 640² float32: past the probe's 4 MiB, so the cold-allocation probe runs
    calls: list[int] = []
    real = linalg.matmul

    def counted(xp, a, b):
        calls.append(a.shape[0])
        return real(xp, a, b)

    monkeypatch.setattr(linalg, "matmul", counted)
    clear_caches()
    r = run(RunSpec.make("matmul", {"n": n}, budget_s=0.03, warmup=2))
    assert r.status == "ok", r.message
    probe = r.conditions["alloc_cold_probe"]
    # every full-size call: warm-up, the timed steps and the probe's; the check's output is the
    # probe's last (one call fewer than before), and it still checks against float64
    assert calls.count(n) == 2 + len(r.samples) + probe["steps"]
    assert r.check_ok and r.error is not None and 0 < r.error < r.tolerance


def test_without_a_probe_the_check_still_calls_the_step_once_more(monkeypatch):
    from gpuplay.core.runner import clear_caches, run
    from gpuplay.core.workloads import linalg

    n = 64  # too small a step for the probe
    calls: list[int] = []
    real = linalg.matmul
    monkeypatch.setattr(linalg, "matmul", lambda xp, a, b: calls.append(a.shape[0]) or real(xp, a, b))
    clear_caches()
    r = run(RunSpec.make("matmul", {"n": n}, budget_s=0.02, warmup=1))
    assert "alloc_cold_probe" not in r.conditions
    assert calls.count(n) == 1 + len(r.samples) + 1 and r.check_ok


def test_steps_run_for_energy_after_the_probe_leave_the_check_its_own_step(monkeypatch):
    from gpuplay.core.measure import energy
    from gpuplay.core.runner import clear_caches, run
    from gpuplay.core.workloads import linalg

    n = 640
    calls: list[str] = []
    real = linalg.matmul
    monkeypatch.setattr(linalg, "matmul", lambda xp, a, b: calls.append(a.shape[0]) or real(xp, a, b))

    def window(counter, step, **kw):  # a counter that reads: its window calls the step twice
        step(), step()
        return energy.Energy("n/a (fake)")

    monkeypatch.setattr(energy, "counter_for", lambda device: (object(), ""))
    monkeypatch.setattr(energy, "measure_energy", window)
    clear_caches()
    r = run(RunSpec.make("matmul", {"n": n}, budget_s=0.03, warmup=1))
    probe = r.conditions["alloc_cold_probe"]
    assert calls.count(n) == 1 + len(r.samples) + probe["steps"] + 2 + 1 and r.check_ok


# -- the front end's end ---------------------------------------------------------------------


TEARDOWN_SEEN = """
    import sys
    sys.argv = ["gpuplay", *sys.argv[1:]]  # this process is the `gpuplay` command
    class Torn:
        def __del__(self):
            print("interpreter torn down", flush=True)
    kept = Torn()  # a module global: only the interpreter's teardown finalises it
    {before}
    from gpuplay.cli import main
    main()
"""


@pytest.mark.plain_children  # a tracer in the child makes it end as an interpreter does, by design
def test_the_command_ends_without_tearing_its_interpreter_down(tmp_path):
    out = _python(TEARDOWN_SEEN.format(before=""), "--version", env=_env(tmp_path))
    assert out.returncode == 0 and "gpuplay, version" in out.stdout, out.stderr
    assert "interpreter torn down" not in out.stdout
    # the same program calling `main` as another program would (a test, a notebook): torn down
    control = _python(
        TEARDOWN_SEEN.format(before="sys.argv[0] = 'my-script'"), "--version", env=_env(tmp_path)
    )
    assert control.returncode == 0 and "interpreter torn down" in control.stdout, control.stderr


def test_a_profiled_command_ends_as_the_interpreter_does(tmp_path):
    # cProfile (pyinstrument alike) writes its report after the command returns: not cut short.
    prof = tmp_path / "gpuplay.prof"
    out = subprocess.run([sys.executable, "-m", "cProfile", "-o", str(prof), "-m", "gpuplay", "--version"],
                         capture_output=True, text=True, timeout=60, env=_env(tmp_path))  # fmt: skip
    assert out.returncode == 0 and "gpuplay, version" in out.stdout, out.stderr
    assert prof.is_file() and prof.stat().st_size > 0


def test_a_run_s_status_output_and_log_survive_the_fast_end(tmp_path):
    env = _env(tmp_path)
    bad = subprocess.run([sys.executable, "-m", "gpuplay", "run", "no-such-scenario"], capture_output=True,
                         text=True, timeout=60, env=env)  # fmt: skip
    assert bad.returncode == 2 and "unknown scenario 'no-such-scenario'" in bad.stderr
    out_file = tmp_path / "r.json"
    ok = subprocess.run([sys.executable, "-m", "gpuplay", "run", "matmul", "-s", "n=64", "--budget", "0.02",
                         "--format", "json", "--out", str(out_file)], capture_output=True, text=True, timeout=120,
                        env=env)  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    import json

    doc = json.loads(out_file.read_text())
    assert doc["results"][0]["status"] == "ok"
    logs = list((tmp_path / "state" / "sessions").glob("session-*.jsonl"))
    assert len(logs) == 1 and logs[0].read_text().count("\n") == 1


def test_the_engine_is_asked_to_end_before_the_table_is_printed(tmp_path):
    out = subprocess.run([sys.executable, "-m", "gpuplay", "run", "matmul", "-s", "n=64", "--budget", "0.02"],
                         capture_output=True, text=True, timeout=120,
                         env=_env(tmp_path, GPUPLAY_TRACE="1"))  # fmt: skip
    assert out.returncode == 0, out.stderr
    front = [line.split("front end")[-1].strip() for line in out.stderr.splitlines()
             if line.startswith("gpuplay trace") and "front end" in line]  # fmt: skip
    assert front.index("engine: released") < front.index("run: printed") < front.index("engine: closing"), (
        front
    )
    assert "heard Shutdown" in out.stderr  # the engine's own mark: it heard the request
