"""A NumPy run's engine imports no psutil (~7-14 ms of its start).

On Linux the run's window reads what it needs from /proc as psutil reads it (core/measure/noise.py: the
machine's CPU times, boot time, core count, this process's CPU; core/measure/telemetry.py: its memory;
the device lock's command line; the preflight's available memory). Those readings must be psutil's.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from gpuplay.core.engine import devicelock
from gpuplay.core.measure import noise, telemetry
from gpuplay.core.runner import preflight

linux_proc = pytest.mark.skipif(
    not (sys.platform.startswith("linux") and os.path.isfile("/proc/stat")),
    reason="psutil answers without /proc",
)


@linux_proc
def test_a_numpy_run_in_the_engine_imports_no_psutil_and_still_measures_the_host():
    code = """
        import sys
        from gpuplay.core.engine.devicelock import measure_exclusively
        from gpuplay.core.engine import server
        server.warm_numpy_probe(); server.warm_runner(); server.prime_first_run()
        from gpuplay.core.runner import run
        from gpuplay.core.spec import RunSpec
        # 0.3 s of steps: the process's CPU is counted in clock ticks (10 ms), and a 30 ms window
        # on a loaded 2-core machine once read no tick of its own (own_cores 0)
        spec = RunSpec.make("matmul", {"n": 64}, budget_s=0.3, warmup=1)
        r = measure_exclusively(spec, lambda: run(spec, telemetry=server._run_telemetry()), None,
                                lambda *a: None)
        print("psutil" in sys.modules)
        host, t = r.telemetry["noise"]["host"], r.telemetry
        print(r.status, host["cores"] == __import__("os").sysconf("SC_NPROCESSORS_ONLN"),
              host["other_cores"] >= 0, host["steal_cores"] >= 0, host["own_cores"] > 0,
              t["process_rss_bytes"] > 2**20, 0 <= t["host_cpu_mean_percent"] <= 100.0 + 1e-6)
    """
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    imported, figures = out.stdout.splitlines()[-2:]
    assert imported == "False"
    assert figures == "ok True True True True True True"


@linux_proc
def test_the_proc_readings_are_psutil_s_own():
    import psutil

    hz = os.sysconf("SC_CLK_TCK")
    tick = 1.0 / hz
    before, theirs, after = noise.proc_cpu_times(), psutil.cpu_times(), noise.proc_cpu_times()
    assert before._fields == theirs._fields  # psutil's names, in psutil's order
    for name in theirs._fields:  # read between ours: within a few ticks (iowait may step back)
        lo, hi = (
            min(getattr(before, name), getattr(after, name)),
            max(getattr(before, name), getattr(after, name)),
        )
        assert lo - 3 * tick <= getattr(theirs, name) <= hi + 3 * tick, name
    assert noise.proc_boot_time() == psutil.boot_time()
    assert noise.proc_cpu_count() == psutil.cpu_count()
    me = psutil.Process()
    before_own = noise.own_cpu_seconds()
    ct = me.cpu_times()
    after_own = noise.own_cpu_seconds()
    assert before_own - tick <= ct.user + ct.system <= after_own + tick
    rss = telemetry._own_rss()
    assert rss is not None and abs(rss - me.memory_info().rss) <= 2**20
    avail, total = preflight._proc_memory_available(), psutil.virtual_memory().total
    assert avail is not None and abs(avail - psutil.virtual_memory().available) <= total // 100
    assert devicelock._proc_cmdline(os.getpid()) == me.cmdline()
    assert devicelock._proc_cmdline(os.getppid()) == psutil.Process(os.getppid()).cmdline()


@linux_proc
def test_a_proc_stat_that_cannot_be_read_leaves_the_window_to_psutil(monkeypatch):
    import psutil

    def unreadable(*_a, **_k):
        raise PermissionError("/proc/stat")

    monkeypatch.setattr(noise, "_proc_host", True)
    monkeypatch.setattr(noise, "open", unreadable, raising=False)
    monkeypatch.setattr(noise, "_me", None)
    cpu, _own = noise._read_machine()
    assert type(cpu) is type(psutil.cpu_times()) and noise._proc_host is False  # psutil's from now on
    monkeypatch.setattr(noise, "_proc_host", True)
    mark = noise.host_mark()
    assert mark is not None and type(mark.cpu) is type(psutil.cpu_times())  # psutil's own
    assert noise._proc_host is False and not noise.reads_proc(noise.psutil)


def test_a_fake_psutil_is_read_instead_of_proc(monkeypatch):
    fake = object()
    assert not noise.reads_proc(fake)
    monkeypatch.setattr(noise, "_proc_host", True)
    assert noise.reads_proc(noise.NotImported()) and noise.reads_proc(sys.modules.get("psutil"))


@linux_proc
def test_a_proc_stat_without_btime_and_no_psutil_names_nobody_rather_than_failing(monkeypatch):
    monkeypatch.setattr(noise, "_proc_host", True)
    monkeypatch.setattr(noise, "psutil", None)  # not installed
    monkeypatch.setitem(sys.modules, "psutil", None)
    monkeypatch.setattr(noise, "_boot", None)
    monkeypatch.setattr(noise, "proc_boot_time", lambda: (_ for _ in ()).throw(OSError("no btime")))
    assert noise.process_cpu_seconds(os.getpid()) == {}
