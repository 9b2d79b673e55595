"""A simulated GPU for tests: an engine process (started by the `gpuplay` CLI, `gpuplay.run` or the
app) sees `cuda:0` as an H100 that names itself simulated. See docs/testing-gpu-sim.md.

A process is simulated when its environment has PYTHONPATH starting with SITE (a folder holding a
sitecustomize.py that installs the simulation at interpreter start) and GPUPLAY_TEST_SIM=h100.
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
KIND_ENV = "GPUPLAY_TEST_SIM"
LEDGER_ENV = "GPUPLAY_TEST_SIM_LEDGER"
SIM_NAME_MARK = "simulated"  # in the device's name; its UUID begins GPU-5e1a7ed0 ("simulated")
SIM_UUID = "GPU-5e1a7ed0-0000-4000-8000-000000000001"


def sim_env(
    kind: str = "h100", tmp_path: Path | None = None, base: dict[str, str] | None = None
) -> dict[str, str]:
    """The environment of a simulated process: `base` (default os.environ) with PYTHONPATH led by
    SITE, GPUPLAY_TEST_SIM=kind, the ledger file, and (with `tmp_path`) state, config and
    inductor folders of its own there. Pass it to subprocess, or set it with monkeypatch so that
    an engine started by `gpuplay.run` in the test inherits it."""
    env = dict(os.environ if base is None else base)
    rest = env.get("PYTHONPATH", "")
    parts = [p for p in rest.split(os.pathsep) if p and p != str(SITE)]
    env["PYTHONPATH"] = os.pathsep.join([str(SITE), *parts])
    env[KIND_ENV] = kind
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
