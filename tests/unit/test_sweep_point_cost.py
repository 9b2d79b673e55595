"""What a sweep point costs outside its timed window (docs/benchmarks.md)."""

from __future__ import annotations

import math
import os
import random
import subprocess
import sys
import time

import pytest

from gpuplay.core.measure import noise, stats


def _cpu(f, repeat: int = 5) -> float:
    best = math.inf
    for _ in range(repeat):
        t0 = time.process_time()
        f()
        best = min(best, time.process_time() - t0)
    return best


def test_a_large_summary_is_vectorised_and_gives_the_plain_figures(monkeypatch):
    """A sweep point's 2,500-30,000 timings: NumPy sorts and sums them (~6 ms in Python per 30,000);
    the quantiles are read from the same sorted values, so they are the plain path's exactly."""
    import numpy  # noqa: F401 - loaded, as in the sweep's front end: the vectorised path is taken

    rng = random.Random(34)
    xs = [1e-05 * (1 + 0.2 * rng.random()) ** 3 for _ in range(30_000)]
    fast = stats.summarize(xs)
    fast_cpu = _cpu(lambda: stats.summarize(xs))
    monkeypatch.setattr(stats, "VECTOR_MIN", 10**9, raising=False)  # every size the plain way
    plain = stats.summarize(xs)
    plain_cpu = _cpu(lambda: stats.summarize(xs))
    assert fast is not None and plain is not None
    for name in ("n", "median", "min", "max", "p10", "p25", "p75", "p90"):
        assert getattr(fast, name) == getattr(plain, name), name
    assert fast.mean == pytest.approx(plain.mean, rel=1e-12) and fast.std == pytest.approx(
        plain.std, rel=1e-9
    )
    assert all(type(v) is float for k, v in fast.to_dict().items() if k != "n")  # JSON-ready, not np.float64
    assert fast_cpu < 0.6 * plain_cpu


def test_a_large_summary_s_mean_and_spread_are_the_plain_path_s_bit_for_bit(monkeypatch):
    """With NumPy loaded or not, a result's figures are the same (NumPy's pairwise sums
    gave a mean or spread one unit in the last place apart in 5 of 12 real sweep points, so one
    result showed two means depending on what the process had imported)."""
    import numpy  # noqa: F401 - loaded: the vectorised path is taken

    for seed in range(40):
        rng = random.Random(seed)
        xs = [1e-05 * (1 + 0.5 * rng.random()) ** 3 for _ in range(300 + 97 * seed)]
        fast = stats.summarize(xs)
        monkeypatch.setattr(stats, "VECTOR_MIN", 10**9)
        plain = stats.summarize(xs)
        monkeypatch.undo()
        assert fast == plain, seed
    # one square, pow's (x ** 2) a unit in the last place from the product NumPy computes, and
    # the spread with it
    xs = [0.0] * 255 + [2.7508261357558352e-05]
    fast = stats.summarize(xs)
    monkeypatch.setattr(stats, "VECTOR_MIN", 10**9)
    assert fast == stats.summarize(xs)


def test_a_summary_never_imports_numpy():
    """A NumPy run's front end plans and prints without NumPy: a summary uses
    NumPy only where it is loaded already, and is then the plain path's figures."""
    code = (
        "import sys; from gpuplay.core.measure.stats import summarize; "
        "s = summarize([1.0, 2.0, 3.0] * 1000); print('numpy' in sys.modules, s.median, s.n)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "2.0", "3000"]


@pytest.fixture
def stopped_child():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    time.sleep(0.2)
    os.kill(child.pid, 19)  # SIGSTOP: its CPU time stays put
    yield child
    child.kill()
    child.wait()


def test_the_noise_listing_keeps_each_process_s_stat_file_open_between_looks(monkeypatch, stopped_child):
    """A busy machine lists every process at both ends of every point's window: the second look
    re-reads the files the first opened (one pread each) and opens only processes new since."""
    import builtins

    if not noise._PROC_STAT:
        pytest.skip("no /proc here: psutil's listing is used")
    me = os.getpid()
    first = noise.process_cpu_seconds(me)
    assert any(pid == stopped_child.pid for pid, _ in first)
    opened: list[str] = []
    real_os_open, real_open = os.open, builtins.open
    monkeypatch.setattr(
        os, "open", lambda path, *a, **k: opened.append(str(path)) or real_os_open(path, *a, **k)
    )
    monkeypatch.setattr(
        builtins, "open", lambda path, *a, **k: opened.append(str(path)) or real_open(path, *a, **k)
    )
    second = noise.process_cpu_seconds(me)
    monkeypatch.undo()
    assert f"/proc/{stopped_child.pid}/stat" not in opened
    key = next(k for k in first if k[0] == stopped_child.pid)
    assert second[key] == first[key]  # the same key (pid, create time) and figure through the kept file
    # A process that ends is dropped and its file closed: a reused pid is opened anew, never misread.
    stopped_child.kill()
    stopped_child.wait()
    third = noise.process_cpu_seconds(me)
    assert key not in third
    assert stopped_child.pid not in noise._stat_files.open


def test_the_kept_files_are_capped(monkeypatch, stopped_child):
    if not noise._PROC_STAT:
        pytest.skip("no /proc here: psutil's listing is used")
    _forget_kept_files()
    monkeypatch.setattr(noise, "MAX_KEPT_OPEN", 3)
    try:
        listed = noise.process_cpu_seconds(os.getpid())
        assert len(noise._stat_files.open) == 3 < len(listed)  # the rest were read and closed, as before
        assert any(pid == stopped_child.pid for pid, _ in noise.process_cpu_seconds(os.getpid()))
    finally:
        _forget_kept_files()


def test_a_point_is_logged_and_said_once_the_next_point_s_request_has_left(monkeypatch):
    """A point's session-log line and progress line (~1-2 ms) no longer stand between its answer
    and the next request: they are written when the engine's first phase of the next point is
    heard, while it plans and sets up; the last point's are written when the sweep ends."""
    from click.testing import CliRunner

    import gpuplay.core.engine as engine
    from gpuplay.cli import main
    from gpuplay.core.reports.sessionlog import SessionLog
    from gpuplay.core.result import RunResult

    events: list[tuple[str, int]] = []

    def fake_measure(spec, *, on_phase=None, cancel=None, telemetry=None, **_):
        n = spec.params["n"]
        events.append(("request", n))
        on_phase("estimate", "")
        events.append(("timed", n))
        return RunResult(spec=spec, samples=[1e-09 * n**3] * 5, size=str(n), flops=2.0 * n**3)

    monkeypatch.setattr(engine, "measure", fake_measure)
    monkeypatch.setattr(
        SessionLog, "append", lambda self, r: events.append(("logged", r.spec.params["n"])) or True
    )
    res = CliRunner().invoke(main, ["sweep", "matmul", "--over", "n=16,32,64", "--backends", "numpy"])
    assert res.exit_code == 0, res.output
    assert events == [
        ("request", 16), ("timed", 16),
        ("request", 32), ("logged", 16), ("timed", 32),
        ("request", 64), ("logged", 32), ("timed", 64),
        ("logged", 64),
    ]  # fmt: skip
    lines = [x for x in res.stderr.splitlines() if x.startswith("[")]
    assert [x.split(":")[0] for x in lines] == [
        f"[{i}/3] numpy cpu float32 n={n}" for i, n in ((1, 16), (2, 32), (3, 64))
    ]


def _forget_kept_files() -> None:
    if noise._stat_files is not None:
        noise._stat_files.forget_all_but(())
    noise._stat_files = None


def test_the_kept_files_leave_the_measured_code_seven_eighths_of_its_descriptors():
    import resource

    if not noise._PROC_STAT:
        pytest.skip("no /proc here: psutil's listing is used")
    _forget_kept_files()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    limit = len(os.listdir("/proc/self/fd")) + 40  # room for ~40 more: 5 of them kept at most
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
    try:
        listed = noise.process_cpu_seconds(os.getpid())
        assert len(noise._stat_files.open) == limit // 8 < len(listed)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        _forget_kept_files()


def test_no_descriptor_left_means_nobody_named_not_a_failed_run():
    import resource

    if not noise._PROC_STAT:
        pytest.skip("no /proc here: psutil's listing is used")
    _forget_kept_files()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    lowest_free = os.open(os.devnull, os.O_RDONLY)
    os.close(lowest_free)
    resource.setrlimit(resource.RLIMIT_NOFILE, (lowest_free, hard))  # no new descriptor at all
    try:
        assert noise.process_cpu_seconds(os.getpid()) == {}
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        _forget_kept_files()


def test_the_kept_files_are_shared_safely_by_threads_looking_at_once():
    """devices compared at once in one process (in-process engine, `--concurrent`), or
    API runs on threads, look at the same time; the shared kept files then raised KeyError or
    'dictionary changed size during iteration' out of the window's end (and could close a
    descriptor twice) where the files opened afresh at each look never did."""
    import threading

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch often: the interleavings come quickly
    errors: list[str] = []
    stop = threading.Event()

    def look() -> None:
        while not stop.is_set():
            try:
                noise._proc_cpu_seconds(0)
            except Exception as exc:  # noqa: BLE001 - any is the failure
                errors.append(repr(exc))

    threads = [threading.Thread(target=look) for _ in range(4)]
    try:
        for t in threads:
            t.start()
        t0 = time.monotonic()
        while time.monotonic() - t0 < 3 and not errors:
            for p in [subprocess.Popen(["true"]) for _ in range(5)]:  # processes come and go
                p.wait()
    finally:
        stop.set()
        for t in threads:
            t.join()
        sys.setswitchinterval(old)
    assert not errors, errors[:3]
