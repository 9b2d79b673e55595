"""The engine boundary: typed messages, their one wire format, the version check, the shared jobs."""

from __future__ import annotations

import json
import threading
from types import SimpleNamespace

import pytest

from gpuplay.core.engine import messages as m
from gpuplay.core.engine.inprocess import InProcessEngine
from gpuplay.core.engine.protocol import Listener
from gpuplay.core.result import RunResult
from gpuplay.core.spec import RunSpec

SPEC = RunSpec.make("matmul", {"n": 16}, budget_s=0.01, warmup=1)
BASE = RunSpec.make("matmul", {"n": 16}, backend="numpy")

EVERY_MESSAGE = [
    m.RunRequest(1, SPEC, True, None),
    m.RunRequest(2, SPEC, False, BASE),
    m.ProfileRequest(3, SPEC, 5),
    m.Cancel(4),
    m.Pause(5, True),
    m.ProbeRequest(),
    m.Shutdown(),
    m.Ready(1234),
    m.ProbeAnswer({"numpy": {"ok": True, "devices": []}}, False),
    m.Phase(6, "warmup"),
    m.Samples(7, (("warmup", 0.5), ("timed", 0.25))),
    m.Profiled(8, {"status": "ok", "top_ops": [{"name": "aten::mm", "calls": 1.0}]}),
    m.Failed(9, "bad spec"),
]


@pytest.mark.parametrize("msg", EVERY_MESSAGE, ids=lambda msg: type(msg).__name__)
def test_every_message_crosses_the_wire_unchanged(msg):
    data = m.encode(msg)
    assert isinstance(data, bytes)
    assert json.loads(data)["v"] == m.PROTOCOL_VERSION  # plain JSON, versioned
    assert m.decode(data) == msg


def test_a_result_crosses_as_plain_data():
    result = RunResult(spec=SPEC, samples=[0.1, 0.2, 0.3], notes=["a note"])
    back = m.decode(m.encode(m.Finished(11, result)))
    assert isinstance(back, m.Finished) and back.run_id == 11
    assert back.result.to_dict() == result.to_dict() and back.baseline is None


def test_a_paired_answer_carries_the_baselines_own_result_packed_and_checked():
    result = RunResult(spec=SPEC, samples=[0.1, 0.2, 0.3], speedup={"point": 2.0})
    base = RunResult(spec=BASE, samples=[0.2, 0.4, 0.6], warmup=[0.5], conditions={"paired_with": "x"})
    data = m.encode(m.Finished(12, result, base))
    doc = json.loads(data)
    assert doc["baseline"]["samples_s"] == m.pack([0.2, 0.4, 0.6]), "packed as the result's"
    back = m.decode(data)
    assert isinstance(back, m.Finished) and back.baseline is not None
    assert back.baseline.to_dict() == base.to_dict() and back.result.to_dict() == result.to_dict()
    for bad in ("not a result", {"samples_s": {"f64": "AAA="}}):  # hostile: refused, naming the request
        doc["baseline"] = bad
        with pytest.raises(m.ProtocolError) as err:
            m.decode(json.dumps(doc).encode())
        assert err.value.run_id == 12


def test_a_message_of_another_version_is_refused_naming_its_request():
    doc = json.loads(m.encode(m.Phase(12, "timed")))
    doc["v"] = m.PROTOCOL_VERSION + 1
    with pytest.raises(m.ProtocolError, match="protocol version") as err:
        m.decode(json.dumps(doc).encode())
    assert err.value.run_id == 12


@pytest.mark.parametrize(
    "data",
    [b"\x80\x04not json", b"[1, 2]", b'{"kind": "nonsense", "v": 2}', b'{"kind": "phase", "v": 2}'],
    ids=["pickle", "not an object", "unknown kind", "missing fields"],
)
def test_what_is_not_a_message_raises_a_protocol_error(data):
    with pytest.raises(m.ProtocolError):
        m.decode(data)


def test_a_run_request_with_a_bad_spec_is_answered_with_a_failure(monkeypatch):
    """The engine reads the request, cannot make a spec of it, and says so for that run."""
    from gpuplay.core.engine import server

    doc = json.loads(m.encode(m.RunRequest(13, SPEC, False)))
    doc["spec"]["backend"] = "fortran"
    incoming = [json.dumps(doc).encode()]
    sent: list[m.Message] = []

    def recv_bytes():
        if incoming:
            return incoming.pop()
        raise EOFError

    class Exited(Exception):
        pass

    def exit_(code):
        raise Exited(code)

    monkeypatch.setattr(server.os, "_exit", exit_)
    engine = server.EngineServer(
        SimpleNamespace(recv_bytes=recv_bytes, send_bytes=lambda d: sent.append(m.decode(d)))
    )
    with pytest.raises(Exited):
        engine._read()
    assert len(sent) == 1 and isinstance(sent[0], m.Failed) and sent[0].run_id == 13
    assert "bad run message" in sent[0].message
    assert engine.jobs.empty()


def test_the_listener_hands_progress_to_the_callbacks():
    samples, phases = [], []
    hear = Listener(lambda ph, dt: samples.append((ph, dt)), lambda name, _d: phases.append(name)).hear
    hear(m.Phase(1, "warmup"))
    hear(m.Samples(1, (("warmup", 0.1), ("warmup", 0.2))))
    assert phases == ["warmup"] and samples == [("warmup", 0.1), ("warmup", 0.2)]
    Listener().hear(m.Samples(1, (("timed", 0.1),)))  # no callbacks: nothing to do


def test_the_in_process_engine_runs_the_engine_process_job(tmp_path, monkeypatch):
    """Every step timing reaches the caller one by one, the phases in order, under the device lock."""
    monkeypatch.setenv("GPUPLAY_STATE_DIR", str(tmp_path))
    samples, phases = [], []
    r = InProcessEngine().run(
        RunSpec.make("matmul", {"n": 16}, repeat=5, warmup=2),
        on_sample=lambda ph, dt: samples.append(ph),
        on_phase=lambda name, _d: phases.append(name),
    )
    assert r.status == "ok", r.message
    assert samples.count("timed") == len(r.samples) == 5 and samples.count("warmup") == 2
    assert phases[:3] == ["estimate", "setup", "warmup"] and "timed" in phases
    assert (tmp_path / "locks" / "cpu.lock").exists()


def test_a_cancelled_in_process_run_says_so():
    cancel = threading.Event()
    cancel.set()
    r = InProcessEngine().run(RunSpec.make("matmul", {"n": 16}), cancel=cancel)
    assert r.status == "cancelled"


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
