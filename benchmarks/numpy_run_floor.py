"""The least a NumPy `run matmul -p quick --budget 0.2` can cost on this machine, measured as
`speed_run_numpy.py` measures gpuplay's (its goal: 0.6 s).

Four whole processes, each the median of N runs, alternating:

- `bare`: two interpreters started side by side that import nothing (gpuplay's front end and its
  engine are two processes);
- `imports`: the same two, one importing NumPy (the engine), the other click and rich (what a
  front end prints a table with);
- `floor`: the least honest measurement of a 1024² float32 matmul in a 0.2 s budget, with the
  front end's interpreter beside it: float64 inputs made and cast, the float64 reference from
  them, 3 warm-up steps, 0.2 s of timed steps, the cold-allocation probe's 3 steps on memory
  returned to the OS (malloc_trim), the check of the last output against the reference; no
  planning, no telemetry, no protocol, no table;
- `gpuplay`: `python -m gpuplay run matmul -p quick --budget 0.2`.

`floor` is what no tool can go under here; `gpuplay − floor` is gpuplay's own cost.

    python benchmarks/numpy_run_floor.py [-n 5] [--src OTHER/src]
"""

from __future__ import annotations

from speedbench import Run, header, med, parser, run_once, run_python

BUDGET_S = 0.2
GPUPLAY = ("run", "matmul", "-p", "quick", "--budget", str(BUDGET_S))

SIDE = "import subprocess, sys; fe = subprocess.Popen([sys.executable, '-c', {front!r}]); {work}; fe.wait()"
FLOOR_WORK = f"""
import ctypes, math, time
import numpy as np
n = 1024
rng = np.random.default_rng(0)
a64, b64 = rng.standard_normal((n, n)), rng.standard_normal((n, n))
a, b = a64.astype(np.float32), b64.astype(np.float32)
ref = a64 @ b64
for _ in range(3):
    a @ b
times, end = [], time.perf_counter() + {BUDGET_S}
while time.perf_counter() < end:
    t = time.perf_counter_ns(); a @ b; times.append(time.perf_counter_ns() - t)
trim = ctypes.CDLL("libc.so.6").malloc_trim
cold = []
for _ in range(3):
    trim(0); t = time.perf_counter_ns(); out = a @ b; cold.append(time.perf_counter_ns() - t)
err = math.sqrt(float(np.sum(np.square(out - ref, dtype=np.float64)))) / math.sqrt(float(np.sum(np.square(ref))))
assert err < 1e-5 and times, (err, len(times))  # the check, which can fail
print(sorted(times)[len(times) // 2], sorted(cold)[1], err)
"""
PROGRAMS = {
    "bare": SIDE.format(front="pass", work="pass"),
    "imports": SIDE.format(front="import click, rich.console, rich.table", work="import numpy"),
    "floor": "exec("
    + repr(SIDE.format(front="import click, rich.console, rich.table", work="exec(W)"))
    + ", {'W': "
    + repr(FLOOR_WORK)
    + "})",
}


def run_program(code: str) -> Run:
    return run_python(["-c", code], what="a floor program")


def run_gpuplay(src: str) -> Run:
    return run_once(GPUPLAY, src)


def main() -> None:
    args = parser(__doc__).parse_args()
    header("the floor under gpuplay " + " ".join(GPUPLAY), "gpuplay <= 0.6 s wall", args.runs)
    found: dict[str, list[Run]] = {name: [] for name in (*PROGRAMS, "gpuplay")}
    for i in range(args.runs + 1):  # the first round warms the file cache and is not counted
        for name, code in PROGRAMS.items():
            r = run_program(code)
            if i:
                found[name].append(r)
        r = run_gpuplay(args.src)
        if i:
            found["gpuplay"].append(r)
    for name, rs in found.items():
        walls = sorted(r.wall for r in rs)
        print(f"{name:8s} wall median {med(walls):.3f} s (min {walls[0]:.3f}, max {walls[-1]:.3f}), "
              f"CPU {med([r.cpu for r in rs]):.2f} s")  # fmt: skip
    gap = med([r.wall for r in found["gpuplay"]]) - med([r.wall for r in found["floor"]])
    print(f"gpuplay's own cost over the floor: {gap:.3f} s wall (medians)")


if __name__ == "__main__":
    main()
