"""gpuplay's headline against the plain loop a user writes, 18 pairs (a benchmark, not a test).

For each of 9 workloads (matmul, batched matmul, SVD, eigh, element-wise, reductions, FFT 1D/2D,
heat; the scenarios' quick sizes) and NumPy and torch on the CPU: `gpuplay run … --format json`
in a fresh process (the CLI, its engine included) against a plain script in a fresh process
(numpy and torch imported, nothing of gpuplay; the kernel's own source pasted in; inputs made
from the seed in float64, read from .npy files and converted; three warm-up calls,
`time.perf_counter()` around each call for --budget seconds, the median; `--plain harness`
builds the inputs through gpuplay's catalogue instead). Rounds
alternate which side goes first. Each line prints the ratio gpuplay median ÷ plain-loop median
per round, the page faults per step of both sides, and, where gpuplay timed two allocation
modes, both by name. A second plain loop in a fresh process of its own runs each round too
(`--no-control` leaves it out): its ratio to the first, "plain÷plain", is how far two fresh
processes of the same script differ, a spread no harness can be closer than. Where gpuplay found
fresh processes disagreeing (its `fresh_spread`: the headline is then the middle of three), each
line says whether the plain loop fell inside the range gpuplay gave. `--plain-runs K` makes the
plain side the middle of K fresh processes each round, the statistic gpuplay's headline is then.

    python benchmarks/fidelity_plain.py [--quick] [--rounds 3] [--budget 1.5] [--only heat fft2d]
        [--backends numpy torch] [--threads 1] [--no-control] [--plain-runs 3] [--plain harness]

With torch's default threads on a 2-core machine that 8 other processes load, an OpenMP barrier
per operation made heat torch 512² read seconds per step on both sides: --threads 1 there.

Done means 18 ratios within 0.90–1.10. The machine this runs on may be shared: say so beside
any figure.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

WORKLOADS = ("matmul", "batched_matmul", "svd", "eigh", "elementwise", "reductions", "fft1d", "fft2d", "heat")

# The plain side's script (--plain): "literal" is what a user writes, numpy and torch imported and
# nothing else, the kernel's own source pasted in, the inputs read from .npy files this script
# wrote with the workload's generator; "harness" builds them through gpuplay's catalogue in the
# timed process. Which allocation mode a fresh process meets depends on what it allocated before:
# fft2d torch 1024² met the pages-returned mode (6.1-6.9 ms a step, against 1.9-2.1 ms) in 0 of
# 18 fresh processes of the harness script, 0 of 15 of the literal one and 22 of 38 of a 14-line
# script that makes its input inline (rng.standard_normal): no one script stands for every user's.
PLAIN = r"""
import json, resource, statistics, sys, time
import numpy as np
from gpuplay.core.catalogue.scenarios import load_scenarios
from gpuplay.core.workloads import get_workload
scenario, backend, budget = sys.argv[1], sys.argv[2], float(sys.argv[3])
sc = load_scenarios().scenarios[scenario]
w = get_workload(sc.workload)
p = w.effective(w.resolve(sc.preset_params("quick")), backend, "float32")
hosts = list(w.inputs(p, np.random.default_rng(0)))
if backend == "torch":
    import torch
    xp = torch
    args = []
    while hosts:
        args.append(torch.from_numpy(hosts.pop(0)).to(torch.float32))
else:
    xp = np
    args = []
    while hosts:
        args.append(hosts.pop(0).astype(np.float32))
args = w.prepare(backend, "cpu", tuple(args), p)
f = w.kernel(backend, xp, p)
for _ in range(3):
    f(*args)
times = []
f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
end = time.perf_counter() + budget
while time.perf_counter() < end or len(times) < 5:
    t0 = time.perf_counter()
    f(*args)
    times.append(time.perf_counter() - t0)
faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0) / len(times)
print(json.dumps({"median": statistics.median(times), "faults": faults, "n": len(times)}))
"""


THREADS: int | None = None  # --threads: both sides get the same limit, as a user sets it


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    if THREADS:
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            env[var] = str(THREADS)
    return env


LITERAL_LOOP = r"""
for _ in range(3):
    KERNEL(XP, *args, **KW)
times = []
f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
end = time.perf_counter() + BUDGET
while time.perf_counter() < end or len(times) < 5:
    t0 = time.perf_counter()
    KERNEL(XP, *args, **KW)
    times.append(time.perf_counter() - t0)
faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0) / len(times)
print(json.dumps({"median": statistics.median(times), "faults": faults, "n": len(times)}))
"""

PLAIN_KIND = "literal"  # --plain
DATA = Path(tempfile.gettempdir())  # main() sets a folder of its own for the literal scripts' inputs


@functools.cache
def literal_script(scenario: str, backend: str, budget: float) -> str:
    """The plain loop a user writes for this pair, as text: imports, the kernel's source, the
    inputs (saved here as float64 .npy, converted there one by one), three warm-up calls, the loop."""
    import numpy as np

    from gpuplay.core.catalogue.scenarios import load_scenarios
    from gpuplay.core.workloads import get_workload
    from gpuplay.core.workloads.base import Workload

    sc = load_scenarios().scenarios[scenario]
    w = get_workload(sc.workload)
    p = w.effective(w.resolve(sc.preset_params("quick")), backend, "float32")
    paths = []
    for i, host in enumerate(w.inputs(p, np.random.default_rng(0))):
        paths.append(str(DATA / f"{scenario}-{i}.npy"))
        np.save(paths[-1], host)
    kernel = w.kernel(backend, np, p)
    if not isinstance(kernel, functools.partial) or type(w).prepare is not Workload.prepare:
        raise SystemExit(f"{scenario}: its kernel is not one function over the inputs; use --plain harness")
    xp = "torch" if backend == "torch" else "np"
    convert = (
        "torch.from_numpy(hosts.pop(0)).to(torch.float32)"
        if xp == "torch"
        else "hosts.pop(0).astype(np.float32)"
    )
    head = (
        "from __future__ import annotations\n"
        "import json, resource, statistics, time\nimport numpy as np\n"
        + ("import torch\n" if xp == "torch" else "")
        + "\n" + textwrap.dedent(inspect.getsource(kernel.func)) + "\n"
        + f"hosts = [np.load(path) for path in {paths!r}]\nargs = []\nwhile hosts:\n    args.append({convert})\n"
    )  # fmt: skip
    loop = LITERAL_LOOP.replace("KERNEL", kernel.func.__name__).replace("XP", xp)
    return head + loop.replace("KW", repr(dict(kernel.keywords))).replace("BUDGET", repr(budget))


def plain(scenario: str, backend: str, budget: float) -> dict[str, Any]:
    if PLAIN_KIND == "literal":
        cmd = [sys.executable, "-c", literal_script(scenario, backend, budget)]
    else:
        cmd = [sys.executable, "-c", PLAIN, scenario, backend, str(budget)]
    # Each side in a session of its own, as a command typed in its own terminal: with the kernel's
    # autogroup scheduling a session is one share of a loaded CPU, and a plain loop sharing this
    # script's busy session read 44–48 ms for elementwise torch 4M against 34–39 ms in its own.
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=600, env=environment(),
                         start_new_session=True).stdout  # fmt: skip
    return json.loads(out.strip().splitlines()[-1])


def plain_middle(scenario: str, backend: str, budget: float, runs: int) -> dict[str, Any]:
    """The middle of `runs` fresh processes' plain loops (by median), with their range."""
    loops = sorted((plain(scenario, backend, budget) for _ in range(runs)), key=lambda p: p["median"])
    middle = dict(loops[(len(loops) - 1) // 2])
    middle["range"] = (loops[0]["median"], loops[-1]["median"])
    return middle


def gpuplay(scenario: str, backend: str, budget: float) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "gpuplay", "run", scenario, "-b", backend, "-p", "quick",
           "--budget", str(budget), "--format", "json"] + (["--threads", str(THREADS)] if THREADS else [])  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, env=environment(), stdin=subprocess.DEVNULL,
                          timeout=900, start_new_session=True)  # fmt: skip
    if done.returncode not in (0, 3):
        raise SystemExit(f"gpuplay run {scenario} -b {backend} failed:\n{done.stderr[-2000:]}")
    r = json.loads(done.stdout)["results"][0]
    c = r["conditions"]
    return {"median": r["summary"]["median"], "faults": c.get("page_faults_per_step") or 0.0,
            "mode": c.get("alloc", ""), "other": r.get("other_mode"), "spread": r.get("fresh_spread")}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="one round of 0.5 s a side (a first look)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--budget", type=float, default=1.5, help="seconds of timed steps per side")
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--backends", nargs="*", default=["numpy", "torch"])
    ap.add_argument(
        "--threads", type=int, default=None, help="limit both sides (default: the libraries' own)"
    )
    ap.add_argument("--plain-runs", type=int, default=1,
                    help="the plain side is the middle of this many fresh processes (default 1)")  # fmt: skip
    ap.add_argument("--plain", choices=("literal", "harness"), default="literal",
                    help="the plain side's script: what a user writes (numpy/torch only, the default), "
                    "or one that builds the inputs through gpuplay's catalogue")  # fmt: skip
    ap.add_argument("--no-control", dest="control", action="store_false",
                    help="leave out the second plain loop each round (plain÷plain)")  # fmt: skip
    args = ap.parse_args()
    global THREADS, PLAIN_KIND, DATA
    THREADS, PLAIN_KIND = args.threads, args.plain
    data = tempfile.TemporaryDirectory(prefix="fidelity-plain-")
    DATA = Path(data.name)
    rounds, budget = (1, 0.5) if args.quick else (args.rounds, args.budget)
    print(
        f"# gpuplay median ÷ plain-loop median, fresh processes, {rounds} alternating round(s) of {budget} s"
    )
    print(f"# the plain side's script: {args.plain}")
    runs = max(1, args.plain_runs)
    if runs > 1:
        print(f"# the plain side: the middle of {runs} fresh processes each round")
    inside = total = spread_pairs = spread_held = 0
    for scenario in WORKLOADS:
        if args.only and scenario not in args.only:
            continue
        for backend in args.backends:
            ratios, lines, controls, held = [], [], [], []
            for i in range(rounds):
                if i % 2 == 0:
                    g, p = gpuplay(scenario, backend, budget), plain_middle(scenario, backend, budget, runs)
                else:
                    p = plain_middle(scenario, backend, budget, runs)
                    g = gpuplay(scenario, backend, budget)
                if args.control:
                    controls.append(plain_middle(scenario, backend, budget, runs)["median"] / p["median"])
                ratios.append(g["median"] / p["median"])
                other, spread = g["other"], g["spread"]
                modes = (
                    f" [{g['mode']}; {other['median_s'] * 1e3:.2f} ms with {other['name']}]" if other else ""
                )
                if spread:  # gpuplay said fresh processes disagree: does this plain loop fall in its range?
                    lo, hi = spread["min_s"] / 1.10, spread["max_s"] * 1.10
                    held.append(lo <= p["median"] <= hi)
                    modes += (f" [fresh {spread['min_s'] * 1e3:.1f}–{spread['max_s'] * 1e3:.1f} ms: plain "
                              f"{'inside' if held[-1] else 'OUTSIDE'}]")  # fmt: skip
                lines.append(f"{g['median'] * 1e3:.2f}/{p['median'] * 1e3:.2f} ms, faults {g['faults']:.0f}/"
                             f"{p['faults']:.0f}{modes}")  # fmt: skip
            ok = all(0.90 <= r <= 1.10 for r in ratios)
            inside += ok
            total += 1
            if held:
                spread_pairs += 1
                spread_held += all(held)
            control = (" plain÷plain " + " ".join(f"{r:.2f}" for r in controls)) if controls else ""
            print(f"{scenario:15s} {backend:6s} " + " ".join(f"{r:.2f}" for r in ratios)
                  + ("" if ok else "  <-- outside 0.90–1.10") + control + "   " + " | ".join(lines), flush=True)  # fmt: skip
    print(f"{inside}/{total} pairs within 0.90–1.10 in every round")
    if spread_pairs:
        print(f"{spread_held}/{spread_pairs} pairs that gpuplay said spread between fresh processes: every "
              "plain-loop median inside the range it gave (±10 %)")  # fmt: skip


if __name__ == "__main__":
    main()
