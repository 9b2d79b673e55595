"""`gpuplay demo DECK`: present a demo deck live, rehearse it into a recording, or replay one."""

from __future__ import annotations

import sys
import threading
from typing import Any

import click

from gpuplay.cli import options
from gpuplay.cli.options import scenario_dirs_option
from gpuplay.cli.output import emit, load_scenarios, log_results, stderr_console
from gpuplay.core.storage.safetext import visible


@click.command()
@click.argument("deck")
@click.option(
    "--theme",
    default=None,
    metavar="NAME",
    help="Textual theme: 'projector' (high contrast, dark), 'projector-light', or any built-in theme.",
)
@click.option(
    "--preset",
    "-p",
    default=None,
    help="Override every step's preset (e.g. quick for a fast rehearsal); recorded figures are then dropped.",
)
@click.option(
    "--rehearse", is_flag=True, help="Run every step headless and record the results (needs --out)."
)
@click.option("--out", type=options.OutPath(), default=None, help="Where --rehearse writes its JSON.")
@click.option(
    "--replay",
    type=click.Path(dir_okay=False),
    default=None,
    help="Present a rehearsal's recorded results instead of measuring (no GPU needed).",
)
@click.option(
    "--fallback",
    type=click.Path(dir_okay=False),
    default=None,
    help="Live, show this rehearsal's figure for any step that cannot run here.",
)
@click.option(
    "--resume",
    is_flag=True,
    help="Start at the step this deck was last on (saved in the state folder at every step).",
)
@scenario_dirs_option
def demo(
    deck: str,
    theme: str | None,
    preset: str | None,
    rehearse: bool,
    out: str | None,
    replay: str | None,
    fallback: str | None,
    resume: bool,
    scenario_dirs: tuple[str, ...],
) -> None:
    """Present DECK (a deck .toml, or a shipped deck's name: numpy-to-gpu, the-7633x-question,
    gpu-pays-off, inference-runtimes, levers-ladder).

    → space PageDown: next · ← PageUp: previous · Home/End · g N Enter: step N ·
    b or .: blank · f: big number · t: timer · r: re-run · n: notes · q: quit (asks once).
    """
    from gpuplay.core.reports.decks import (
        DeckError,
        RecordingError,
        load_deck,
        load_recording,
        resolve_deck_path,
    )

    if rehearse and not out:
        raise click.UsageError("--rehearse needs --out FILE (where the recording goes)")
    if rehearse and replay:
        raise click.UsageError("--rehearse measures and --replay shows a recording: choose one")
    if out and not rehearse:
        raise click.UsageError("--out is for --rehearse")
    if out:  # a recording is JSON: `--out talk.md` would hold JSON under a Markdown name
        options.out_format("json", out, ("json",), param="out")
    sset = load_scenarios(options.scenario_dirs(click.get_current_context(), scenario_dirs))
    err = stderr_console()
    # A deck or recording that cannot be used is the caller's mistake: a usage error (exit 2), as
    # `serve --demo` refuses it, with the file, step and field in the reason.
    try:
        recording = load_recording(replay) if replay else None
    except (RecordingError, RecursionError) as exc:
        raise click.BadParameter(_reason(exc), param_hint="--replay") from None
    if recording is not None and preset is None:
        preset = recording.preset  # the sizes the rehearsal measured, not the deck's own
    try:
        loaded = load_deck(resolve_deck_path(deck), sset, preset)
    except (DeckError, RecursionError) as exc:
        raise click.BadParameter(_reason(exc), param_hint="DECK") from None
    try:
        fallback_rec = load_recording(fallback) if fallback else None
    except (RecordingError, RecursionError) as exc:
        raise click.BadParameter(_reason(exc), param_hint="--fallback") from None
    for rec in (recording, fallback_rec):
        if rec is not None and rec.missing:
            err.print(
                f"{rec.path}: an older recording without {'; without '.join(rec.missing)}",
                style="yellow",
                highlight=False,
                markup=False,
            )
    if rehearse:
        assert out is not None
        _rehearse(loaded, out)
        return
    from gpuplay.cli.terminal import require_terminal

    require_terminal("the presenter (a deck shown live)")
    from gpuplay.tui.presenter import PresenterApp

    try:
        from gpuplay.core.reports.decks import saved_position
        from gpuplay.core.reports.talkresults import load_results, prune_stale

        prune_stale(loaded)  # per-tab files of talks over for a week
        start = saved_position(loaded) if resume else 0
        earlier: dict[Any, Any] = {}
        if resume and recording is None:
            earlier, problem = load_results(loaded)
            if problem:
                err.print(visible(problem, one_line=True), style="yellow", highlight=False, markup=False)
        app = PresenterApp(
            loaded, replay=recording, fallback=fallback_rec, theme=theme, start_step=start, earlier=earlier
        )
    except ValueError as exc:  # an unknown theme
        raise click.BadParameter(str(exc), param_hint="--theme") from None
    app.run()


def _reason(exc: BaseException) -> str:
    return "nested too deeply" if isinstance(exc, RecursionError) else str(exc)


def _rehearse(deck: Any, out: str) -> None:
    from rich.markup import escape

    from gpuplay.core.engine import measure as run
    from gpuplay.core.reports.decks import needed_specs, recording_json
    from gpuplay.core.studies.compare import attach_baselines

    err = stderr_console()
    specs = needed_specs(deck)
    swept = [i for i, step in enumerate(deck.steps, 1) if step.sweep is not None]
    if swept:  # said before the count, so "[1/1]" on a four-step deck is not a surprise
        which = ", ".join(str(i) for i in swept)
        err.print(
            f"step{'s' if len(swept) > 1 else ''} {which} of {len(deck.steps)}: sweep step"
            f"{'s' if len(swept) > 1 else ''}, not recorded (a recording holds single figures; "
            "a sweep runs live, or record one with gpuplay sweep --format json)",
            style="yellow",
            highlight=False,
            markup=False,
        )
    results = []
    cancel = threading.Event()
    try:
        for i, spec in enumerate(specs, 1):
            head = escape(f"[{i}/{len(specs)}] {spec.label()}")
            with err.status(f"{head} …") as status:
                # the phase line says when another session holds the device ("cpu busy: …")

                def on_phase(ph: str, _detail: str, h: str = head, s: Any = status) -> None:
                    s.update(f"{h}: {escape(ph)} …")

                r = run(spec, cancel=cancel, on_phase=on_phase)
            results.append(r)
            mark = r.status if r.status != "ok" else f"median {r.median * 1e3:.3g} ms" if r.median else "ok"
            err.print(f"[{i}/{len(specs)}] {spec.label()} {r.size}: {mark}", highlight=False, markup=False)
            if r.status in ("failed", "refused"):
                err.print(f"    {visible(r.message)}", style="dim", highlight=False, markup=False)
    except KeyboardInterrupt:
        cancel.set()
        raise click.Abort() from None
    log_results(results)
    emit(recording_json(deck, results), out)
    from gpuplay.cli.output import rich_table, stdout_console

    shown = [row for row in attach_baselines(results) if row.result.summary is not None]
    if shown:
        from gpuplay.core.reports.report import footnotes

        con = stdout_console()  # piped, lines stay whole (no hard wrap at 80 columns)
        con.print(rich_table(shown, f"{deck.title}: rehearsal"))
        for line in footnotes(shown):
            con.print(visible(line), style="dim", highlight=False, markup=False)
    if not shown:
        sys.exit(1)


command = demo
