"""The presenter view through Textual's Pilot: navigation, live figures, replay labels, fallbacks."""

from __future__ import annotations

import os

import pytest

from gpuplay.core.catalogue.scenarios import load_scenarios
from gpuplay.core.reports.decks import load_recording, parse_deck, recording_json
from gpuplay.core.result import RunResult
from gpuplay.tui import presenter
from gpuplay.tui.bignumber import BigNumber
from gpuplay.tui.presenter import PresenterApp, Staircase
from tests.tui_helpers import tiny_scenarios, wait_until

DECK = """
title = "tiny deck"
preset = "quick"
[defaults]
budget_s = 0.05
warmup = 1
[[steps]]
title = "NumPy matmul"
scenario = "matmul"
caption = "the baseline caption"
notes = "say the baseline"
[[steps]]
title = "torch matmul"
scenario = "matmul"
backend = "torch"
caption = "torch caption"
[[steps]]
title = "on a GPU that is not here"
scenario = "matmul"
backend = "torch"
device = "cuda:9"
caption = "the device"
{recorded}
"""
RECORDED = """[steps.recorded]
median_ms = 0.5
speedup = 42
device = "Big GPU"
source = "a rehearsal elsewhere"
"""


@pytest.fixture
def scenarios(tmp_path):
    return load_scenarios([tiny_scenarios(tmp_path / "sc")])


def deck_of(scenarios, recorded: str = RECORDED):
    return parse_deck(DECK.replace("{recorded}", recorded), scenarios, "tiny.toml")


def text(app, selector: str) -> str:
    """What a Static shows, as plain text (tables included)."""
    from rich.console import Console

    console = Console(width=200, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    console.print(app.query_one(selector).content)
    # one line: the figure's note and detail are broken into lines to their width (keeptogether)
    return " ".join(console.export_text().split())


async def test_next_previous_and_live_staircase(scenarios):
    app = PresenterApp(deck_of(scenarios))
    async with app.run_test(size=(100, 30)) as pilot:
        assert "step 1 of 3" in text(app, "#deck-bar") and "live on " in text(app, "#deck-bar")
        assert "the baseline caption" in text(app, "#caption")
        await wait_until(pilot, lambda: app.deck.steps[0].spec in app.measured)
        assert app.query_one("#speedup", BigNumber).value == "1x"  # NumPy is its own baseline
        await pilot.press("left")  # already first: stays
        assert app.index == 0
        await pilot.press("space")
        assert app.index == 1 and "torch caption" in text(app, "#caption")
        await wait_until(pilot, lambda: app.deck.steps[1].spec in app.measured)
        digits = app.query_one("#speedup", BigNumber).value
        assert digits.endswith("x") and digits != "-"
        rows = app.query_one(Staircase).rows
        assert [r[0] for r in rows] == ["NumPy matmul", "torch matmul"]
        assert all(fig is not None and fig.median for _, fig, _ in rows)
        await pilot.press("left")
        assert app.index == 0 and "the baseline caption" in text(app, "#caption")
        assert len(app.query_one(Staircase).rows) == 1
        await pilot.press("right", "right")
        assert app.index == 2
        await pilot.press("right")  # already last: stays
        assert app.index == 2


async def test_unavailable_step_falls_back_to_recorded_figure_and_says_so(scenarios):
    app = PresenterApp(deck_of(scenarios))
    async with app.run_test(size=(100, 30)) as pilot:
        app.index = 2
        app.show_step()
        await wait_until(pilot, lambda: app.deck.steps[2].spec in app.failed)
        detail = text(app, "#detail")
        assert "refused here" in detail and "showing the recorded figure: Big GPU" in detail
        note = text(app, "#speedup-note")
        assert "RECORDED FIGURE, not measured here · median 500 µs · vs NumPy on the CPU" in note
        assert app.query_one("#speedup", BigNumber).value == "42x"
        assert app.query_one("#speedup").has_class("fallback")


async def test_unavailable_step_without_recorded_figure(scenarios):
    app = PresenterApp(deck_of(scenarios, recorded=""))
    async with app.run_test(size=(100, 30)) as pilot:
        app.index = 2
        app.show_step()
        await wait_until(pilot, lambda: app.deck.steps[2].spec in app.failed)
        assert "no recorded figure for this step" in text(app, "#detail")
        assert app.query_one("#speedup", BigNumber).value == "-"


async def test_replay_labels_every_figure_and_measures_nothing(scenarios, tmp_path, monkeypatch):
    deck = deck_of(scenarios, recorded="")
    base, torch_cpu, gpu = (s.spec for s in deck.steps)
    results = [
        RunResult(base, samples=[0.020] * 5, size="64×64", conditions={"device_name": "CPU"}),
        RunResult(torch_cpu, samples=[0.010] * 5, size="64×64"),
        RunResult(gpu, samples=[0.001] * 5, size="64×64", conditions={"device_name": "Recorded GPU 9000"}),
    ]
    path = tmp_path / "rec.json"
    path.write_text(recording_json(deck, results))

    def must_not_measure(*a, **k):
        raise AssertionError("replay must not measure")

    monkeypatch.setattr(presenter, "measure", must_not_measure)
    rec = load_recording(path)
    app = PresenterApp(deck, replay=rec, theme="projector")
    async with app.run_test(size=(100, 30)) as pilot:
        assert app.theme == "projector"
        bar = text(app, "#deck-bar")
        assert f"recorded on Recorded GPU 9000, {rec.date}" in bar
        await pilot.press("right")
        assert app.query_one("#speedup", BigNumber).value == "2x"
        assert "recorded · median of 5 · Recorded GPU 9000" in text(app, "#speedup-note")
        await pilot.press("right")
        assert app.query_one("#speedup", BigNumber).value == "20x"
        medians = [fig.median for _, fig, _ in app.query_one(Staircase).rows]
        assert medians == pytest.approx([0.020, 0.010, 0.001])


def test_unknown_theme_is_refused(scenarios):
    with pytest.raises(ValueError, match="unknown theme 'nope'.*projector"):
        PresenterApp(deck_of(scenarios), theme="nope")


def test_fallback_recording_fills_a_step_that_cannot_run_here(scenarios, tmp_path):
    """--fallback FILE: a rehearsal's figure (from a GPU box) stands in, labelled with its origin."""
    from gpuplay.tui.presenter import figure_for

    deck = deck_of(scenarios, recorded="")
    base, _, gpu = (s.spec for s in deck.steps)
    recorded = [
        RunResult(base, samples=[0.030] * 5, size="64×64"),
        RunResult(gpu, samples=[0.003] * 5, size="64×64", conditions={"device_name": "Box GPU"}),
    ]
    path = tmp_path / "gpu-box.json"
    path.write_text(recording_json(deck, recorded))
    rec = load_recording(path)
    refused_here = RunResult(gpu, status="refused", message="no CUDA here")
    fig = figure_for(deck.steps[2], refused_here, None, source="live", fallback=rec)
    assert fig.source == "fallback" and fig.median == pytest.approx(0.003)
    assert fig.speedup == pytest.approx(10.0)  # the recording's own baseline, not this machine's
    assert "refused here: no CUDA here" in fig.detail and "recorded on Box GPU" in fig.detail


# -- a speaker's keys ------------------------------------------------------------------
async def test_clicker_keys_page_home_end_and_go_to_step(scenarios):
    app = PresenterApp(deck_of(scenarios), autostart=False, remember=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("pagedown")  # a clicker's "next", with no click first
        assert app.index == 1 and "torch caption" in text(app, "#caption")
        await pilot.press("pageup")
        assert app.index == 0
        await pilot.press("end")
        assert app.index == 2
        await pilot.press("home")
        assert app.index == 0
        await pilot.press("g")
        assert "go to step" in text(app, "#prompt") and app.query_one("#prompt").display
        await pilot.press("2")  # 20 > 3 steps: no further digit can follow, so it goes at once
        assert app.index == 1 and not app.query_one("#prompt").display
        await pilot.press("g", "9")
        assert app.index == 1  # no step 9: stays, and says so
        await pilot.press("3")  # a digit outside `g` does nothing
        assert app.index == 1
        await pilot.press("g", "escape", "right")
        assert app.index == 2


async def test_go_to_step_with_enter_on_a_long_deck(scenarios):
    steps = "".join(
        f'[[steps]]\ntitle = "s{i}"\nscenario = "matmul"\ncaption = "c{i}"\n' for i in range(1, 13)
    )
    deck = parse_deck('title = "long"\n' + steps, scenarios, "long.toml")
    app = PresenterApp(deck, autostart=False, remember=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("g", "1")  # 1 could be 1, 10, 11 or 12: waits for Enter
        assert app.index == 0 and "go to step: 1" in text(app, "#prompt")
        await pilot.press("1", "enter")
        assert app.index == 10 and "c11" in text(app, "#caption")
        await pilot.press("g", "1", "enter")
        assert app.index == 0


async def test_quit_asks_once(scenarios):
    app = PresenterApp(deck_of(scenarios), autostart=False, remember=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("q")
        assert app.is_running and "End the talk?" in text(app, "#prompt")
        await pilot.press("escape")
        assert app.is_running and not app.query_one("#prompt").display
        await pilot.press("y")  # y means nothing unless asked
        assert app.is_running
        await pilot.press("q", "right")  # a step key also says "stay"
        assert app.is_running and app.index == 1 and not app.query_one("#prompt").display
        await pilot.press("q", "q")
        assert not app.is_running


async def test_quit_confirmed_with_y(scenarios):
    app = PresenterApp(deck_of(scenarios), autostart=False, remember=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("q", "y")
        assert not app.is_running


async def test_the_clock_tick_that_lands_while_the_talk_closes_is_dropped(scenarios):
    # The talk's clock ticks each second from an interval; one tick landed after the screen's
    # widgets were gone (NoMatches '#deck-bar' in the whole suite's run), failing the app's exit.
    app = PresenterApp(deck_of(scenarios), autostart=False, remember=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("t")
        await app.query_one("#deck-bar").remove()
        app.tick_clock()  # as the interval does, with the bar already unmounted


async def test_blank_screen_big_number_and_timer(scenarios):
    app = PresenterApp(deck_of(scenarios), autostart=False, remember=False)
    async with app.run_test(size=(120, 36)) as pilot:
        caption = app.query_one("#caption")
        await pilot.press("b")
        assert app.screen.has_class("blanked") and not caption.display and app.query_one("#blank").display
        await pilot.press("full_stop")  # a clicker's other "blank" key toggles it back
        assert not app.screen.has_class("blanked") and caption.display
        await pilot.press("b", "pagedown")  # the first step key only brings the slide back
        assert not app.screen.has_class("blanked") and app.index == 0

        number = app.query_one("#speedup", BigNumber)
        number.update("42x")
        await pilot.pause()
        small = number.scale
        await pilot.press("f")
        await pilot.pause()
        assert app.screen.has_class("big-number") and not caption.display
        assert number.scale > small >= 1 and number.content_size.width > 100  # the screen's width
        await pilot.press("f")
        await pilot.pause()
        assert number.scale == small

        assert "⏱" not in text(app, "#deck-bar")
        await pilot.press("t")
        assert "⏱ 0:00" in text(app, "#deck-bar")
        app.timer_started -= 75
        app.draw_bar()
        assert "⏱ 1:15" in text(app, "#deck-bar")
        await pilot.press("t")  # reset
        assert "⏱ 0:00" in text(app, "#deck-bar")


async def test_the_chart_keeps_its_size_as_the_talk_moves_on(scenarios):
    app = PresenterApp(deck_of(scenarios), autostart=False, remember=False)
    async with app.run_test(size=(100, 30)) as pilot:
        heights = []
        for _ in range(3):
            await pilot.pause()
            heights.append((app.query_one("#middle").size.height, app.query_one(Staircase).size.height))
            await pilot.press("right")
        assert len(set(heights)) == 1, heights


async def test_position_is_saved_per_deck_and_resumed(scenarios):
    from gpuplay.core.reports.decks import saved_position

    deck = deck_of(scenarios)
    app = PresenterApp(deck, autostart=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("right", "right")
    assert saved_position(deck) == 2
    app = PresenterApp(deck, autostart=False, start_step=saved_position(deck))
    async with app.run_test(size=(100, 30)):
        assert app.index == 2 and "step 3 of 3" in text(app, "#deck-bar")


# -- live and recorded, labelled ------------------------------------------------------
async def test_live_and_recorded_bars_say_what_they_are(scenarios):
    """A live bar and a recorded one in one staircase: each says live/recorded, where, when, which statistic."""
    recorded = RECORDED.replace('source = "a rehearsal elsewhere"', 'source = "a blog"\nstatistic = "mean"')
    app = PresenterApp(deck_of(scenarios, recorded), remember=False)
    async with app.run_test(size=(140, 36)) as pilot:
        await wait_until(pilot, lambda: app.deck.steps[0].spec in app.measured)
        app.index = 2
        app.show_step()
        await wait_until(pilot, lambda: app.deck.steps[2].spec in app.failed)
        figs = [fig for _, fig, _ in app.query_one(Staircase).rows]
        live, gpu = figs[0], figs[2]
        assert live.tag.startswith("live · median of ") and "here (cpu)" in live.tag
        assert live.when and ":" in live.when  # the local time it was measured
        assert gpu.tag == "recorded · mean · Big GPU · a blog"  # a blog's mean is a mean
        note = text(app, "#speedup-note")
        assert "mean 500 µs" in note or "mean 0.5 ms" in note or "mean 500" in note, note
        assert "median" not in note
        drawn = app.query_one(Staircase).render().plain
        assert "live · median of" in drawn and "recorded · mean · Big GPU" in drawn


# -- snapshots: a replayed talk, so every figure and date is fixed ------------------------
def replayed_app(scenarios) -> PresenterApp:
    from gpuplay.core.reports.decks import Recording

    deck = deck_of(scenarios)
    base, torch_cpu, gpu = (s.spec for s in deck.steps)
    results = {
        base: RunResult(base, samples=[0.020] * 9, size="64×64", finished="2026-01-02T03:04:05+00:00"),
        torch_cpu: RunResult(torch_cpu, samples=[0.0025] * 9, size="64×64"),
        gpu: RunResult(gpu, status="refused", message="no CUDA device here"),
    }
    rec = Recording(device="Rehearsal Box", date="2026-01-02 03:04 UTC", results=results)
    return PresenterApp(deck, replay=rec, theme="projector", remember=False)


@pytest.mark.parametrize(
    ("keys", "size"),
    [
        ((), (120, 36)),
        ((), (80, 24)),
        (("b",), (80, 24)),
        (("f",), (120, 36)),
        ((), (100, 30)),
        ((), (160, 45)),
    ],
)
def test_presenter_snapshots(snap_compare, scenarios, keys, size):
    """The presenter on step 2 of a replay: as it is, blanked (b), and the big number alone (f)."""

    async def run_before(pilot):
        await pilot.press("pagedown", *keys)
        await pilot.pause()

    assert snap_compare(replayed_app(scenarios), terminal_size=size, run_before=run_before)


def test_a_recorded_figure_at_another_size_says_its_size():
    """The post's GPU figure is a mean at 4096×4096: said whenever the live bars run another size."""
    from gpuplay.core.reports.decks import load_deck, resolve_deck_path
    from gpuplay.tui.presenter import figure_for

    sset = load_scenarios()
    for preset, tag in (
        (None, "recorded · mean · NVIDIA"),
        ("quick", "recorded · mean at 4096×4096 · NVIDIA"),
    ):
        step = load_deck(resolve_deck_path("numpy-to-gpu"), sset, preset).steps[2]
        fig = figure_for(step, RunResult(step.spec, status="refused", message="no CUDA"), None, source="live")
        assert fig.source == "fallback" and fig.tag.startswith(tag), fig.tag


# -- a deck's text is shown, never sent to the terminal or parsed as markup -------------------
HOSTILE_DECK = r"""
title = "AB\u001b]2;PWNED\u0007CD"
[defaults]
budget_s = 0.05
warmup = 1
[[steps]]
title = "[/]\u001b[2J[bold"
scenario = "matmul"
caption = "cap \u001b[31mred [b]not bold[/b]"
notes = "note \u001b]0;retitle\u0007 [link=x]y[/link]"
[[steps]]
title = "gpu [i]step[/i]"
scenario = "matmul"
backend = "torch"
device = "cuda:9"
caption = "c"
[steps.recorded]
median_ms = 0.5
speedup = 42
device = "Big \u001b[2J GPU [b]"
source = "a \u001b]2;blog\u0007 post"
"""


def screen_text(app) -> str:
    """What the terminal shows, as plain text."""
    import io

    from rich.console import Console

    console = Console(width=app.size.width, height=app.size.height, record=True, file=io.StringIO())
    console.print(app.screen._compositor.render_update(full=True))
    return console.export_text(styles=False)


async def test_deck_text_is_shown_not_sent_and_never_markup(scenarios):
    deck = parse_deck(HOSTILE_DECK, scenarios, "evil.toml")
    app = PresenterApp(deck, remember=False, autostart=False)
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.pause()
        shown = screen_text(app)
        assert "\x1b" not in shown and "\x07" not in shown
        assert "AB␛]2;PWNED\\x07CD" in shown  # the title, its escape shown
        assert "[/]␛[2J[bold" in shown  # markup shown literally, the clear-screen shown
        assert "cap ␛[31mred [b]not bold[/b]" in shown
        assert "note ␛]0;retitle\\x07 [link=x]y[/link]" in shown
        app.fallback = None
        await pilot.press("pagedown")
        app.failed[deck.steps[1].spec] = RunResult(
            deck.steps[1].spec, status="refused", message="no \x1b[2J cuda"
        )
        app.refresh_figures()
        await pilot.pause()
        shown = screen_text(app)
        assert "\x1b" not in shown and "\x07" not in shown
        assert "gpu [i]step[/i]" in shown and "Big ␛[2J GPU [b]" in shown, shown


# -- the big number says when it should not be read as printed --------------------------------
async def test_live_steps_are_paired_and_an_unsteady_speedup_is_marked(scenarios):
    """Live, a step is timed in pairs with NumPy (its speedup has an interval); an unpaired figure,
    or a wide interval, shows '~' in the warning colour with a short reason under it."""
    app = PresenterApp(deck_of(scenarios), remember=False)
    async with app.run_test(size=(140, 36)) as pilot:
        await pilot.press("pagedown")
        torch_spec = app.deck.steps[1].spec
        await wait_until(pilot, lambda: torch_spec in app.measured, timeout=120)
        measured = app.measured[torch_spec]
        assert isinstance(measured.speedup, dict) and measured.conditions.get("paired_with"), measured.speedup
        assert measured.speedup["interval"] is not None  # an interval, not two medians apart
        digits = app.query_one("#speedup", BigNumber)
        from gpuplay.core.studies.compare import baseline_spec

        base = baseline_spec(torch_spec)
        app.measured[base] = RunResult(base, samples=[0.004] * 9, size="64×64")  # NumPy, measured apart

        def shown(speedup):
            r = RunResult(torch_spec, samples=[0.001] * 9, size="64×64", speedup=speedup)
            app.measured[torch_spec] = r
            app.refresh_figures()
            return digits.value, digits.has_class("unstable"), text(app, "#speedup-note")

        value, unstable, note = shown(None)  # NumPy measured apart
        assert value == "~4x" and unstable and "unpaired" in note, (value, note)
        value, unstable, note = shown({"point": 3.0, "interval": [2.0, 4.5], "pairs": 9})
        assert value == "~3x" and unstable and "wide" in note
        value, unstable, note = shown({"point": 3.0, "interval": [2.9, 3.1], "pairs": 9})
        assert value == "3x" and not unstable and "95% 2.9–3.1×" in note and "~" not in note


async def test_a_recorded_speedup_beside_live_bars_is_marked_in_its_cell(scenarios):
    """numpy-to-gpu step 3: the post's 1,714× (at 4096×4096) beside live bars of another size
    is marked † in its own cell, and the head line says what † means, before anything is cut."""
    from gpuplay.core.reports.decks import load_deck, resolve_deck_path

    deck = load_deck(resolve_deck_path("numpy-to-gpu"), load_scenarios(), "quick")
    app = PresenterApp(deck, remember=False, autostart=False)
    async with app.run_test(size=(100, 30)) as pilot:
        for i in range(2):
            spec = deck.steps[i].spec
            app.measured[spec] = RunResult(spec, samples=[0.0242 / (i + 1)] * 9, size="1024×1024")
        gpu = deck.steps[2].spec
        app.failed[gpu] = RunResult(gpu, status="refused", message="no CUDA device here")
        app.index = 2
        app.show_step()
        await pilot.pause()
        drawn = app.query_one(Staircase).render().plain.splitlines()
        assert "speedup vs NumPy · †: recorded ratio" in drawn[0], drawn
        recorded_row = next(i for i, line in enumerate(drawn) if "1,714×" in line)
        assert "1,714×†" in drawn[recorded_row]
        assert drawn[recorded_row + 1].strip().startswith("† recorded · mean at 4096×4096")
        assert not any("×†" in line for line in drawn if "1,714" not in line)  # live ratios unmarked


async def test_notifications_show_outside_text_as_text(scenarios):
    """A deck's or a result's text in a toast: markup shown literally, ESC made visible."""
    app = PresenterApp(deck_of(scenarios), autostart=False, remember=False)
    async with app.run_test(size=(100, 30)) as pilot:
        app.notify("[/]\x1b]2;PWNED\x07 [bold", title="[red")  # Rich markup would raise on "[/]"
        await pilot.pause()
        (toast,) = list(app._notifications)
        assert "\x1b" not in toast.message and "␛" in toast.message and "[/]" in toast.message
        assert toast.markup is False


async def test_a_resumed_talk_shows_its_earlier_figures_marked_and_does_not_remeasure(scenarios):
    """`gpuplay demo DECK --resume` (and a reloaded browser tab): the results saved before are
    shown at once, tagged as measured earlier in this talk, and are not measured again."""
    deck = deck_of(scenarios)
    numpy, torch = deck.steps[0].spec, deck.steps[1].spec
    earlier = {
        s: RunResult(s, samples=[0.010, 0.0101, 0.0102, 0.0101, 0.0100], size="64×64", finished="")
        for s in (numpy, torch)
    }
    app = PresenterApp(deck, start_step=1, remember=False, earlier=earlier)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        fig = app.figure(0)
        assert fig is not None and fig.median == pytest.approx(0.0101)
        assert "earlier in this talk" in fig.tag and "before a reload" in fig.tag
        assert app.running is None  # nothing re-measured
        assert "earlier in this talk" in text(app, "#speedup-note")


@pytest.mark.parametrize("size", [(100, 30), (80, 24)])
async def test_a_long_detail_is_whole_or_ends_in_an_ellipsis_with_the_whole_in_its_tooltip(scenarios, size):
    """A recorded figure's long source under a refused step was cut after three lines, mid-name,
    with nothing to say so ('showing the recorded figure: NVIDIA RTX PRO 6000')."""
    long = RECORDED.replace('"Big GPU"', '"NVIDIA RTX PRO 6000 Blackwell Server Edition"').replace(
        '"a rehearsal elsewhere"', '"the public post\'s figure (4096×4096 float32, mean of 10 runs)"'
    )
    app = PresenterApp(deck_of(scenarios, recorded=long), remember=False)
    async with app.run_test(size=size) as pilot:
        app.index = 2
        app.show_step()
        await wait_until(pilot, lambda: app.deck.steps[2].spec in app.failed)
        await pilot.pause()
        detail = app.query_one("#detail")
        shown = text(app, "#detail")
        lines = str(detail.render()).splitlines()
        assert len(lines) <= detail.size.height or detail.size.height == 0
        figure = app.query_one("#figure")
        assert detail.region.bottom <= figure.region.bottom, "the detail's last line is clipped"
        if shown.endswith("…"):
            assert "mean of 10 runs" in str(detail.tooltip) and size == (80, 24)
        else:
            assert shown.endswith("mean of 10 runs)") and detail.tooltip is None
