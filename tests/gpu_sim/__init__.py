"""A simulated GPU for tests: an engine process (started by the `gpuplay` CLI, `gpuplay.run` or the
app) sees `cuda:0` as an H100 that names itself simulated. See docs/testing-gpu-sim.md.

A process is simulated when its environment has PYTHONPATH starting with SITE (a folder holding a
sitecustomize.py that installs the simulation at interpreter start) and GPUPLAY_TEST_SIM=h100
(or mi300: AMD under ROCm; xpu: an Intel GPU through torch.xpu, a queued device).
`sim_env` gives that environment; the simulated device writes a JSON-lines ledger of what it did
(kernels' busy time, cache flushes, NVML and GPM reads, peak-memory resets) to the file named by
GPUPLAY_TEST_SIM_LEDGER, which `read_ledger` reads back.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

SITE = Path(__file__).resolve().parent / "site"
RUNTIMES_SITE = Path(__file__).resolve().parent / "runtimes_site"  # ONNX Runtime / TensorRT doubles
RUNTIMES_ENV = "GPUPLAY_TEST_SIM_RUNTIMES"
KIND_ENV = "GPUPLAY_TEST_SIM"
LEDGER_ENV = "GPUPLAY_TEST_SIM_LEDGER"
SIM_NAME_MARK = "simulated"  # in the device's name; its UUID begins GPU-5e1a7ed0 ("simulated")
SIM_UUID = "GPU-5e1a7ed0-0000-4000-8000-000000000001"


def sim_env(
    kind: str = "h100",
    tmp_path: Path | None = None,
    base: dict[str, str] | None = None,
    *,
    runtimes: bool = False,
) -> dict[str, str]:
    """The environment of a simulated process: `base` (default os.environ) with PYTHONPATH led by
    SITE, GPUPLAY_TEST_SIM=kind, the ledger file, and (with `tmp_path`) state, config and
    inductor folders of its own there. Pass it to subprocess, or set it with monkeypatch so that
    an engine started by `gpuplay.run` in the test inherits it. `runtimes`: the ONNX Runtime and
    Torch-TensorRT doubles too (tests/gpu_sim/simruntimes.py), which record what they are given."""
    env = dict(os.environ if base is None else base)
    rest = env.get("PYTHONPATH", "")
    ours = [str(SITE), *([str(RUNTIMES_SITE)] if runtimes else [])]
    parts = [p for p in rest.split(os.pathsep) if p and p not in (str(SITE), str(RUNTIMES_SITE))]
    env["PYTHONPATH"] = os.pathsep.join([*ours, *parts])
    env[KIND_ENV] = kind
    if runtimes:
        env[RUNTIMES_ENV] = "1"
    else:
        env.pop(RUNTIMES_ENV, None)
    env.pop("GPUPLAY_IN_PROCESS", None)
    if tmp_path is not None:
        env[LEDGER_ENV] = str(tmp_path / f"gpu-sim-{kind}.ledger.jsonl")
        env["GPUPLAY_STATE_DIR"] = str(tmp_path / "state")
        env["GPUPLAY_CONFIG_DIR"] = str(tmp_path / "config")
        env["TORCHINDUCTOR_CACHE_DIR"] = str(tmp_path / "inductor")
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def read_ledger(path: str | Path, event: str | None = None) -> list[dict[str, Any]]:
    """The ledger's lines (of `event` only, when given), in the order they were written."""
    p = Path(path)
    if not p.exists():
        return []
    lines = []
    for text in p.read_text().splitlines():
        if not text.strip():
            continue
        row = json.loads(text)
        if event is None or row.get("event") == event:
            lines.append(row)
    return lines


def timed_intervals(ledger: list[dict[str, Any]]) -> list[tuple[float, float]]:
    """The intervals CUDA events timed (a start event's record, then its end event's: consecutive
    event numbers), from a ledger's "event_record" lines."""
    records = [row for row in ledger if row["event"] == "event_record"]
    out = []
    for a, b in zip(records, records[1:], strict=False):
        if b["event_number"] == a["event_number"] + 1 and b["pid"] == a["pid"]:
            out.append((a["t_record"], b["t_record"]))
    return out


def covered(intervals: list[tuple[float, float]], t0: float, t1: float) -> float:
    """The share of [t0, t1] that `intervals` cover."""
    inside = sum(max(0.0, min(b, t1) - max(a, t0)) for a, b in intervals)
    return inside / (t1 - t0) if t1 > t0 else 0.0


def gpm_windows(ledger: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Consecutive GPM samples of one process: the windows GPM figures may have been read over."""
    samples = [row for row in ledger if row["event"] == "gpm_sample"]
    return [(a, b) for a, b in zip(samples, samples[1:], strict=False) if a["pid"] == b["pid"]]
