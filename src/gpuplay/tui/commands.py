"""gpuplay's own command palette entries (ctrl+p) and the ids users remap keys by.

The palette lists what a key does and what no key reaches directly: any scenario, any value
of any lever (with the reason when it cannot run here), every tab, exports. Textual's own
provider beside it switches themes (gpuplay's projector themes included) and shows the keys.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import Any

from textual.binding import Binding
from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.content import Content
from textual.markup import escape

from gpuplay.core.storage.safetext import visible
from gpuplay.tui.controls import controls_for, label, values_for, verdict_for, with_value
from gpuplay.tui.tabs import TAB_IDS

TABS = TAB_IDS  # every tab, in the order of its key

# Binding ids for actions whose name does not say it in a user's words.
_IDS = {"cycle_preset": "preset", "cycle_limit": "step_limit", "save_svg": "screenshot",
        "collectives": "collectives_sweep"}  # fmt: skip


def binding_id(action: str) -> str:
    """The id of the binding for `action`: "cycle('dtype')" → "dtype", "tab('live')" → "tab_live"."""
    m = re.fullmatch(r"(\w+)\('(\w+)'\)", action)
    if m:
        return m[2] if m[1] == "cycle" else f"{m[1]}_{m[2]}"
    return _IDS.get(action, action)


def with_ids(bindings: Sequence[Binding | Any]) -> list[Binding | Any]:
    """The bindings, each with an id (App.set_keymap remaps by id). Priority bindings (ctrl+c)
    keep no id: quitting must stay reachable whatever a keymap says."""
    out: list[Binding | Any] = []
    for b in bindings:
        if isinstance(b, Binding) and b.id is None and not b.priority:
            b = dataclasses.replace(b, id=binding_id(b.action))
        out.append(b)
    return out


class GpuplayCommands(Provider):
    """Scenarios, lever values, tabs and exports of the playground."""

    def commands(self) -> Iterator[tuple[str, Callable[[], Any], str]]:
        app: Any = self.app
        replaced = app.scenario_set.replaced
        for sc in app.scenario_set.scenarios.values():
            help_text = (
                sc.name
                if sc.name not in replaced
                else f"{sc.name}: your file {sc.path} replaces the shipped one"
            )
            yield f"scenario: {sc.title}", partial(app.choose_scenario_from_palette, sc.name), help_text
        spec = app.spec
        if spec is not None:
            for c in controls_for(spec):
                for value in values_for(c.field):
                    if value == c.value(spec):
                        continue
                    verdict = verdict_for(spec, c.field, value)
                    why = "" if verdict is None else str(verdict)
                    text = f"{c.title}: {label(value)}"
                    if why:
                        yield text, partial(app.notify, why, title=f"{text} cannot run here"), why
                    else:
                        yield text, partial(app.set_lever, c.field, value), f"key {c.key} cycles {c.title}"
        for i, tab in enumerate(TABS, 1):
            yield f"show {tab}", partial(app.action_tab, tab), f"key {i}"
        yield "export the session (JSON, CSV, Markdown)", app.action_export, f"into {app.export_dir}"
        yield "save a screenshot (SVG)", app.action_save_svg, f"into {app.export_dir}"
        yield "re-run the current configuration", app.action_rerun, "key r"
        yield "reset the session's comparison", app.action_reset, "key x"
        yield "sweep collectives (local ranks)", app.action_collectives, "key k"
        yield (
            "tune: climb the levers ladder on this scenario",
            partial(_tune, app),
            f"key {TABS.index('tune') + 1}, enter",
        )

    async def discover(self) -> Hits:
        for text, callback, help_text in self.commands():
            if ": " not in text:  # tabs and actions; scenarios and lever values by search
                plain = visible(text, one_line=True)
                yield DiscoveryHit(Content(plain), callback, text=plain, help=_help(help_text))

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, callback, help_text in self.commands():
            score = matcher.match(text)
            if score > 0:
                plain = visible(text, one_line=True)
                yield Hit(score, _highlight(matcher, plain), callback, text=plain, help=_help(help_text))


def _tune(app: Any) -> None:
    """Show the Tune tab and start its ladder (or stop the one that runs)."""
    app.action_tab("tune")
    app.tab("tune").start_stop()


# Textual reads a hit's prompt and help as markup, and Matcher.highlight its candidate: a
# scenario's title or a path is a file's text (a `[red]` in it was a colour, its ESC gone).
def _highlight(matcher: Any, plain: str) -> Content:
    """The prompt as plain Content (never parsed as markup), the query's matches highlighted."""
    content = Content(plain)
    _score, offsets = matcher.fuzzy_search.match(matcher.query, plain)
    for offset in offsets:
        if not plain[offset].isspace():
            content = content.stylize(matcher.match_style, offset, offset + 1)
    return content


def _help(text: str) -> str:
    """A hit's help line (markup to Textual) that reads as itself: controls shown, markup escaped."""
    return escape(visible(text, one_line=True))


def set_lever(app: Any, field: str, value: Any) -> None:
    """Set one lever to `value` (the palette's choice) and measure, as its key would."""
    if app.spec is None:
        return
    new = with_value(app.spec, field, value)
    if new != app.spec:
        app.spec = new
        app.start_measurement()
    app.refresh_controls()


SHOWN_UNKNOWN = 5  # unknown [keymap] ids named in the warning; the rest are counted


def keymap_problems(
    keymap: dict[str, str], bindings: Sequence[Binding | Any]
) -> tuple[dict[str, str], list[str]]:
    """The entries of `keymap` that name a binding id, and a line for each that does not."""
    ids = {b.id for b in bindings if isinstance(b, Binding) and b.id}
    good = {k: v for k, v in keymap.items() if k in ids}
    unknown = [k for k in keymap if k not in ids]
    if not unknown:
        return good, []
    # One line however many: a config with 10,000 unknown ids once drew 10,000 toasts, each
    # listing every known id, and took 5.8 s to start.
    shown = ", ".join(repr(visible(k, one_line=True)[:40]) for k in unknown[:SHOWN_UNKNOWN])
    more = f" and {len(unknown) - SHOWN_UNKNOWN} more" if len(unknown) > SHOWN_UNKNOWN else ""
    what = "no key binding called" if len(unknown) == 1 else f"{len(unknown)} unknown key binding ids:"
    return good, [f"config.toml [keymap]: {what} {shown}{more}; ignored (known: {', '.join(sorted(ids))})"]


# What each key that is not a lever does, in a line (a lever's line is its own help text).
KEY_HELP = {
    "cycle_preset": "the problem size: quick (seconds), published (the size its claim was made at), default",
    "cycle_limit": "a configuration whose one step is estimated longer (2, 10 or 60 s) is refused",
    "pause": "hold the measurement between steps; press again to go on",
    "rerun": "measure the current configuration again, from warm-up",
    "reset": "forget the results measured since the app started (the Compare tab empties)",
    "export": "write the results measured since the app started as JSON, CSV and Markdown into the export folder",
    "save_svg": "save what the screen shows as an SVG file in the export folder",
    "collectives": "run the multi-GPU collectives sweep (all_reduce, all_gather, …)",
    "help": "show or close this help",
    "quit": "leave gpuplay (a measurement in progress is stopped)",
}
TAB_HELP = {
    "live": "the current configuration's figures and step times",
    "compare": "every configuration measured since the app started, side by side, with the roofline",
    "code": "the workload's NumPy source beside the chosen backend's",
    "telemetry": "CPU, memory and GPU use over the last minutes",
    "profile": "where the time of one step goes, operator by operator",
    "collectives": "multi-GPU communication timings",
    "sweep": "the same configurations across problem sizes",
    "tune": "the levers checklist climbed one change at a time, each kept only if it proves faster",
}


def explain(b: Binding) -> str:
    """One line on what a binding does: the lever's own help, a tab's contents, or KEY_HELP."""
    from gpuplay.core.catalogue import levers

    lever = next((lv for lv in levers.live_levers() if lv.name == b.id), None)
    if lever is not None:
        return lever.help.rstrip(".")
    if b.action.startswith("tab("):
        return f"show the {b.description} tab: {TAB_HELP.get(b.description, '')}".rstrip(": ")
    return KEY_HELP.get(b.action.partition("(")[0], "")


def help_rows(bindings: Sequence[Binding | Any], keymap: dict[str, str]) -> list[tuple[str, str]]:
    """The help screen's rows: every binding's key as the keymap has it, its name and, after an
    em dash, what it does in one line (a bare "preset" told a new user nothing)."""
    rows = []
    for b in bindings:
        if not isinstance(b, Binding) or (b.action == "quit" and b.key == "ctrl+c"):
            continue
        key = keymap.get(b.id or "", b.key).replace("question_mark", "?")
        what = explain(b)
        rows.append((key, f"{b.description} — {what}" if what else b.description))
    return [*rows, ("↑ ↓", "choose a scenario (in the list)")]
