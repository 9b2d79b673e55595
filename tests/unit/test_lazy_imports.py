"""Each library is imported the first time a configuration needs it (issue 34).

A NumPy-only `gpuplay run` or `gpuplay sweep` imports no torch, CuPy or SciPy, in the front end or
in the engine process: each process's `python -X importtime` list (PYTHONPROFILEIMPORTTIME, which
the engine inherits and writes to its log) is read after a real command. And no module of the
core, the CLI or the collectives imports a heavy library when it is imported, so a new top-level
`import torch` (or CuPy, SciPy, Textual) in the wrong layer fails here.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("torch", "cupy", "scipy", "textual", "torchao", "onnxruntime", "pandas", "matplotlib", "plotext")
# What a module may import at import time, by package (the front end's web server is a front end).
ALLOWED = {"gpuplay.cli.serve_web": {"textual_serve", "aiohttp"}}

_LINE = re.compile(r"^import time:\s+-?\d+ \|\s+-?\d+ \|( *)(\S+)$")


def imported(text: str) -> set[str]:
    """Every module an importtime listing names."""
    return {m.group(2) for line in text.splitlines() if (m := _LINE.match(line))}


def top_level(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


def engines_started(tmp_path: Path) -> int:
    """How many engine processes wrote to this state folder's engine log (one line each at start)."""
    return (tmp_path / "state" / "engine.log").read_text().count("--- gpuplay engine pid ")


def _gpuplay(tmp_path: Path, *args: str) -> tuple[set[str], set[str]]:
    """Run a gpuplay command: the modules its front end and its engine imported."""
    env = {k: v for k, v in os.environ.items() if k not in ("GPUPLAY_IN_PROCESS", "COLUMNS")}
    env.update(PYTHONPROFILEIMPORTTIME="1", GPUPLAY_STATE_DIR=str(tmp_path / "state"),
               GPUPLAY_CONFIG_DIR=str(tmp_path / "config"))  # fmt: skip
    out = subprocess.run([sys.executable, "-m", "gpuplay", *args], capture_output=True, text=True, env=env,
                         stdin=subprocess.DEVNULL, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    log = (tmp_path / "state" / "engine.log").read_text()
    return imported(out.stderr), imported(log)


def test_a_numpy_run_imports_no_torch_in_the_front_end_or_the_engine(tmp_path):
    front, engine = _gpuplay(tmp_path, "run", "matmul", "-s", "n=64", "--budget", "0.05", "--warmup", "1")
    assert "gpuplay.core.runner.measure" in engine  # the engine measured: its listing was read
    assert "gpuplay.core.catalogue.planner" in front  # the front end's listing was read: it planned
    assert "numpy" not in top_level(front)  # it plans and prints without NumPy (issue 34, round 4)
    assert not {m for m in front if m.startswith("gpuplay.core.runner")}  # it measures in the engine
    for side, mods in (("front end", front), ("engine", engine)):
        loaded = sorted(top_level(mods) & {"torch", "cupy", "scipy", "textual"})
        assert not loaded, f"a NumPy-only run imported {loaded} in the {side}"


def test_a_sparse_run_imports_scipy_in_the_engine_only(tmp_path):
    """The planner asks whether SciPy is installed (the app asks at each switch to this scenario, on
    its UI thread): finding it must not import it; the engine, which multiplies, does."""
    front, engine = _gpuplay(tmp_path, "run", "sparse", "-s", "n=64", "--budget", "0.05", "--warmup", "1")
    assert "gpuplay.core.catalogue.planner" in front
    assert "scipy" not in top_level(front)
    assert "scipy.sparse" in engine


def test_a_numpy_sweep_imports_no_torch_in_the_front_end_or_the_engine(tmp_path):
    front, engine = _gpuplay(tmp_path, "sweep", "elementwise", "--over", "n=1000..4000:2", "--backends", "numpy",
                             "--budget", "0.05", "--warmup", "1")  # fmt: skip
    assert "gpuplay.core.runner.measure" in engine
    for side, mods in (("front end", front), ("engine", engine)):
        loaded = sorted(top_level(mods) & {"torch", "cupy", "scipy", "textual"})
        assert not loaded, f"a NumPy-only sweep imported {loaded} in the {side}"
    assert engines_started(tmp_path) == 1  # one engine for every point


def test_a_numpy_compare_uses_one_engine_for_every_row_and_no_torch(tmp_path):
    front, engine = _gpuplay(tmp_path, "compare", "--scenario", "matmul", "--scenario", "elementwise",
                             "--backends", "numpy", "--budget", "0.05")  # fmt: skip
    assert "gpuplay.core.runner.measure" in engine and engines_started(tmp_path) == 1
    for side, mods in (("front end", front), ("engine", engine)):
        loaded = sorted(top_level(mods) & {"torch", "cupy", "scipy", "textual"})
        assert not loaded, f"a NumPy-only compare imported {loaded} in the {side}"


API_CALLS = {
    "run": 'gpuplay.run("matmul", params={"n": 64}, backend="numpy", budget_s=0.05)',
    "compare": 'gpuplay.compare("matmul", backends=["numpy"], preset="quick", budget_s=0.05, progress=False)',
    "sweep": 'gpuplay.sweep("matmul", {"n": [32, 64]}, backends="numpy", budget_s=0.03, progress=False)',
}


@pytest.mark.parametrize("call", sorted(API_CALLS))
def test_numpy_calls_of_the_python_api_import_no_torch_in_the_engine(tmp_path, call):
    """gpuplay.run/compare/sweep ask the engine to probe only the backends they use (issue 34);
    each in a process of its own: the engine's first call decides what it probes."""
    env = {k: v for k, v in os.environ.items() if k not in ("GPUPLAY_IN_PROCESS", "COLUMNS")}
    env.update(PYTHONPROFILEIMPORTTIME="1", GPUPLAY_STATE_DIR=str(tmp_path / "state"),
               GPUPLAY_CONFIG_DIR=str(tmp_path / "config"))  # fmt: skip
    out = subprocess.run([sys.executable, "-c", "import gpuplay\n" + API_CALLS[call]], capture_output=True,
                         text=True, env=env, stdin=subprocess.DEVNULL, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    engine = imported((tmp_path / "state" / "engine.log").read_text())
    assert "gpuplay.core.runner.measure" in engine
    loaded = sorted(top_level(engine) & {"torch", "cupy", "scipy"})
    assert not loaded, f"a NumPy-only gpuplay.{call} imported {loaded} in the engine"


WALK = r"""
import importlib, pkgutil, sys
heavy = set(sys.argv[1].split(","))
for pkg in ("gpuplay.core", "gpuplay.cli", "gpuplay.collectives"):
    for info in pkgutil.walk_packages(importlib.import_module(pkg).__path__, pkg + "."):
        before = set(sys.modules)
        importlib.import_module(info.name)
        new = sorted({n.split(".")[0] for n in set(sys.modules) - before} & heavy)
        if new:
            print(info.name, *new)
"""


@pytest.mark.parametrize("layer", ["gpuplay.core", "gpuplay.cli", "gpuplay.collectives"])
def test_no_module_imports_a_heavy_library_when_imported(layer):
    # One fresh interpreter walks every module; a module is blamed for what its import added.
    heavy = ",".join((*HEAVY, "textual_serve", "aiohttp"))
    out = subprocess.run([sys.executable, "-c", WALK, heavy], capture_output=True, text=True, check=True,
                         timeout=120)  # fmt: skip
    found = {line.split()[0]: set(line.split()[1:]) for line in out.stdout.splitlines()}
    bad = {m: libs - ALLOWED.get(m, set()) for m, libs in found.items() if m.startswith(layer + ".")}
    assert not {m: libs for m, libs in bad.items() if libs}, f"imported at import time: {bad}"


def test_the_importtime_reader_reads_nested_and_top_level_names():
    text = "import time: self [us] | cumulative | imported package\n" \
           "import time:       712 |        712 |     torch._C\nimport time:    -17 |  9 | numpy\n"  # fmt: skip
    assert imported(text) == {"torch._C", "numpy"} and top_level(imported(text)) == {"torch", "numpy"}


def test_the_app_and_the_cli_import_no_runner_before_their_first_frame():
    # The runner (and importlib.metadata, 30 ms) measure in the engine and fill in a result's
    # conditions there: the front end's start-up does without them.
    code = "import sys, gpuplay.cli, gpuplay.tui.app; print(sorted(m for m in sys.modules " \
           "if m.startswith('gpuplay.core.runner') or m == 'importlib.metadata'))"  # fmt: skip
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]"
