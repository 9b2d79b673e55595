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
    from gpuplay.core import energy
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
        "from gpuplay.core.engine.server import warm_runner\n"
        "from gpuplay.core import provenance\n"
        "warm_runner()\n"
        "print(sorted(m for m in ('numpy.random', 'gpuplay.core.energy', 'threadpoolctl', 'torch')"
        " if m in sys.modules), provenance.installed.cache_info().currsize)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    # read once per process, before the request: the versions, the random module, the energy
    # module, BLAS's thread count reader; never torch
    import importlib.util

    wanted = ["gpuplay.core.energy", "numpy.random"]
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
