"""`gpuplay tune`: the ladder on a user's code file through the real engine, its formats, its errors."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
import threading

import pytest
from click.testing import CliRunner

from gpuplay.cli import main

WRONG_BF16 = '''"""A matrix product whose half-precision path is deliberately wrong."""

PARAMS = {"n": 64}
ERROR_GROWTH = ("dot", "n")


def inputs(rng, n):
    return rng.standard_normal((n, n)), rng.standard_normal((n, n))


def step(xp, a, b):
    out = a @ b
    if str(out.dtype).endswith("bfloat16"):  # under AMP bf16: a wrong result, on purpose
        return out * 1.5
    return out
'''


@pytest.mark.long(18)
@pytest.mark.slow
@pytest.mark.real_engine
def test_tune_a_code_file_drops_the_rung_that_fails_its_check(tmp_path):
    from gpuplay.core.studies.tune import cpu_has_bf16

    code = tmp_path / "wrong_bf16.py"
    code.write_text(WRONG_BF16)
    out = tmp_path / "ladder.json"
    env = {k: v for k, v in os.environ.items() if k != "GPUPLAY_IN_PROCESS"}
    env |= {"GPUPLAY_STATE_DIR": str(tmp_path / "state"), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "gpuplay", "tune", str(code), "-d", "cpu", "--budget-total", "10",
           "--format", "json", "--out", str(out)]  # fmt: skip
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    assert "the order is fixed" in proc.stderr and "budget 10 s for the whole ladder" in proc.stderr
    data = json.loads(out.read_text())
    assert set(data) >= {"rungs", "verdict"} and data["verdict"].startswith("kept ")
    rungs = {r["name"]: r for r in data["rungs"]}
    assert list(rungs)[:3] == ["baseline", "device", "amp-bf16"]
    for r in data["rungs"]:
        assert isinstance(r["kept"], bool) and r["status"] in ("measured", "dropped", "refused")
        assert r["reason"], r["name"]
    assert rungs["baseline"]["status"] == "measured" and rungs["baseline"]["median"] > 0
    for gpu_only in ("tf32", "graphs"):  # GPU rungs listed with their reasons, not hidden
        assert rungs[gpu_only]["status"] == "refused" and "cuda" in rungs[gpu_only]["reason"]
    bf16 = rungs["amp-bf16"]
    if cpu_has_bf16() is False:
        assert bf16["status"] == "refused" and "bfloat16" in bf16["reason"]
    else:
        assert bf16["kept"] is False
        # named for its failed check (a drop for noise is not this test's drop); only a ladder
        # whose budget ended before the rung says otherwise
        assert "failed the float64 check" in bf16["reason"] or "budget" in bf16["reason"], bf16
    # the rungs' results went to the session log, as every measurement's do
    logs = list((tmp_path / "state").rglob("*.jsonl"))
    assert logs and any("wrong_bf16" in p.read_text() for p in logs)


def test_tune_refuses_an_unknown_target_and_a_device_that_is_not_here():
    res = CliRunner().invoke(main, ["tune", "no-such-scenario"])
    assert res.exit_code == 2 and "no-such-scenario" in res.output
    res = CliRunner().invoke(main, ["tune", "matmul", "-d", "cuda:7"])
    assert res.exit_code == 2 and "device cuda:7" in res.output
    res = CliRunner().invoke(main, ["tune", "matmul", "--budget-total", "nan"])
    assert res.exit_code == 2


def _ladder():
    from gpuplay.core.catalogue.scenarios import load_scenarios, spec_for
    from gpuplay.core.result import RunResult
    from gpuplay.core.studies import tune

    spec = spec_for(load_scenarios([]).get("matmul"), "quick", {"n": 64})[0]
    ladder = tune.plan_ladder(spec, "cpu", "matmul", budget_s=30)

    def measure(s, *, cancel: threading.Event, paired_with=None):
        r = RunResult(spec=s, samples=[0.01] * 9, error=0.0, tolerance=1e-3)
        if paired_with is not None:
            r.speedup = {"point": 1.5, "interval": [1.2, 1.8], "pairs": 9, "method": "t"}
        return r

    return tune.run_ladder(ladder, measure)


@pytest.mark.parametrize("fmt", ["markdown", "csv", "table"])
def test_tune_formats_hold_every_rung(fmt, capsys):
    from gpuplay.cli.tune import _print

    ladder = _ladder()
    _print(ladder, fmt, None)
    text = capsys.readouterr().out
    for r in ladder.rungs:
        assert r.name in text
    if fmt == "csv":
        rows = list(csv.DictReader(io.StringIO(text)))
        assert [r["name"] for r in rows] == [r.name for r in ladder.rungs]
        assert {r["kept"] for r in rows} <= {"True", "False"}
    else:
        assert "kept " in text and "over the baseline" in text


@pytest.mark.long(15)
@pytest.mark.slow
@pytest.mark.real_engine
def test_tune_inference_lists_every_rung_and_the_gpu_ones_with_reasons(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "GPUPLAY_IN_PROCESS"}
    env |= {"GPUPLAY_STATE_DIR": str(tmp_path / "state"), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "gpuplay", "tune", "inference", "-p", "quick", "-s", "seq=32", "-d", "cpu",
           "--budget-total", "12", "--format", "json"]  # fmt: skip
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=400, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    rungs = {r["name"]: r for r in json.loads(proc.stdout)["rungs"]}
    assert list(rungs) == ["baseline", "device", "inference_mode", "amp-bf16", "amp-fp16", "tf32", "compile",
                           "compile-ro", "compile-ma", "graphs", "torchscript", "onnxruntime", "tensorrt"]  # fmt: skip
    assert rungs["baseline"]["status"] == "measured" and rungs["device"]["median"] is not None
    assert rungs["device"]["configuration"].endswith("mode=grad")  # inference_mode is a rung of its own
    for name, words in (
        ("tf32", "NVIDIA"),
        ("graphs", "cuda"),
        ("tensorrt", "NVIDIA"),
        ("amp-fp16", "tensor-core"),
    ):
        assert rungs[name]["status"] == "refused" and words in rungs[name]["reason"], rungs[name]


@pytest.mark.parametrize("width", [80, 100, 160])
def test_the_ladder_table_keeps_each_rungs_outcome_at_every_width(monkeypatch, width):
    """At 80 columns the figures' columns stayed whole and squeezed the outcome to nothing:
    kept or dropped could not be read. Narrower tables leave out the configuration first."""
    from types import SimpleNamespace

    from gpuplay.cli import output
    from gpuplay.cli import tune as tune_cli
    from gpuplay.core.studies.tune import COLUMNS

    monkeypatch.setattr(output, "stdout_console", lambda: SimpleNamespace(width=width))
    ladder = SimpleNamespace(target="matmul", device="cpu", verdict="kept 1 of 2 rungs")
    rows = [
        ["baseline", "numpy cpu float32", "8.81 ms", "1×", "1×", "3e-07 ≤ 1e-05", "kept"],
        ["compile-ma", "torch cpu float32 +compile:max-autotune", "2.55 ms\n+42.3 ms compile",
         "0.969× [0.966–0.972]", "0.969×", "3e-07 ≤ 1e-05", "dropped: slower: 0.969× [0.966–0.972]"],
    ]  # fmt: skip
    text = tune_cli._table_text(ladder, rows, COLUMNS, to_file=False)
    lines = text.splitlines()
    assert all(len(line.rstrip()) <= width for line in lines), text
    header = next(line for line in lines if "rung" in line)
    assert "outcome" in header and "speedup" in header, text
    assert "compile-ma" in text and "baseline" in text  # rung names whole
    assert "dropped: slower" in " ".join(text.split()), text
    assert ("configuration" in header) == (width >= 140)
