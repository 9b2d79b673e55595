"""Shared by the `speed_*.py` benchmarks: gpuplay's own cost, timed as whole processes.

Each figure is the median of N runs (5 by default) of a fresh `python -m gpuplay …` process, after
one warm-up run: wall time from the parent, CPU time and peak memory from the kernel's accounting
of the finished process (`os.wait4`: the peak is the largest of the process and the engine it
reaped). With `--vs SRC` the same command runs from a second source tree (another checkout's
`src/`), alternating A B A B …, and each pair's ratio is printed: a ratio measured side by side
holds when a shared machine's speed drifts between pairs.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Run:
    wall: float
    cpu: float
    peak_mib: float
    code: int


def machine() -> str:
    """The machine in one line: CPU model, cores, load, Python; figures mean nothing without it."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return (f"{model}, {os.cpu_count()} CPUs, load average {load} (1, 5, 15 min), "
            f"Python {platform.python_version()}")  # fmt: skip


def parser(doc: str | None) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    ap.add_argument("-n", "--runs", type=int, default=5, help="counted runs (median of these); default 5")
    ap.add_argument(
        "--src", default=str(ROOT / "src"), help="the gpuplay source tree to time (default: this one)"
    )
    ap.add_argument("--vs", default=None, metavar="SRC", help="a second source tree, run alternately: ratios")
    return ap


def env_for(src: str, state: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("GPUPLAY_IN_PROCESS", "COLUMNS", "LINES")}
    # Each run starts from nothing of its own: a state folder (engine log, session log) of its own.
    env.update(PYTHONPATH=src, GPUPLAY_STATE_DIR=state, GPUPLAY_CONFIG_DIR=f"{state}/config")
    return env


def run_once(args: Sequence[str], src: str) -> Run:
    """One whole `python -m gpuplay ARGS` process, its output thrown away."""
    with tempfile.TemporaryDirectory(prefix="gpuplay-speed-") as tmp:
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "gpuplay", *args], env=env_for(src, tmp),
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)  # fmt: skip
        _, status, ru = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
    return Run(wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024, proc.returncode)


def run_python(args: Sequence[str], env: dict[str, str] | None = None, what: str = "a program") -> Run:
    """One whole `python ARGS` process (a floor's program, an engine's start), stdout thrown away;
    a failure ends the benchmark with its stderr's tail."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, *args], env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read() if proc.stderr else b""
    code = os.waitstatus_to_exitcode(status)
    if code:
        sys.exit(f"{what} failed: {err.decode(errors='replace')[-500:]}")
    return Run(wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024, code)


def runs(args: Sequence[str], src: str, n: int, vs: str | None = None) -> tuple[list[Run], list[Run]]:
    """One warm-up, then n counted runs (alternating with `vs` when given)."""
    run_once(args, src)
    if vs:
        run_once(args, vs)
    a: list[Run] = []
    b: list[Run] = []
    for _ in range(n):
        if vs:
            b.append(run_once(args, vs))
        a.append(run_once(args, src))
    return a, b


def med(xs: Sequence[float]) -> float:
    return statistics.median(xs)


def describe(label: str, rs: Sequence[Run]) -> str:
    bad = [r.code for r in rs if r.code != 0]
    walls = sorted(r.wall for r in rs)
    return (f"{label}: wall median {med(walls):.3f} s (min {walls[0]:.3f}, max {walls[-1]:.3f}), "
            f"CPU {med([r.cpu for r in rs]):.2f} s, peak {med([r.peak_mib for r in rs]):.0f} MiB"
            + (f", exit codes {bad}" if bad else ""))  # fmt: skip


def ratios(a: Sequence[Run], b: Sequence[Run]) -> str:
    rs = sorted(x.wall / y.wall for x, y in zip(a, b, strict=True))
    return f"wall ratio this/other per pair: median {med(rs):.2f} (min {rs[0]:.2f}, max {rs[-1]:.2f})"


def header(what: str, goal: str, n: int) -> None:
    print(f"# {what}")
    print(f"# goal: {goal}")
    print(f"# machine: {machine()}")
    print(f"# median of {n} whole-process runs after one warm-up; a shared machine's figures are loaded")
