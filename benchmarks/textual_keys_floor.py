"""The least key -> repaint costs a Textual app of gpuplay's shape here, measured as `speed_app.py`
measures gpuplay's (the goal: p95 <= 50 ms for every key), and tmux's own floor under that.

- A bare Textual app with gpuplay's outline and content size, and nothing of gpuplay (no gpuplay
  import, no engine, no NumPy, no timers): a header; a bordered list of the shipped scenarios'
  titles over a panel of option rows (`t`, `a`, `p` move a row's highlighted option and redraw the
  Live tab's step chart and stats); a TabbedContent of seven tabs whose panes hold what gpuplay's do
  at comparable size (stats lines and a textual-plotext chart of 60 points; a DataTable of 10 rows x
  8 columns and two charts; code text; a telemetry chart; tables); `1`-`5` switch tabs; `?` opens an
  opaque ModalScreen help holding a Rich table of ~35 keys (titled "gpuplay keys", what
  `speed_app.region` looks for), Escape closes it; Down/Up move the list's highlight; a footer. It
  is started, driven and timed by `speed_app.one_app` (the same keys, the same 2 ms polling of
  tmux's copy of the screen, the same regions), alternating with `python -m gpuplay`.
- tmux's floor: the same `send-keys` and the same polling for a program that does nothing but echo:
  `cat` (the terminal's own echo, no user code) and a raw-mode Python loop that writes each key it
  reads. What is left is tmux: send-keys, the pane's output read, `capture-pane`, the poll.

    python benchmarks/textual_keys_floor.py [-n 3] [--rounds 3] [--src OTHER/src]
"""

from __future__ import annotations

import shlex
import sys
import tempfile
import time
from pathlib import Path

from speed_app import HEIGHT, KEYS, WIDTH, one_app, p95, report, screen, tmux, wait_for
from speedbench import header, med, parser
from textual_floor import titles

BARE_KEYS_APP = '''
import random

from rich.table import Table
from rich.text import Text
from textual.app import App
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import (DataTable, Footer, Header, Label, ListItem, ListView, Static,
                             TabbedContent, TabPane)
from textual_plotext import PlotextPlot

TITLES = {titles!r}
LEVERS = [
    ("b", "backend", ["NumPy", "PyTorch", "CuPy"]),
    ("d", "device", ["cpu", "cuda:0"]),
    ("t", "dtype", ["float64", "float32", "float16", "bfloat16"]),
    ("a", "AMP", ["off", "fp16", "bf16"]),
    ("c", "compile", ["off", "default", "reduce-overhead"]),
    ("f", "TF32", ["off", "on"]),
    ("g", "CUDA graphs", ["off", "on"]),
    ("p", "preset", ["quick", "standard", "full"]),
    ("l", "step limit", ["2 s", "5 s", "10 s"]),
]
TABS = ["Live", "Compare", "Code", "Telemetry", "Profile", "Collectives", "Sweep"]
rng = random.Random(34)


def series(n=60):
    return [20 + 30 * rng.random() for _ in range(n)]


class Chart(PlotextPlot):
    def __init__(self, title, lines=1, bars=False, **kw):
        super().__init__(**kw)
        self.title, self.lines, self.bars = title, lines, bars
        self.redraw()

    def redraw(self):
        plt = self.plt
        plt.clear_data()
        plt.title(self.title)
        if self.bars:
            plt.bar(["numpy", "torch", "cupy", "torch+c", "amp"], [rng.random() * 50 for _ in range(5)])
        else:
            for i in range(self.lines):
                plt.scatter(series(), marker="dot", label=f"series {{i}}")
        plt.xlabel("step")
        self.refresh()


def table(rows=10, cols=8, **kw):
    t = DataTable(**kw)
    t.add_columns(*(f"col {{c}}" for c in range(cols)))
    for r in range(rows):
        t.add_row(*(f"{{rng.random() * 100:.2f}} ms" for _ in range(cols)))
    return t


def stats(run):
    rows = [("config", f"numpy cpu float32 · run {{run}}"), ("phase", "done"),
            ("median", f"{{20 + rng.random() * 5:.1f}} ms ±7.5%  (n=73)"), ("p10–p90", "22.1 ms – 41 ms"),
            ("rate", "90.9 GFLOP/s  0.533 GB/s"), ("error", "3e-07 vs float64"),
            ("dtype", "float32 → computes in float32"), ("threads", "BLAS 1 of 2 cores"),
            ("device", "a CPU"), ("roof", "not calibrated"), ("noise", "other processes used 1.2 cores")]
    return "\\n".join(f"{{k:9s}} {{v}}" for k, v in rows)


class Help(ModalScreen):
    CSS = "Help {{ align: center middle; background: $background; }} #box {{ width: 72; height: auto; border: round $accent; }}"
    BINDINGS = [("escape", "dismiss", "close"), ("question_mark", "dismiss", "close"), ("q", "dismiss", "close")]

    def compose(self):
        t = Table(title="gpuplay keys", expand=True, box=None)
        t.add_column("key")
        t.add_column("action")
        for k in [*"bdtacfgivmuwjonyplrxes12345", "6", "7", "k", "h", "question_mark", "q", "up", "down"]:
            t.add_row(k, f"action of {{k}}")
        box = Static(t, id="box")
        box.border_title = "help"
        yield box


class Bare(App):
    CSS = """
    #side {{ width: 41; }}
    #scenarios {{ height: 13; border: round $accent; border-title-align: left; }}
    .lever {{ height: auto; }}
    #big {{ width: 20; }}
    #stats {{ height: auto; }}
    #step {{ height: 1fr; min-height: 12; }}
    Chart {{ min-height: 10; width: 1fr; }}
    #right {{ width: 1fr; }}
    #cmp-charts {{ height: 20; }}
    DataTable {{ height: auto; max-height: 12; }}
    """
    BINDINGS = [
        *(Binding(k, f"lever({{i}})", label) for i, (k, label, _) in enumerate(LEVERS)),
        *(Binding(str(i + 1), f"tab({{i}})", name.lower(), show=False) for i, name in enumerate(TABS)),
        Binding("question_mark", "help", "help"),
        Binding("down", "move(1)", show=False, priority=True),
        Binding("up", "move(-1)", show=False, priority=True),
        Binding("q", "quit", "quit"),
    ]

    def __init__(self):
        super().__init__()
        self.chosen = [0] * len(LEVERS)
        self.run_no = 0

    def compose(self):
        yield Header()
        with Horizontal():
            with Vertical(id="side"):
                lv = ListView(*(ListItem(Label(t)) for t in TITLES), id="scenarios")
                lv.border_title = "scenarios"
                yield lv
                for i in range(len(LEVERS)):
                    yield Static(self.row(i), id=f"lever{{i}}", classes="lever")
            with TabbedContent(id="tabs"):
                with TabPane("Live", id="tab0"), Horizontal():
                    yield Static("×\\nvs NumPy on the\\nCPU: this is the\\nbaseline", id="big")
                    with Vertical(id="right"):
                        yield Static(stats(0), id="stats")
                        yield Chart("step times", id="step")
                        yield Static("claim: matmul 4096×4096: 46.70 ms → 1.69 ms, 28×", id="claim")
                with TabPane("Compare", id="tab1"), VerticalScroll():
                    yield table()
                    with Horizontal(id="cmp-charts"):
                        yield Chart("speed-up", bars=True)
                        yield Chart("step times", lines=2)
                with TabPane("Code", id="tab2"), VerticalScroll():
                    yield Static("\\n".join(f"    y = x @ w{{i}}  # step {{i}}" for i in range(40)))
                with TabPane("Telemetry", id="tab3"):
                    yield Chart("utilisation", lines=2)
                with TabPane("Profile", id="tab4"), VerticalScroll():
                    yield table(12, 6)
                    yield Static(stats(0))
                with TabPane("Collectives", id="tab5"):
                    yield Static(stats(0))
                with TabPane("Sweep", id="tab6"), VerticalScroll():
                    yield Chart("sweep", lines=2)
                    yield table(8, 5)
        yield Footer()

    def row(self, i):
        key, label, options = LEVERS[i]
        text = Text(f" {{key}} {{label:12s}} ")
        for j, o in enumerate(options):
            text.append(o, "reverse bold" if j == self.chosen[i] else "dim")
            text.append(" ")
        return text

    def action_lever(self, i):
        self.chosen[i] = (self.chosen[i] + 1) % len(LEVERS[i][2])
        self.query_one(f"#lever{{i}}", Static).update(self.row(i))
        self.run_no += 1
        self.query_one("#stats", Static).update(stats(self.run_no))
        self.query_one("#step", Chart).redraw()

    def action_tab(self, i):
        self.query_one("#tabs", TabbedContent).active = f"tab{{i}}"

    def action_help(self):
        self.push_screen(Help())

    def action_move(self, d):
        lv = self.query_one("#scenarios", ListView)
        lv.action_cursor_down() if d > 0 else lv.action_cursor_up()


Bare().run()
'''

# A program that only echoes: what is left of a key's time is tmux's and the poll's.
RAW_ECHO = """
import os, sys, termios, tty
fd = sys.stdin.fileno()
old = termios.tcgetattr(fd)
tty.setraw(fd)
try:
    os.write(1, b"ready\\r\\n")
    n = 0
    while True:
        data = os.read(fd, 64)
        if not data or data == b"q":
            break
        n += 1
        os.write(1, f"key {n}: {data!r}\\r\\n".encode())
finally:
    termios.tcsetattr(fd, termios.TCSADRAIN, old)
"""


def echo_floor(command: str, ready: str, rounds: int, keys_: tuple[str, ...]) -> dict[str, list[float]]:
    """Each key's send-keys -> changed capture for a program that only echoes, polled as speed_app."""
    name = f"gpuplay-echo-{time.monotonic_ns()}"
    tmux("new-session", "-d", "-s", name, "-x", str(WIDTH), "-y", str(HEIGHT), f"{command}; sleep 60")
    out: dict[str, list[float]] = {k: [] for k in keys_}
    try:
        if wait_for(name, lambda: ready in tmux("capture-pane", "-p", "-t", name), 30) is None:
            raise SystemExit(f"{command} never showed {ready!r}")
        for _ in range(rounds):
            for key in keys_:
                time.sleep(0.5)
                before = screen(name)
                t1 = time.perf_counter()
                tmux("send-keys", "-t", name, key)
                t2 = wait_for(name, lambda before=before: screen(name) != before, 5)
                out[key].append((t2 - t1) if t2 is not None else float("inf"))
    finally:
        tmux("kill-session", "-t", name)
    return out


def summary(label: str, keys: dict[str, list[float]]) -> None:
    every = sorted(x for v in keys.values() for x in v)
    print(f"{label}: {len(every)} presses: median {med(every) * 1e3:.1f} ms, p95 {p95(every) * 1e3:.1f} ms, "
          f"max {every[-1] * 1e3:.1f} ms; per key medians: "
          + ", ".join(f"{k} {med(v) * 1e3:.1f}" for k, v in keys.items()))  # fmt: skip


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--rounds", type=int, default=3, help="presses of each key per app run")
    ap.add_argument("--no-gpuplay", action="store_true", help="time the bare app and tmux's floor only")
    args = ap.parse_args()
    header("key -> repaint: a bare Textual app of gpuplay's shape beside gpuplay, and tmux's floor, tmux 120×36",
           "gpuplay's key -> repaint p95 <= 50 ms for every key", args.runs)  # fmt: skip
    got: dict[str, tuple[list[float], list[float], dict[str, list[float]], dict[str, list[float]]]] = {
        who: ([], [], {k: [] for k in KEYS}, {k: [] for k in KEYS}) for who in ("bare", "gpuplay")}  # fmt: skip
    floors: dict[str, dict[str, list[float]]] = {"cat": {k: [] for k in KEYS}, "raw": {k: [] for k in KEYS}}
    py = shlex.quote(sys.executable)
    with tempfile.TemporaryDirectory(prefix="keysfloor-") as tmp:
        script = Path(tmp) / "bare_keys_app.py"
        script.write_text(BARE_KEYS_APP.format(titles=titles()))
        echo = Path(tmp) / "raw_echo.py"
        echo.write_text(RAW_ECHO)
        bare = f"{py} {shlex.quote(str(script))}"
        for i in range(args.runs):
            order = ["bare", "gpuplay"] if i % 2 == 0 else ["gpuplay", "bare"]
            for who in order:
                if who == "gpuplay" and args.no_gpuplay:
                    continue
                try:
                    f, ks, q, cs = (one_app(args.src, args.rounds, KEYS, app=bare, marker=b"bare_keys_app")
                                    if who == "bare" else one_app(args.src, args.rounds, KEYS))  # fmt: skip
                except SystemExit as e:  # one app run that never showed its screen: said, not counted
                    print(f"run {i + 1}, {who}: {e}; not counted", file=sys.stderr, flush=True)
                    continue
                print(f"run {i + 1}, {who}: done", file=sys.stderr, flush=True)
                firsts, quits, keys, cpu = got[who]
                firsts.append(f)
                quits.append(q)
                for k, v in ks.items():
                    keys[k] += v
                    cpu[k] += cs[k]
            for k, v in echo_floor("cat", "", args.rounds, KEYS).items():
                floors["cat"][k] += v
            for k, v in echo_floor(f"{py} {shlex.quote(str(echo))}", "ready", args.rounds, KEYS).items():
                floors["raw"][k] += v
    print("## bare Textual app of gpuplay's shape (no gpuplay)")
    report(*got["bare"])
    if not args.no_gpuplay:
        print(f"## gpuplay from {args.src}")
        report(*got["gpuplay"])
    # Escape's wait is the terminal driver's: stock Textual's (ESCDELAY 100 ms, read in select(0.1)
    # rounds) in the bare app, gpuplay's own driver's 25 ms in gpuplay. The other keys side by side:
    for who in ("bare", "gpuplay"):
        if got[who][2]["t"]:
            summary(f"{who}, every key but Escape", {k: v for k, v in got[who][2].items() if k != "Escape"})
    print("## tmux's floor: send-keys -> changed capture, same polling")
    summary("cat (the terminal's echo)", floors["cat"])
    summary("raw-tty Python echo", floors["raw"])


if __name__ == "__main__":
    main()
