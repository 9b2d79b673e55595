"""The engine process, measured from the outside (a benchmark, not a test).

In a real terminal (tmux), the real `gpuplay`: first frame after launch, quit latency (idle,
mid-run, mid-cold-compile), the UI process's RSS and whether it maps libtorch. Then, through
the engine client: a cancel that the engine acknowledges, a cancel mid-step (kill and replace),
and what a restart costs.

    python benchmarks/engine_latency.py [--rounds 3] [--src DIR]

`--src DIR` runs another checkout's `src/` (e.g. a worktree of the commit before the engine),
so before and after are measured side by side on the same machine in one sitting.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.tui_helpers import tiny_scenarios  # noqa: E402


class Session:
    def __init__(self, src: Path, scenarios: Path, state: Path) -> None:
        self.name = f"gpuplay-bench-{uuid.uuid4().hex[:8]}"
        exe = Path(sys.executable).parent / "gpuplay"
        env = f"PYTHONPATH={src} GPUPLAY_STATE_DIR={state} GPUPLAY_CONFIG_DIR={state}/cfg TERM=xterm-256color"
        script = f"env {env} {exe} --scenarios {scenarios}; echo EXITED-$?; sleep 30"
        self.t0 = time.monotonic()
        subprocess.run(
            ["tmux", "new-session", "-d", "-s", self.name, "-x", "120", "-y", "36", script], check=True
        )

    def screen(self) -> str:
        return subprocess.run(
            ["tmux", "capture-pane", "-p", "-t", self.name], capture_output=True, text=True
        ).stdout

    def wait(self, text: str, timeout: float = 120.0) -> float:
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if text in self.screen():
                return time.monotonic()
            time.sleep(0.01)
        raise TimeoutError(f"{text!r} never appeared:\n{self.screen()}")

    def keys(self, *keys: str) -> float:
        subprocess.run(["tmux", "send-keys", "-t", self.name, *keys], check=True)
        return time.monotonic()

    def app(self) -> psutil.Process | None:
        for p in psutil.process_iter(["cmdline"]):
            argv = p.info["cmdline"] or []
            cmd = " ".join(argv)
            # the interpreter running the console script, not the shell that started it
            if argv and "python" in Path(argv[0]).name and "bin/gpuplay" in cmd and self.name_marker in cmd:
                return p
        return None

    def close(self) -> None:
        subprocess.run(["tmux", "kill-session", "-t", self.name], capture_output=True)


def one_round(src: Path, work: Path, mode: str) -> dict[str, float | str]:
    scenarios = tiny_scenarios(work / "sc")
    if mode == "mid-run":  # a matmul large enough that one step takes ~0.1-1 s on 2 cores
        (scenarios / "matmul.toml").write_text(
            'name = "matmul"\ntitle = "matmul"\nworkload = "matmul"\n[params]\nn = 2048\n'
            "[presets.quick]\nn = 2048\n[presets.published]\nn = 2048\n"
        )
    s = Session(src, scenarios, work / "state")
    s.name_marker = str(scenarios)
    out: dict[str, float | str] = {}
    try:
        out["first_frame_s"] = s.wait("scenarios") - s.t0
        if mode == "idle":
            s.wait("done")
            time.sleep(0.5)
            app = s.app()
            if app is not None:
                out["ui_rss_mib"] = app.memory_info().rss / 2**20
                out["ui_maps_libtorch"] = (
                    "yes" if "libtorch" in Path(f"/proc/{app.pid}/maps").read_text() else "no"
                )
        elif mode == "mid-run":
            s.wait("timed")
        elif mode == "mid-compile":
            s.wait("done")
            s.keys("b")
            s.wait("torch cpu")
            s.wait("done")
            s.keys("c")
            s.wait("compile")
        t = s.keys("q")
        out[f"quit_{mode}_s"] = s.wait("EXITED") - t
    finally:
        s.close()
    return out


def engine_figures(rounds: int) -> dict[str, list[float]]:
    from gpuplay.core.engine import EngineClient
    from gpuplay.core.spec import RunSpec

    figures: dict[str, list[float]] = {
        "cancel_ack_s": [],
        "cancel_kill_next_started_s": [],
        "restart_to_first_phase_s": [],
    }
    client = EngineClient()
    client.wait_probe(120)
    small = RunSpec.make("matmul", {"n": 128}, backend="torch", budget_s=30)
    long_step = RunSpec.make("svd", {"n": 1200}, dtype="float64", budget_s=30, warmup=0)

    def cancel_after_timed_starts(delay: float) -> tuple[threading.Event, dict[str, float], object]:
        cancel, marks = threading.Event(), {}

        def fire() -> None:
            marks["cancel"] = time.monotonic()
            cancel.set()

        def on_phase(name: str, _d: str) -> None:
            if name == "timed":
                threading.Timer(delay, fire).start()

        return cancel, marks, on_phase

    for _ in range(rounds):
        cancel, marks, on_phase = cancel_after_timed_starts(0.3)
        client.run(small, cancel=cancel, on_phase=on_phase)
        figures["cancel_ack_s"].append(time.monotonic() - marks["cancel"])
        cancel, marks, on_phase = cancel_after_timed_starts(0.3)
        client.run(long_step, cancel=cancel, on_phase=on_phase)
        first: list[float] = []
        client.run(
            RunSpec.make("matmul", {"n": 64}, budget_s=0.05),
            on_phase=lambda n, _d, first=first: first.append(time.monotonic()),
        )
        figures["cancel_kill_next_started_s"].append(first[0] - marks["cancel"])
    client.kill()
    for _ in range(rounds):
        t0 = time.monotonic()
        first = []
        client.run(
            RunSpec.make("matmul", {"n": 64}, budget_s=0.05),
            on_phase=lambda n, _d, first=first: first.append(time.monotonic()),
        )
        figures["restart_to_first_phase_s"].append(first[0] - t0)
        client.kill()
    client.close()
    return figures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--src", type=Path, default=ROOT / "src")
    ap.add_argument(
        "--no-engine", action="store_true", help="skip the engine-client figures (a tree without it)"
    )
    args = ap.parse_args()
    if shutil.which("tmux") is None:
        sys.exit("needs tmux")
    rows: dict[str, list[float]] = {}
    flags: dict[str, str] = {}
    for _ in range(args.rounds):
        for mode in ("idle", "mid-run", "mid-compile"):
            with tempfile.TemporaryDirectory() as d:
                for k, v in one_round(args.src.resolve(), Path(d), mode).items():
                    if isinstance(v, str):
                        flags[k] = v
                    else:
                        rows.setdefault(k, []).append(v)
    if not args.no_engine:
        os.environ.setdefault("GPUPLAY_STATE_DIR", tempfile.mkdtemp())
        rows.update(engine_figures(args.rounds))
    print(f"src: {args.src}  cores: {os.cpu_count()}  load: {os.getloadavg()[0]:.1f}  rounds: {args.rounds}")
    for k, v in rows.items():
        print(f"{k:32s} median {statistics.median(v):7.3f}  min {min(v):7.3f}  max {max(v):7.3f}")
    for k, v in flags.items():
        print(f"{k:32s} {v}")


if __name__ == "__main__":
    main()
