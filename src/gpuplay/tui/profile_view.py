"""The Profile tab: what torch.profiler saw over a few steps of the current configuration.

Renders the plain dict `gpuplay.core.runner.profile.profile_spec` returns; it neither
profiles nor imports torch (the engine process does that and sends the dict).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.markup import escape
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Static

from gpuplay.core.measure.torchprof import counted_words

HOW = (
    "A profile starts by itself when this tab is shown (key 5) and nothing is measuring; "
    "change the configuration (b backend, d device, t dtype, c compile …) to profile another."
)
EMPTY = (
    "No profile yet: waiting for the measurement in progress. A profile runs torch.profiler over a few "
    "steps of the current configuration: the top operators and kernels, the kernel count per step, and "
    "the share of each step that is overhead (what torch.compile and CUDA graphs remove). "
    f"{HOW} Headless: gpuplay run SCENARIO -b torch --profile"
)

OP_COLUMNS = (
    ("calls", "calls/step"),
    ("self_cpu_ms", "self CPU ms"),
    ("cpu_total_ms", "CPU total ms"),
    ("device_ms", "GPU ms"),
)
KERNEL_COLUMNS = (("calls", "calls/step"), ("device_ms", "GPU ms"))


def summary_markup(profile: Mapping[str, Any]) -> str:
    """The profile's headline in Rich markup: the figures a reader needs before the tables."""
    head = f"[b]Profile[/] {escape(str(profile.get('label', '')))}"
    if profile.get("size"):
        head += f" at {escape(str(profile['size']))}"
    if profile.get("status") != "ok":
        return (
            f"{head}\n[red]{escape(str(profile.get('status')))}:[/] {escape(str(profile.get('message', '')))}"
            f"\n[dim]{escape(HOW)}[/]"
        )
    share = profile.get("overhead_share")
    kernels = profile.get("kernels_per_step")
    where = "kernels" if "cuda" in profile.get("activities", ()) else "operators"
    lines = [
        f"{head} · {escape(str(profile['tool']))} · {profile['steps']} steps",
        f"[b]{profile['wall_ms_per_step']:.3f} ms[/] per step · {profile['busy_ms_per_step']:.3f} ms in {where}",
        f"[b]{'—' if kernels is None else f'{kernels:g}'}[/] {escape(counted_words(kernels, str(profile['kernels_counted'])))} per step",
        f"overhead [b]{'—' if share is None else f'{share:.0%}'}[/]: {escape(str(profile['overhead_definition']))}",
    ]
    if profile.get("trace"):
        lines.append(f"Chrome trace: {escape(str(profile['trace']))}")
    lines += [f"[dim]{escape(str(n))}[/]" for n in profile.get("notes", ())]
    return "\n".join(lines)


class ProfileView(VerticalScroll):
    """Headline, top operators, top kernels (CUDA only). Call `show(profile_dict)` to fill it."""

    DEFAULT_CSS = """
    ProfileView { height: 1fr; }
    ProfileView > Static { padding: 0 1 1 1; }
    ProfileView > DataTable { height: auto; max-height: 16; margin-bottom: 1; }
    """

    def compose(self) -> ComposeResult:
        yield Static(EMPTY, id="profile-summary")
        yield DataTable(id="profile-ops", zebra_stripes=True, cursor_type="row")
        yield DataTable(id="profile-kernels", zebra_stripes=True, cursor_type="row")

    def on_mount(self) -> None:
        for table_id in ("#profile-ops", "#profile-kernels"):
            self.query_one(table_id, DataTable).display = False

    def show(self, profile: Mapping[str, Any] | None) -> None:
        """Render a profile dict (None: back to the empty explanation)."""
        summary = self.query_one("#profile-summary", Static)
        summary.update(EMPTY if profile is None else summary_markup(profile))
        data: Mapping[str, Any] = profile if profile is not None and profile.get("status") == "ok" else {}
        gpu = "cuda" in data.get("activities", ())
        ops_columns = OP_COLUMNS if gpu else OP_COLUMNS[:-1]  # no GPU column on a CPU run
        self._fill("#profile-ops", "operator", ops_columns, list(data.get("top_ops", [])))
        self._fill("#profile-kernels", "kernel", KERNEL_COLUMNS, list(data.get("top_kernels", [])))

    def _fill(self, table_id: str, first: str, columns: tuple[tuple[str, str], ...], rows: list[Any]) -> None:
        table = self.query_one(table_id, DataTable)
        table.clear(columns=True)
        table.display = bool(rows)
        if not rows:
            return
        table.add_column(first)
        for _, title in columns:
            table.add_column(title)
        for row in rows:
            table.add_row(str(row["name"]), *(f"{float(row.get(key) or 0):.3g}" for key, _ in columns))
