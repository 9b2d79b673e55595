"""Each library is imported the first time a configuration needs it.

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

from tests.process_helpers import gpuplay_env as _env
from tests.process_helpers import run_python as _python

pytestmark = pytest.mark.plain_children  # what a child imports: coverage in it would import more

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
    assert "numpy" not in top_level(front)  # it plans and prints without NumPy
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
    """gpuplay.run/compare/sweep ask the engine to probe only the backends they use;
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


def test_a_command_imports_its_own_module_and_no_other_subcommand_s(tmp_path):
    import os
    import subprocess
    import sys

    from gpuplay.cli import COMMAND_MODULES

    code = (
        "import sys\n"
        "from gpuplay.cli import main\n"
        "main(['run', 'matmul', '-s', 'n=64', '--budget', '0.02', '--warmup', '1', '--format', 'csv'],"
        " standalone_mode=False)\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('gpuplay.cli.'))))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env.update(GPUPLAY_STATE_DIR=str(tmp_path / "state"), GPUPLAY_CONFIG_DIR=str(tmp_path / "config"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         stdin=subprocess.DEVNULL, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    loaded = set(out.stdout.splitlines()[-1].split())
    assert "gpuplay.cli.run" in loaded
    others = {f"gpuplay.cli.{m}" for name, m in COMMAND_MODULES.items() if name != "run"}
    assert not others & loaded, sorted(others & loaded)


def test_every_subcommand_is_named_where_its_module_is():
    from gpuplay.cli import COMMAND_MODULES, main

    found = {name: cmd.callback.__module__ for name, cmd in main.commands.items()}
    assert found == {name: f"gpuplay.cli.{m}" for name, m in COMMAND_MODULES.items()}


def test_a_numpy_run_s_front_end_plans_and_prints_without_importing_numpy(tmp_path):
    import os
    import re
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("GPUPLAY_IN_PROCESS", "COLUMNS", "GPUPLAY_TRACE")}
    env.update(GPUPLAY_STATE_DIR=str(tmp_path / "state"), GPUPLAY_CONFIG_DIR=str(tmp_path / "config"),
               PYTHONPROFILEIMPORTTIME="1")  # fmt: skip
    args = ("run", "matmul", "-s", "n=64", "--budget", "0.05", "--warmup", "1")
    out = subprocess.run([sys.executable, "-m", "gpuplay", *args], capture_output=True, text=True, env=env,
                         stdin=subprocess.DEVNULL, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert "64×64" in out.stdout  # the result, planned, measured (by the engine) and printed
    front = {x[1] for line in out.stderr.splitlines() if (x := re.match(r"^import time:.*\| *(\S+)$", line))}
    assert "gpuplay.core.catalogue.planner" in front and "gpuplay.core.workloads.linalg" in front
    assert "numpy" not in front  # the engine measures with it; the front end only plans and prints
    assert "torch" not in front


def test_numpy_is_imported_at_a_module_s_first_use_and_then_is_numpy_itself():
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from gpuplay.core.workloads import base\n"
        "from gpuplay.core.workloads import registry\n"
        "registry()\n"
        "print('numpy' in sys.modules)\n"
        "w = registry()['matmul']\n"
        "import numpy\n"
        "a, b = w.inputs({'n': 4}, numpy.random.default_rng(0))\n"
        "before = base.np is numpy\n"
        "error = base.relative_error(w.reference({'n': 4}, (a, b)), a @ b)\n"
        "print(before, base.np is numpy)\n"
        "print(error == 0.0)\n"
        "from gpuplay.core.backends import get_backend\n"
        "print(get_backend('numpy').module() is numpy)\n"
        "print(base.EPS['float64'] == numpy.finfo(numpy.float64).eps, "
        "base.EPS['float32'] == numpy.finfo(numpy.float32).eps, "
        "base.EPS['float16'] == numpy.finfo(numpy.float16).eps)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.split("\n")
    assert lines[0] == "False"  # every workload registered, no NumPy
    assert lines[1] == "False True"  # a stand-in until base's first use, NumPy itself there after
    # a step's array module is NumPy itself from its first call (no stand-in inside timed steps)
    assert lines[2] == "True" and lines[3] == "True" and lines[4] == "True True True"


def test_the_engine_s_runner_names_user_code_errors_without_importing_the_loader():
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from gpuplay.core.engine.server import prime_first_run, warm_runner\n"
        "warm_runner()\n"
        "prime_first_run()\n"
        "from gpuplay.core.runner import measure, paired\n"
        "loaded = 'gpuplay.core.workloads.usercode' in sys.modules\n"
        "from gpuplay.core.workloads import usercode\n"  # the loader's names are the same classes
        "print(loaded,"
        " measure.UserCodeError is usercode.UserCodeError is paired.UserCodeError)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["False", "True"]


def test_the_workload_table_names_every_module_s_workloads_in_order():
    import importlib
    import pkgutil

    import gpuplay.core.workloads as pkg
    from gpuplay.core.workloads import WORKLOAD_MODULES, registry

    found: dict[str, str] = {}
    for info in pkgutil.iter_modules(pkg.__path__):
        module = importlib.import_module(f"gpuplay.core.workloads.{info.name}")
        for cls in getattr(module, "WORKLOADS", ()):
            assert cls.name not in found, f"{cls.name} defined twice"
            found[cls.name] = info.name
    assert found == WORKLOAD_MODULES  # every workload there is, each where the table says
    assert list(registry()) == list(WORKLOAD_MODULES)
    assert all(type(w).__module__.endswith(WORKLOAD_MODULES[n]) for n, w in registry().items())


def test_the_engine_imports_the_workload_it_measures_and_no_other():
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from gpuplay.core.engine.server import prime_first_run, warm_runner\n"
        "warm_runner()\n"
        "prime_first_run()\n"
        "from gpuplay.core.runner import run\n"
        "from gpuplay.core.spec import RunSpec\n"
        "r = run(RunSpec.make('matmul', {'n': 32}, budget_s=0.01, warmup=1))\n"
        "print(r.status, sorted(m.rsplit('.', 1)[1] for m in sys.modules"
        " if m.startswith('gpuplay.core.workloads.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split(" ", 1) == ["ok", "['base', 'linalg', 'tolerance', 'usercode_errors']\n"]


def test_the_entry_spawns_the_engine_without_importing_config(tmp_path):
    # The early engine's spawn needs the engine log's folder; core.config (tomllib, dataclasses,
    # platformdirs) is imported by the front end after the spawn, not before it.
    code = (
        "import sys\n"
        "from gpuplay.core.engine import process\n"
        "path = process.engine_log_path()\n"
        "print(path.parent.is_dir(), path.name)\n"
        "print([m for m in ('gpuplay.core.storage.config', 'tomllib', 'platformdirs') if m in sys.modules])\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("GPUPLAY_STATE_DIR", "XDG_STATE_HOME")}
    env["HOME"] = str(tmp_path)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[:2] == ["True engine.log", "[]"]
    assert (tmp_path / ".local" / "state" / "gpuplay").is_dir()


def test_the_entry_imports_neither_config_nor_typing_before_it_spawns_the_engine(tmp_path):
    # What `gpuplay run ...` imports before the early spawn is the engine's head start lost.
    code = (
        "import sys\n"
        "sys.argv = ['/venv/bin/gpuplay', 'run', 'matmul', '-p', 'quick']\n"
        "from gpuplay.core.engine import process\n"
        "seen = []\n"
        "def spawn(env=None):\n"
        "    seen.append('spawn')\n"
        "    seen.extend(m for m in ('gpuplay.core.storage.config', 'typing', 'click', 'numpy') if m in sys.modules)\n"
        "    raise OSError('not here')\n"
        "process.spawn = spawn\n"
        "import gpuplay.cli\n"
        "print(process._early is None, seen)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("GPUPLAY_STATE_DIR", "XDG_STATE_HOME")}
    env["HOME"] = str(tmp_path)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[0] == "True ['spawn']"


def test_a_numpy_run_s_engine_imports_no_other_vendor_s_glue():
    # Telemetry's AMD, Intel and Apple glue (core/hw/devices) is imported where such a device asks.
    code = (
        "import sys\n"
        "from gpuplay.core.engine import server\n"
        "server.warm_numpy_probe(); server.warm_runner(); server.prime_first_run()\n"
        "window = server._run_telemetry().begin('cpu')\n"
        "print(window.vendor is None, [m for m in ('gpuplay.core.hw.devices', 'gpuplay.core.hw.amd',"
        " 'gpuplay.core.hw.intel', 'gpuplay.core.hw.apple') if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[0] == "True []"


# -- the front end's end ---------------------------------------------------------------------


# -- the engine's start ----------------------------------------------------------------------
def test_a_numpy_run_in_the_engine_reads_no_metadata_config_or_other_vendor_s_glue():
    out = _python("""
        import sys
        from gpuplay.core.engine.devicelock import measure_exclusively
        from gpuplay.core.engine import server
        server.warm_numpy_probe(); server.warm_runner(); server.prime_first_run()
        from gpuplay.core.runner import run
        from gpuplay.core.spec import RunSpec
        spec = RunSpec.make("matmul", {"n": 64}, budget_s=0.03, warmup=1)
        r = measure_exclusively(spec, lambda: run(spec, telemetry=server._run_telemetry()), None,
                                lambda *a: None)
        print(sorted(m for m in ("importlib.metadata", "gpuplay.core.storage.config", "tomllib", "platformdirs",
                                 "multiprocessing", "gpuplay.core.hw.amd", "gpuplay.core.hw.apple",
                                 "torch") if m in sys.modules))
        from importlib import metadata  # the test's own import, after the run
        v = r.conditions["versions"]
        print(r.status, r.check_ok, v["numpy"] == metadata.version("numpy"),
              v.get("torch") == (metadata.version("torch") if "torch" in {d.metadata["Name"] for d in
                                 metadata.distributions()} else None))
    """)
    assert out.returncode == 0, out.stderr[-2000:]
    modules, figures = out.stdout.splitlines()[-2:]
    assert modules == "[]"
    assert (
        figures == "ok True True True"
    )  # the installed versions, torch's too, read without importlib.metadata


def test_a_numpy_run_s_front_end_imports_no_psutil_multiprocessing_or_live_display(tmp_path):
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "gpuplay", "run", "matmul", "-s", "n=64",
                          "--budget", "0.02"], capture_output=True, text=True, timeout=120,
                         env=_env(tmp_path))  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    imported = {
        line.split("|")[-1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")
    }
    assert "numpy" not in imported  # the front end's own imports only (the engine's are not on this stderr)
    assert not imported & {"psutil", "multiprocessing", "rich.live", "rich.status", "gpuplay.core.hw.amd"}
