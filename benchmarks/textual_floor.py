"""The least a Textual app's first frame costs on this machine, measured as `speed_app.py` measures
gpuplay's (the first frame's goal: 0.3 s).

A bare Textual app with what gpuplay's first screen has in outline — a header, a bordered list of
the shipped scenarios' titles, a tab bar with seven tabs, a footer — and nothing of gpuplay (no
NumPy, no engine). From starting `python` in a new tmux pane at 120×36 to the first screen that
shows its list, polled every 2 ms; then `python -m gpuplay` the same way, alternating. The bare
app's time is the floor a Textual first frame cannot go under here: the interpreter's start,
`import textual.app` and one compose, layout and render.

    python benchmarks/textual_floor.py [-n 5] [--src OTHER/src]
"""

from __future__ import annotations

import shlex
import sys
import tempfile
import time
from pathlib import Path

from speed_app import HEIGHT, WIDTH, tmux, wait_for
from speedbench import env_for, header, med, parser

BARE_APP = """
from textual.app import App
from textual.containers import Horizontal, Vertical
from textual.widgets import Footer, Header, ListItem, ListView, Label, TabbedContent, TabPane

TITLES = {titles!r}

class Bare(App):
    CSS = "#scenarios {{ width: 40; border: round $accent; border-title-align: left; }}"
    BINDINGS = [("q", "quit", "quit")]

    def compose(self):
        yield Header()
        with Horizontal():
            lv = ListView(*(ListItem(Label(t)) for t in TITLES), id="scenarios")
            lv.border_title = "scenarios"
            yield lv
            with TabbedContent():
                for name in ("Live", "Compare", "Code", "Telemetry", "Profile", "Collectives", "Sweep"):
                    with TabPane(name):
                        yield Label(name)
        yield Footer()

Bare().run()
"""


def titles() -> list[str]:
    import tomllib

    folder = Path(__file__).resolve().parents[1] / "src" / "gpuplay" / "scenarios"
    if not folder.is_dir():
        folder = Path(__file__).resolve().parents[1] / "scenarios"
    out = []
    for path in sorted(folder.glob("*.toml")):
        try:
            out.append(str(tomllib.loads(path.read_text()).get("title", path.stem)))
        except (OSError, ValueError):
            continue
    return out or ["Matrix multiply"]


def first_frame(command: str, env: dict[str, str]) -> float:
    name = f"gpuplay-floor-{time.monotonic_ns()}"
    pre = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items() if k.startswith(("PYTHON", "GPUPLAY")))
    t0 = time.perf_counter()
    tmux(
        "new-session", "-d", "-s", name, "-x", str(WIDTH), "-y", str(HEIGHT), f"env {pre} {command}; sleep 60"
    )
    try:
        shown = wait_for(name, lambda: "scenarios" in tmux("capture-pane", "-p", "-t", name), 30)
        if shown is None:
            raise SystemExit(f"{command} never showed its list")
        return shown - t0
    finally:
        tmux("kill-session", "-t", name)


def main() -> None:
    args = parser(__doc__).parse_args()
    header("a bare Textual app's first frame beside gpuplay's, tmux 120×36", "gpuplay's first frame <= 0.3 s",
           args.runs)  # fmt: skip
    bare, ours = [], []
    with tempfile.TemporaryDirectory(prefix="gpuplay-floor-") as tmp:
        script = Path(tmp) / "bare_app.py"
        script.write_text(BARE_APP.format(titles=titles()))
        env = env_for(args.src, tmp)
        py = shlex.quote(sys.executable)
        first_frame(f"{py} {shlex.quote(str(script))}", env)  # warm-up: the page cache, both
        first_frame(f"{py} -m gpuplay", env)
        for _ in range(args.runs):
            bare.append(first_frame(f"{py} {shlex.quote(str(script))}", env))
            ours.append(first_frame(f"{py} -m gpuplay", env))
    print(
        f"bare Textual app: first frame median {med(bare):.3f} s (min {min(bare):.3f}, max {max(bare):.3f})"
    )
    print(
        f"gpuplay ({args.src}): first frame median {med(ours):.3f} s (min {min(ours):.3f}, max {max(ours):.3f})"
    )
    print(f"gpuplay's own share: {med(ours) - med(bare):.3f} s over the bare app's; goal 0.3 s in all")


if __name__ == "__main__":
    main()
