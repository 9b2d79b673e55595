"""The playground's own speed, in tmux at 120×36, as a user sees it.

- first frame: from starting `python -m gpuplay` in a new tmux pane to the first screen that
  shows the scenario list (tmux's own copy of the screen, polled every 2 ms). Goal ≤ 0.3 s.
- key → repaint: once the first measurement is done, each key of KEYS is sent with
  `tmux send-keys` and the pane polled until the part of the screen that key changes has changed
  (the sidebar for a lever or a scenario key, the tab bar for a tab key, the help box for ? and
  Escape). Several rounds; the median, p95 and max over every key, and each key's worst. Goal:
  p95 ≤ 50 ms for every key. Telemetry and step timings also repaint the screen, so a key's region
  is watched, not the whole screen (`a` on NumPy shows only a notice: the whole screen).
- q → shell: from sending `q` to the shell's marker printed after gpuplay exits. Goal ≤ 0.2 s.
- main-thread CPU per key: the app's main thread's CPU time (Linux `/proc/PID/schedstat`: the
  thread that runs Textual's event loop, handlers and rendering) from sending the key to seeing
  its change: what the load moves least. It also counts what the app did between its frame and
  the poll that saw it (work deferred to after the frame included), so it is an upper bound.

    python benchmarks/speed_app.py [-n 5] [--rounds 3] [--src OTHER/src]

Needs tmux. Each of the n runs starts a fresh app with a state folder of its own, in a tmux server
of its own (`-L`, socket `gpuplay-speed-PID` unless `GPUPLAY_SPEED_TMUX` names one), kept up
between runs and ended at exit: the benchmark never talks to, nor ends, a tmux server someone
else uses.
"""

from __future__ import annotations

import atexit
import math
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from speedbench import env_for, header, med, parser

WIDTH, HEIGHT, SIDEBAR_COLS = 120, 36, 33
# In an order where each key changes what is on screen (1 after another tab, Escape after ?).
KEYS = ("t", "a", "2", "4", "5", "1", "?", "Escape", "p", "Down", "Up")
POLL_S = 0.002
DONE = "__gpuplay_exited__"
# A tmux server of the benchmark's own, ended when the script ends.
SOCKET = os.environ.get("GPUPLAY_SPEED_TMUX") or f"gpuplay-speed-{os.getpid()}"
_server_kept = False


def tmux(*args: str) -> str:
    _keep_server()
    return subprocess.run(["tmux", "-L", SOCKET, *args], capture_output=True, text=True, check=False).stdout


def _keep_server() -> None:
    """Start the server with `exit-empty off`. By default a tmux server exits when its last session
    is killed, and a `new-session` that reaches it while it exits is lost with it ("server exited
    unexpectedly"): every run here kills its session and starts the next at once, and 1 in ~30
    first frames waited 30 s on a pane that was never there. Kept up, the server ends at exit."""
    global _server_kept
    if _server_kept:
        return
    _server_kept = True
    subprocess.run(["tmux", "-L", SOCKET, "start-server", ";", "set-option", "-s", "exit-empty", "off"],
                   capture_output=True, check=False)  # fmt: skip
    if not os.environ.get("GPUPLAY_SPEED_TMUX"):  # a server named by the caller is the caller's
        atexit.register(
            subprocess.run, ["tmux", "-L", SOCKET, "kill-server"], capture_output=True, check=False
        )


def screen(name: str) -> list[str]:
    return tmux("capture-pane", "-e", "-p", "-t", name).splitlines()


def region(key: str, lines: list[str], plain: list[str]) -> object:
    """The part of the screen `key` changes (with its colours: a highlight is only a colour)."""
    if key in ("?", "Escape"):
        return any("gpuplay keys" in line for line in plain)
    if key in ("1", "2", "4", "5"):
        return tuple(lines[1:3])
    if key == "a":
        return tuple(lines)
    return tuple(_cols(line, SIDEBAR_COLS) for line in lines[1 : HEIGHT - 1])  # the sidebar


def _cols(line: str, n: int) -> str:
    """The first n columns of a captured line with its escape sequences (they take no column)."""
    out, cols, i = [], 0, 0
    while i < len(line) and cols < n:
        if line[i] == "\x1b":
            j = i + 1
            while j < len(line) and not line[j].isalpha():
                j += 1
            out.append(line[i : j + 1])
            i = j + 1
            continue
        out.append(line[i])
        cols += 1
        i += 1
    return "".join(out)


def wait_for(name: str, test, timeout: float) -> float | None:
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        if test():
            return time.perf_counter()
        time.sleep(POLL_S)
    return None


def app_pid(name: str, marker: bytes = b"gpuplay") -> int | None:
    """The app's process in the pane (the shell's child whose command line holds `marker`), or None
    where /proc cannot say."""
    try:
        shell = int(tmux("display-message", "-p", "-t", name, "#{pane_pid}").strip())
        for child in Path(f"/proc/{shell}/task/{shell}/children").read_text().split():
            if marker in Path(f"/proc/{child}/cmdline").read_bytes():
                return int(child)
    except (OSError, ValueError):
        pass
    return None


def main_thread_cpu(pid: int | None) -> float:
    """Seconds of CPU the process's main thread has run (nan where /proc cannot say)."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        return math.nan


def one_app(
    src: str, rounds: int, keys_: tuple[str, ...] = KEYS, app: str | None = None, marker: bytes = b"gpuplay"
) -> tuple[float, dict[str, list[float]], float, dict[str, list[float]]]:
    """One app run: first frame, each key's wall and main-thread CPU, q -> shell. `app` is the
    command that starts it (`python -m gpuplay` when None; `textual_keys_floor.py` passes a bare
    Textual app's), `marker` a word of its command line (to find its process)."""
    name = f"gpuplay-speed-{time.monotonic_ns()}"
    with tempfile.TemporaryDirectory(prefix="gpuplay-app-") as tmp:
        env = env_for(src, tmp)
        cmd = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items() if k.startswith(("PYTHON", "GPUPLAY")))
        app = app or f"{shlex.quote(sys.executable)} -m gpuplay"
        shell = f"env {cmd} {app}; echo {DONE}; sleep 60"
        t0 = time.perf_counter()
        tmux("new-session", "-d", "-s", name, "-x", str(WIDTH), "-y", str(HEIGHT), shell)
        try:
            shown = wait_for(name, lambda: any("scenarios" in x for x in tmux("capture-pane", "-p", "-t", name)
                                                .splitlines()), 30)  # fmt: skip
            if shown is None:
                raise SystemExit("the app never showed its scenario list")
            first = shown - t0
            # The keys are timed once the first measurement is done, as a user presses them.
            wait_for(name, lambda: "phase     done" in tmux("capture-pane", "-p", "-t", name), 120)
            keys: dict[str, list[float]] = {k: [] for k in keys_}
            cpu: dict[str, list[float]] = {k: [] for k in keys_}
            pid = app_pid(name, marker)
            for _ in range(rounds):
                for key in keys_:
                    time.sleep(0.5)
                    before = region(key, screen(name), tmux("capture-pane", "-p", "-t", name).splitlines())
                    c1 = main_thread_cpu(pid)
                    t1 = time.perf_counter()
                    tmux("send-keys", "-t", name, key)

                    def changed(key: str = key, before: object = before) -> bool:
                        lines = screen(name)
                        return region(key, lines, [_plain(x) for x in lines]) != before

                    t2 = wait_for(name, changed, 5)
                    keys[key].append((t2 - t1) if t2 is not None else float("inf"))
                    cpu[key].append(main_thread_cpu(pid) - c1)
            time.sleep(0.5)
            t1 = time.perf_counter()
            tmux("send-keys", "-t", name, "q")
            t2 = wait_for(name, lambda: DONE in tmux("capture-pane", "-p", "-t", name), 10)
            quit_s = (t2 - t1) if t2 is not None else float("inf")
        finally:
            tmux("kill-session", "-t", name)
    return first, keys, quit_s, cpu


def _plain(line: str) -> str:
    out, i = [], 0
    while i < len(line):
        if line[i] == "\x1b":
            j = i + 1
            while j < len(line) and not line[j].isalpha():
                j += 1
            i = j + 1
            continue
        out.append(line[i])
        i += 1
    return "".join(out)


def p95(xs: list[float]) -> float:
    return statistics.quantiles(xs, n=20, method="inclusive")[-1] if len(xs) > 1 else xs[0]


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--rounds", type=int, default=3, help="presses of each key per app run")
    ap.add_argument("--keys", default=",".join(KEYS), help="the keys pressed, in order, comma-separated "
                    "(each must change its region of the screen: Escape after ?, 1 after another tab)")  # fmt: skip
    args = ap.parse_args()
    keys_ = tuple(k for k in args.keys.split(",") if k)
    header("the playground in tmux 120×36", "first frame <= 0.3 s; key -> repaint p95 <= 50 ms for every key; "
           "q -> shell <= 0.2 s", args.runs)  # fmt: skip
    trees = [args.src, *([args.vs] if args.vs else [])]
    got = {src: ([], [], {k: [] for k in keys_}, {k: [] for k in keys_}) for src in trees}
    for _ in range(args.runs):
        for src in reversed(trees):  # alternating, the other tree first: A B A B … as the CLI rows
            f, ks, q, cs = one_app(src, args.rounds, keys_)
            firsts, quits, keys, cpu = got[src]
            firsts.append(f)
            quits.append(q)
            for k, v in ks.items():
                keys[k] += v
                cpu[k] += cs[k]
    for src in trees:
        print(f"## gpuplay from {src}")
        report(*got[src])


def report(
    firsts: list[float], quits: list[float], keys: dict[str, list[float]], cpu: dict[str, list[float]]
) -> None:
    every = sorted(x for v in keys.values() for x in v)
    every_cpu = [x for v in cpu.values() for x in v]
    print(
        f"first frame: median {med(firsts):.3f} s (min {min(firsts):.3f}, max {max(firsts):.3f}); goal 0.3 s"
    )
    print(f"key -> repaint over {len(every)} presses: median {med(every) * 1e3:.0f} ms, p95 {p95(every) * 1e3:.0f} ms, "
          f"max {every[-1] * 1e3:.0f} ms; goal p95 50 ms")  # fmt: skip
    print(f"main-thread CPU per key (upper bound, see above): median {med(every_cpu) * 1e3:.0f} ms, "
          f"p95 {p95(sorted(every_cpu)) * 1e3:.0f} ms")  # fmt: skip
    for k, v in keys.items():
        print(f"  {k:7s} median {med(v) * 1e3:5.0f} ms  max {max(v) * 1e3:5.0f} ms   "
              f"main-thread CPU median {med(cpu[k]) * 1e3:4.0f} ms")  # fmt: skip
    print(f"q -> shell: median {med(quits):.3f} s (min {min(quits):.3f}, max {max(quits):.3f}); goal 0.2 s")


if __name__ == "__main__":
    main()
