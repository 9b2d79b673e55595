"""Noise called out: other processes' CPU, steal, GPU neighbours and throttling, unstable spreads."""

from __future__ import annotations

import builtins  # noqa: E402
import contextlib
import io  # noqa: E402
import os
import re
import subprocess
import sys
import textwrap
import time
from types import SimpleNamespace

import psutil
import pytest

from gpuplay.core.measure import noise
from gpuplay.core.result import RunResult
from gpuplay.core.spec import RunSpec
from gpuplay.core.storage import installed


@pytest.fixture(autouse=True)
def _no_listing_from_an_earlier_test(monkeypatch):
    # A window's start takes the last end's listing when it is <= REUSE_LISTING_S old: an earlier
    # test's last window must not be one this test's first window takes over.
    monkeypatch.setattr(noise, "_end_listing", None)
    # nor an earlier real listing's names: a fake psutil's pid 42 is "make", the machine's may be
    # a kernel thread whose stat line an earlier test read
    monkeypatch.setattr(noise, "_stat_files", None)


def host(other: float, cores: int = 2, own: float = 1.0, steal: float = 0.0, top=()) -> dict:
    return {
        "window_s": 1.0,
        "cores": cores,
        "own_cores": own,
        "other_cores": other,
        "other_top": list(top),
        "steal_cores": steal,
    }


def test_a_quiet_machine_earns_no_warning():
    assert noise.host_warnings(host(0.1)) == []
    assert noise.host_warnings(None) == []


def test_another_process_is_named_with_its_cores():
    (w,) = noise.host_warnings(host(1.3, top=[{"name": "make", "pid": 42, "cores": 1.2}]))
    assert w.startswith("other processes used 1.3 cores of 2 during this run")
    assert "make (pid 42) 1.2" in w and "this run used 1.0 core" in w


def test_a_few_clock_ticks_in_a_short_window_are_not_a_warning():
    short = host(1.0)
    short["window_s"] = 0.02  # two 10 ms ticks would read as a whole core
    assert noise.host_warnings(short) == []


def test_big_machines_tolerate_a_little_background():
    assert noise.host_warnings(host(1.0, cores=64)) == []  # under 5 % of 64 cores
    assert noise.host_warnings(host(4.0, cores=64))


def test_steal_time_is_called_out():
    assert any("hypervisor took 0.5 cores" in w for w in noise.host_warnings(host(0.0, steal=0.5)))


def test_gpu_throttling_and_neighbours_in_words():
    gpu = {
        "index": 0,
        "other_processes": [{"pid": 7, "name": "trainer", "mem_bytes": 3 * 2**30}],
        "other_sm_util_percent": 55,
        "throttled_fraction": {"power": 0.4, "thermal": 0.0},
    }
    ws = noise.gpu_warnings(gpu)
    assert "GPU power-throttled during 40 % of the run" in ws
    assert any("1 other process(es) on GPU 0" in w and "trainer 3.0 GiB" in w and "55%" in w for w in ws)
    assert not any("thermal" in w for w in ws)


def test_unstable_spread_is_flagged_with_advice_like_pyperf():
    assert noise.stability(0.05, 20) == ""
    assert noise.stability(0.5, 3) == ""  # too few steps to judge
    assert noise.stability(0.23, 20).startswith(
        "unstable: the middle half of the step times spans 23 % of their median"
    )
    ws = noise.noise_warnings({}, 0.23, 20, min_step_s=1e-4)
    assert len(ws) == 1 and "rerun" in ws[0] and "larger size" in ws[0]


def test_result_carries_noise_in_its_dict():
    spec = RunSpec.make("matmul", {"n": 64})
    r = RunResult(spec=spec, samples=[1.0, 1.0, 2.0, 3.0, 1.0, 1.0], flops=1.0, bytes=1.0)
    r.telemetry = {"noise": {"host": host(1.5, top=[{"name": "x", "pid": 1, "cores": 1.5}]), "gpu": None}}
    d = r.to_dict()
    assert d["unstable"] is True
    assert any("other processes used 1.5 cores" in w for w in d["noise_warnings"])
    assert RunResult.from_dict(d).noise_warnings == d["noise_warnings"]


OTHER_PID = os.getppid()


class FakeNVML:
    """The telemetry module's NVML wrapper at its boundary: a GPU power-capped 40 % of the time,
    with another process on it, whose board samples throttle reasons but has no thermal counter."""

    def __init__(self) -> None:
        self.violation = {0: 0}
        self.ref_us = 1_000_000

    def call(self, name, *args):
        if name == "nvmlDeviceGetHandleByIndex":
            return "h"
        if name == "nvmlDeviceGetViolationStatus":
            policy = args[1]
            if policy != 0:
                return None  # not supported for thermal on this board
            return SimpleNamespace(referenceTime=self.ref_us, violationTime=self.violation[0])
        if name == "nvmlDeviceGetComputeRunningProcesses":
            # another process of this PID namespace (one NVML lists must be visible here)
            return [SimpleNamespace(pid=OTHER_PID, usedGpuMemory=2**30)]
        if name == "nvmlDeviceGetGraphicsRunningProcesses":
            return []
        if name == "nvmlDeviceGetProcessUtilization":
            return [SimpleNamespace(pid=OTHER_PID, smUtil=30)]
        return None

    def advance(self, seconds: float, throttled: float) -> None:
        self.ref_us += int(seconds * 1e6)
        self.violation[0] += int(seconds * throttled * 1e9)


def test_gpu_noise_from_violation_counters_and_sampled_reasons():
    nv = FakeNVML()
    a = noise.gpu_mark(nv, 0)
    nv.advance(2.0, 0.4)
    b = noise.gpu_mark(nv, 0)
    hot = 0x40  # hardware thermal slowdown bit
    samples = [
        SimpleNamespace(throttle_reasons=hot, sm_clock_mhz=1500, sm_clock_max_mhz=1980),
        SimpleNamespace(throttle_reasons=0, sm_clock_mhz=1900, sm_clock_max_mhz=1980),
        SimpleNamespace(throttle_reasons=0, sm_clock_mhz=1900, sm_clock_max_mhz=1980),
        SimpleNamespace(throttle_reasons=0, sm_clock_mhz=1900, sm_clock_max_mhz=1980),
    ]
    g = noise.gpu_noise(nv, 0, a, b, samples)
    assert g["throttled_fraction"]["power"] == pytest.approx(0.4)
    assert g["throttle_source"]["power"] == "NVML violation counter"
    assert g["throttled_fraction"]["thermal"] == pytest.approx(0.25)  # 1 of 4 samples
    assert g["sm_clock_mhz"] == {"min": 1500, "mean": 1800.0, "max": 1900} and g["sm_clock_max_mhz"] == 1980
    assert g["other_processes"][0]["pid"] == OTHER_PID and g["other_sm_util_percent"] == 30
    ws = noise.gpu_warnings(g)
    assert "GPU power-throttled during 40 % of the run" in ws
    assert "GPU thermal-throttled during 25 % of the run" in ws


class FakePsutil:
    """psutil's documented calls that noise uses: cpu_times(), Process(), process_iter(attrs), cpu_count()."""

    Error = Exception

    def __init__(self) -> None:
        self.busy = 100.0  # the machine's busy CPU seconds (user)
        self.own = 1.0  # this process's
        self.make = 5.0  # another process's (pid 42, named "make")
        self.listings = 0

    def cpu_times(self):
        return SimpleNamespace(user=self.busy, system=0.0)

    def cpu_count(self):
        return 2

    def Process(self, pid=None):  # noqa: N802 - psutil's name
        fake = self
        pid = os.getpid() if pid is None else pid
        return SimpleNamespace(pid=pid, name=lambda: "make" if pid == 42 else "python",
                               cpu_times=lambda: SimpleNamespace(user=fake.own, system=0.0))  # fmt: skip

    def process_iter(self, attrs):
        self.listings += 1
        for pid, secs in ((os.getpid(), self.own), (42, self.make)):
            yield SimpleNamespace(pid=pid, info={"cpu_times": SimpleNamespace(user=secs, system=0.0),
                                                 "create_time": 1.0})  # fmt: skip


def test_processes_are_listed_only_when_the_machine_was_not_just_seen_quiet(monkeypatch):
    """The per-process listing (5-10 ms each end) is skipped after a quiet look back, and comes back
    as soon as a window finds the machine busy; the busy window's total is reported all the same."""
    fake = FakePsutil()
    monkeypatch.setattr(noise, "psutil", fake)
    monkeypatch.setattr(noise, "_last", None)
    monkeypatch.setattr(noise, "_me", None)

    def window(other_s: float, quiet_before: bool) -> dict:
        if quiet_before:
            time.sleep(noise.QUIET_LOOKBACK_S + 0.02)  # a look back long enough to tell: nothing ran
        a = noise.host_mark()
        time.sleep(0.2)
        fake.busy += other_s + 0.2
        fake.own += 0.2
        fake.make += other_s
        return noise.host_noise(a, noise.host_mark(a))

    first = window(0.0, quiet_before=False)  # nothing known yet: listed
    assert fake.listings == 2 and first["other_listed"] and noise.host_warnings(first) == []
    quiet = window(0.0, quiet_before=True)
    assert fake.listings == 2 and not quiet["other_listed"]  # the common case: no listing at all
    busy = window(0.4, quiet_before=True)  # quiet before, busy during: the total, unnamed
    assert fake.listings == 2 and busy["other_cores"] > 0.5 and busy["other_top"] == []
    (w,) = noise.host_warnings(busy)
    assert "other processes used" in w and "not named: it was quiet just before" in w
    named = window(0.4, quiet_before=False)  # right after a busy window: listed, and named
    assert fake.listings == 4 and named["other_listed"]
    assert named["other_top"][0]["name"] == "make" and named["other_top"][0]["cores"] > 0.5
    (w,) = noise.host_warnings(named)
    assert "make (pid 42)" in w and "not named" not in w


def test_a_window_right_after_a_listed_one_takes_its_end_listing_as_its_start(monkeypatch):
    """A sweep's next point starts ~10 ms after the last one's end: its start takes that end's
    listing instead of listing again (one listing a window, not two), and the named processes'
    figures are divided by the span they were read over (from that listing), never the window's
    alone; a window that starts later than REUSE_LISTING_S after it lists afresh."""
    fake = FakePsutil()
    monkeypatch.setattr(noise, "psutil", fake)
    monkeypatch.setattr(noise, "_last", None)
    monkeypatch.setattr(noise, "_me", None)
    monkeypatch.setattr(noise, "_end_listing", None)
    clock = [1000.0]
    monkeypatch.setattr(noise.time, "monotonic", lambda: clock[0])

    def window(gap_s: float, make_between: float, make_during: float) -> dict:
        clock[0] += gap_s
        fake.make += make_between  # ran between the last window's end and this one's start
        a = noise.host_mark()
        clock[0] += 0.1
        fake.busy += make_during + 0.1
        fake.own += 0.1
        fake.make += make_during
        return noise.host_noise(a, noise.host_mark(a))

    first = window(0.0, 0.0, 0.05)  # nothing known yet: listed at both ends
    assert fake.listings == 2
    assert first["other_top"][0]["cores"] == pytest.approx(0.5)
    second = window(0.01, 0.01, 0.05)  # 10 ms later: one listing, at its end
    assert fake.listings == 3 and second["other_listed"] and second["window_s"] == pytest.approx(0.1)
    # make's 0.06 s since the last listing, over the 0.11 s it spans: not 0.06 / 0.1
    assert second["other_top"][0]["cores"] == pytest.approx(0.06 / 0.11)
    late = window(noise.REUSE_LISTING_S + 0.01, 0.01, 0.05)  # too long after: listed afresh
    assert fake.listings == 5 and late["other_top"][0]["cores"] == pytest.approx(0.5)
    # each result says the span its names were read over
    assert [w.get("listed_s") for w in (first, second, late)] == pytest.approx([0.1, 0.11, 0.1])


NAMED = """
import ctypes, sys
ctypes.CDLL(None).prctl(15, sys.argv[1].encode(), 0, 0, 0)  # PR_SET_NAME
print("named", flush=True)
sys.stdin.read()
"""


@pytest.mark.skipif(not os.path.isfile("/proc/self/stat"), reason="names from /proc/PID/stat")
def test_a_busy_windows_names_come_from_its_listing_as_psutil_gives_them(monkeypatch, tmp_path):
    """The processes a busy window names are named from the listing's own stat lines (no more
    /proc reads, ~0.1 ms each a point), the very names psutil gives: spaces and parentheses kept,
    and a name the kernel cut at 15 bytes completed from the command line as psutil does, without
    psutil (a busy machine's long name made a NumPy run's engine import it)."""
    long_exe = tmp_path / "a-python-with-a-long-name"
    long_exe.symlink_to(sys.executable)
    names = ["a (b) c)", "x" * 15, long_exe.name[:15]]
    kids = [subprocess.Popen([sys.executable if i < 2 else str(long_exe), "-c", NAMED, n], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE) for i, n in enumerate(names)]  # fmt: skip
    try:
        for kid in kids:
            assert kid.stdout is not None and kid.stdout.readline().strip() == b"named"
        noise.process_cpu_seconds(os.getpid())  # a listing
        asked = []
        real = psutil.Process

        def counted(pid=None):
            asked.append(pid)
            return real(pid)

        # the listing itself reads no psutil on Linux: the names' fallback imports it
        monkeypatch.setattr(noise._psutil(), "Process", counted)
        assert noise._name(kids[0].pid) == "a (b) c)" == real(kids[0].pid).name() and asked == []
        # cut by the kernel: psutil's answer, completed from the command line, without psutil
        assert noise._name(kids[1].pid) == real(kids[1].pid).name() == "x" * 15 and asked == []
        assert noise._name(kids[2].pid) == real(kids[2].pid).name() == long_exe.name and asked == []
        for pid in list(noise._stat_files.comm)[:20]:
            with contextlib.suppress(psutil.Error):
                assert noise._name(pid) == real(pid).name()
    finally:
        for kid in kids:
            kid.kill()
            kid.wait(5)


def test_a_run_with_helper_processes_lists_them_even_after_a_quiet_look(monkeypatch):
    """A loader's workers count as the run's own only when named, so a window whose run names
    helper PIDs lists every process even when the machine was just seen quiet: unlisted, their CPU
    would read as another process's (and fire the noise warning on every dataloader run)."""
    from gpuplay.core.measure.telemetry import RunTelemetry

    fake = FakePsutil()
    monkeypatch.setattr(noise, "psutil", fake)
    monkeypatch.setattr(noise, "_last", None)
    monkeypatch.setattr(noise, "_me", None)
    noise.host_mark()  # a first look, then a quiet look back
    time.sleep(noise.QUIET_LOOKBACK_S + 0.02)
    listings = fake.listings
    tele = RunTelemetry()
    token = tele.begin("cpu", own_pids=[42])  # pid 42 ("make" in the fake) is the run's helper
    time.sleep(0.2)
    fake.busy += 0.6
    fake.own += 0.2
    fake.make += 0.4
    host = tele.end(token)["noise"]["host"]
    assert fake.listings == listings + 2 and host["other_listed"]
    assert host["own_helper_cores"] > 1.5 and host["other_top"] == [] and noise.host_warnings(host) == []


BURNER = """
import ctypes, sys
ctypes.CDLL(None).prctl(15, b"cpuburner", 0, 0, 0)  # PR_SET_NAME: what psutil reports as its name
print("burning", flush=True)
while True:
    pass
"""


@pytest.mark.slow
def test_a_cpu_burner_during_a_real_run_is_named_with_about_one_core(monkeypatch):
    # A fresh look: the window's start lists every process unless the machine was *just* seen quiet
    # (an earlier test's window ending < 0.1 s before would otherwise stand for the look back).
    monkeypatch.setattr(noise, "_last", None)
    from gpuplay.core.measure.telemetry import RunTelemetry
    from gpuplay.core.runner import run

    class Witness(RunTelemetry):
        """Also reads the burner's own CPU time over the same window, to check the attribution."""

        def begin(self, device):
            token = super().begin(device)
            self.cpu0 = sum(psutil.Process(burner.pid).cpu_times()[:2])
            return token

        def end(self, token):
            self.burned = sum(psutil.Process(burner.pid).cpu_times()[:2]) - self.cpu0
            return super().end(token)

    burner = subprocess.Popen([sys.executable, "-c", BURNER], stdout=subprocess.PIPE, text=True)
    try:
        with contextlib.suppress(OSError):
            # Tests run under `nice`; the burner competes like an ordinary program would.
            os.setpriority(os.PRIO_PROCESS, burner.pid, 0)
        assert burner.stdout is not None and burner.stdout.readline().strip() == "burning"
        time.sleep(0.2)
        spec = RunSpec.make("matmul", {"n": 128}, budget_s=2.0, threads=1)
        witness = Witness()
        r = run(spec, telemetry=witness)
    finally:
        burner.kill()
        burner.wait(5)
    assert r.status == "ok", r.message
    host_noise = r.telemetry["noise"]["host"]
    burned = witness.burned / host_noise["window_s"]
    top = {p["name"]: p["cores"] for p in host_noise["other_top"]}
    assert top.get("cpuburner") == pytest.approx(burned, abs=0.05), host_noise
    assert host_noise["other_cores"] >= burned - 0.05
    (w,) = [w for w in r.noise_warnings if w.startswith("other processes used")]
    if host_noise["other_cores"] - burned < 0.3:
        # A machine with a core to spare: the burner takes about one, and the warning names it.
        m = re.search(r"cpuburner \(pid \d+\) (\d\.\d)", w)
        assert m and 0.8 <= float(m.group(1)) <= 1.1, w
        assert re.match(r"other processes used (0\.9|1\.\d) cores? of", w), w
    else:  # a crowded machine (other tests running): the burner got less, and is counted as such
        assert float(re.match(r"other processes used (\d\.\d)", w).group(1)) >= round(burned, 1) - 0.1, w


class BusyGPU:
    """pynvml at the library boundary (see test_telemetry.FakeNVML): a GPU shared with another
    process, power-capped for 30 % of each interval by its violation counter, whose clock-event
    reasons say power cap (0x4)."""

    def __new__(cls):
        from tests.unit.test_telemetry import FakeNVML

        class Fake(FakeNVML):
            def __init__(self):
                super().__init__()
                self.ref_us, self.viol_ns = 5_000_000, 0

            def nvmlDeviceGetViolationStatus(self, h, policy):
                if policy != 0:
                    raise self.NVMLError_NotSupported("Not Supported")
                self.ref_us += 1_000_000  # one second between reads, 30 % of it capped
                self.viol_ns += 300_000_000
                return SimpleNamespace(referenceTime=self.ref_us, violationTime=self.viol_ns)

            def nvmlDeviceGetCurrentClocksEventReasons(self, h):
                return 0x4

            def nvmlDeviceGetComputeRunningProcesses(self, h):
                return [
                    SimpleNamespace(pid=os.getpid(), usedGpuMemory=2**30),
                    SimpleNamespace(pid=os.getppid(), usedGpuMemory=5 * 2**30),
                ]

        return Fake()


def test_gpu_noise_flows_from_nvml_through_the_run_window_to_words(monkeypatch):
    from gpuplay.core.measure import telemetry

    state = telemetry._NVML()
    state._tried, state._pynvml = True, BusyGPU()
    monkeypatch.setattr(telemetry, "nvml", state)
    monkeypatch.setattr(
        telemetry, "nvml_handle_for_cuda_device", lambda d: telemetry.NvmlTarget(0, 0, "GPU-0", "h")
    )
    tele = telemetry.RunTelemetry()
    out = tele.end(tele.begin("cuda:0"))
    g = out["noise"]["gpu"]
    assert g["throttled_fraction"]["power"] == pytest.approx(0.3)
    assert g["throttle_source"]["power"] == "NVML violation counter"
    assert g["throttled_fraction"]["thermal"] == 0.0  # no counter: from the sampled reasons
    assert [p["pid"] for p in g["other_processes"]] == [os.getppid()]
    assert g["sm_clock_mhz"]["max"] == 1980
    spec = RunSpec.make("matmul", {"n": 64}, backend="torch", device="cuda:0")
    r = RunResult(spec=spec, samples=[1.0] * 8, flops=1.0, bytes=1.0, telemetry=out)
    ws = r.noise_warnings
    assert "GPU power-throttled during 30 % of the run" in ws
    assert any(w.startswith("1 other process(es) on GPU 0") and "5.0 GiB" in w for w in ws)


@pytest.fixture
def fresh_lookups_and_path(monkeypatch):
    installed.version.cache_clear()
    installed._metadata_folders.cache_clear()
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield
    installed.version.cache_clear()
    installed._metadata_folders.cache_clear()


def _proc_stat_without_btime(monkeypatch) -> None:
    """noise reads a /proc/stat holding this machine's cpu line and nothing else (a container's)."""
    with open("/proc/stat", "rb") as f:
        cpu_line = f.readline()

    def no_btime(path, *a, **k):
        if path == "/proc/stat":
            return io.BytesIO(cpu_line)
        return builtins.open(path, *a, **k)

    monkeypatch.setattr(noise, "open", no_btime, raising=False)


@pytest.mark.usefixtures("fresh_lookups_and_path")
@pytest.mark.skipif(not os.path.isfile("/proc/stat"), reason="Linux /proc")
def test_a_proc_stat_without_btime_and_no_psutil_still_measures_the_window(monkeypatch):
    """A container's /proc/stat with its cpu line but no btime (12f5943: "names nobody instead of
    failing the window"): the window's start reads /proc, the listing finds no btime, and the end
    must still read the machine's CPU times from /proc, which has not failed."""
    _proc_stat_without_btime(monkeypatch)
    monkeypatch.setattr(noise, "_proc_host", True)
    monkeypatch.setattr(noise, "psutil", None)  # not installed
    monkeypatch.setitem(sys.modules, "psutil", None)
    monkeypatch.setattr(noise, "_boot", None)
    monkeypatch.setattr(noise, "_end_listing", None)
    a = noise.host_mark(listing=True)
    assert a is not None
    b = noise.host_mark(a)
    assert b is not None  # proc_boot_time must not turn /proc off for the cpu line too
    assert noise.host_noise(a, b).get("cores")


@pytest.mark.usefixtures("fresh_lookups_and_path")
@pytest.mark.skipif(not os.path.isfile("/proc/stat"), reason="Linux /proc")
def test_a_proc_stat_without_btime_with_psutil_installed_names_nobody_rather_than_failing(monkeypatch):
    """The same /proc/stat with psutil installed: psutil.boot_time() raises RuntimeError ("line
    'btime' not found"), which escaped host_mark and failed the run's window."""
    psutil = pytest.importorskip("psutil")
    _proc_stat_without_btime(monkeypatch)

    def psutil_boot_time():
        raise RuntimeError("line 'btime' not found in /proc/stat")

    monkeypatch.setattr(psutil, "boot_time", psutil_boot_time)
    monkeypatch.setattr(noise, "_proc_host", True)
    monkeypatch.setattr(noise, "psutil", psutil)
    monkeypatch.setattr(noise, "_boot", None)
    monkeypatch.setattr(noise, "_end_listing", None)
    a = noise.host_mark(listing=True)  # psutil's RuntimeError must not escape
    b = noise.host_mark(a)
    assert a is not None and b is not None and a.procs == {} and noise.host_noise(a, b).get("cores")


def _stopped_child(tmp_path, name: str) -> subprocess.Popen[bytes]:
    """A child that burns user and system CPU, names itself `name` (its /proc comm), then stops
    itself: its figures are then fixed, so two readers must agree exactly."""
    ready = tmp_path / "ready"
    script = textwrap.dedent(
        f"""
        import os, signal, time
        with open("/proc/self/comm", "w") as f:
            f.write({name!r})
        t = time.process_time()
        while time.process_time() - t < 0.3:
            os.stat("/")  # system time as well as user time
        open({str(ready)!r}, "w").close()
        os.kill(os.getpid(), signal.SIGSTOP)
        """
    )
    child = subprocess.Popen([sys.executable, "-c", script])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with open(f"/proc/{child.pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
        if ready.exists() and state == b"T":
            return child
        time.sleep(0.01)
    child.kill()
    pytest.fail("the child never stopped")


def test_the_noise_check_reads_a_process_whose_name_has_parentheses_as_psutil_does(tmp_path):
    # /proc/PID/stat's second field is the command name in parentheses, which may itself hold
    # spaces and parentheses: the fields after it are found from the last ")".
    import psutil

    from gpuplay.core.measure import noise

    if not noise._PROC_STAT:
        pytest.skip("no /proc here: psutil's listing is used")
    child = _stopped_child(tmp_path, "a) b (c")
    try:
        assert psutil.Process(child.pid).name() == "a) b (c"
        ours = noise.process_cpu_seconds(os.getpid())
        ct = psutil.Process(child.pid).cpu_times()
        key = (child.pid, psutil.Process(child.pid).create_time())
        assert key in ours  # the same key psutil gives: a window's two ends pair up
        assert ours[key] == pytest.approx(ct.user + ct.system, abs=1e-9)  # stopped: the same ticks
        assert ct.user > 0 and ct.system > 0 and ours[key] >= 0.2
        # Every process seen by both: psutil read after us, and CPU time only grows.
        listing = psutil.process_iter(["cpu_times", "create_time"])
        theirs = {(p.pid, p.info["create_time"]): p.info["cpu_times"] for p in listing}
        both = set(ours) & set(theirs)
        assert key in both
        assert all(ours[k] <= theirs[k].user + theirs[k].system + 1e-9 for k in both)
    finally:
        child.kill()
        child.wait()
