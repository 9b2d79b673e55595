"""gpuplay's own speed, round 4 (issue 34, row 1: a NumPy run in 0.6 s): what a run no longer does
twice and what the engine does before it is asked. Checked by counts and by what is imported,
never by timing."""

from __future__ import annotations

from gpuplay.core.spec import RunSpec


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


def test_the_engine_does_before_its_first_request_what_every_first_run_paid_after_it():
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from gpuplay.core.engine.server import prime_first_run, warm_runner\n"
        "from gpuplay.core.measure import provenance\n"
        "warm_runner()\n"
        "prime_first_run()\n"
        "print(sorted(m for m in ('numpy.random', 'gpuplay.core.measure.energy', 'threadpoolctl', 'torch')"
        " if m in sys.modules), provenance.installed.cache_info().currsize)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    # read once per process, before the request: the versions, the random module, the energy
    # module, BLAS's thread count reader; never torch
    import importlib.util

    wanted = ["gpuplay.core.measure.energy", "numpy.random"]
    if importlib.util.find_spec("threadpoolctl") is not None:
        wanted.append("threadpoolctl")
    assert out.stdout.split("]")[0] == repr(wanted)[:-1] and out.stdout.split()[-1] == "1"


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


def test_the_engine_primes_its_first_run_after_a_probe_may_answer_and_before_any_request(monkeypatch):
    import threading
    from types import SimpleNamespace

    from gpuplay.core.engine import messages as m
    from gpuplay.core.engine import server

    order: list[str] = []
    engine = server.EngineServer(SimpleNamespace(send_bytes=lambda d: None, close=lambda: None))
    monkeypatch.setattr(server, "warm_runner", lambda: order.append("runner"))
    monkeypatch.setattr(
        server, "prime_first_run", lambda: order.append(f"primed, warmed={engine.warmed.is_set()}")
    )
    monkeypatch.setattr(threading.Thread, "start", lambda self: None)  # no reader: the queue is fed here
    monkeypatch.setattr(engine, "do", lambda job: order.append("request"))
    engine.jobs.put(m.RunRequest(1, RunSpec.make("matmul", {"n": 8}), live=False))
    engine.jobs.put(None)
    engine.serve()
    assert order == ["runner", "primed, warmed=True", "request"]


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
