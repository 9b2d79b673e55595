"""gpuplay's own cost between figures (issue 34): what a sweep point pays besides its budget, and
the engine asked to probe (import) only what a command needs. Checked by counting, never by timing."""

from __future__ import annotations

import pytest

from gpuplay.core import result as result_module
from gpuplay.core.engine import messages as m
from gpuplay.core.result import RunResult
from gpuplay.core.spec import RunSpec


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
