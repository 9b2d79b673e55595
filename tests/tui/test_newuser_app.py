"""What a new user trips over in the app, with Pilot and the real screen."""

from __future__ import annotations

import pytest

from gpuplay.tui.app import GpuPlayApp
from tests.snapshot_feed import feed
from tests.tui_helpers import tiny_scenarios, wait_until


def make_app(tmp_path):
    return GpuPlayApp(
        [tiny_scenarios(tmp_path / "sc")], autostart=False, telemetry=False, export_dir=tmp_path
    )


async def test_the_roofline_is_redrawn_for_the_size_it_settles_at(tmp_path):
    """Drawn while the layout was still settling (a loaded machine), the roofline's labels stayed
    placed for the old size: the Compare snapshot moved one cell under load."""
    from gpuplay.tui.roofline import RooflineChart

    app = make_app(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until(pilot, lambda: app.probed)
        feed(app)
        await pilot.press("2")
        await pilot.pause()
        chart = app.query_one(RooflineChart)
        await pilot.resize_terminal(160, 45)
        await pilot.pause()
        await pilot.pause()
        resized = str(chart.render())
        chart._data_key = None  # drawn afresh at the size it has now
        chart.show(*chart._shown)
        assert str(chart.render()) == resized


async def test_the_profile_tab_says_why_a_refused_configuration_has_no_profile(tmp_path):
    """A refused configuration left the Profile tab on "No profile yet…" forever: it
    now shows the refusal's reason and how a profile starts."""
    from textual.widgets import Static

    app = make_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(pilot, lambda: app.probed)
        app.session.spec = app.spec.replace(backend="cupy")  # not installed here: refused
        app.start_measurement()
        await wait_until(pilot, lambda: app.session.phase == "refused")
        await pilot.press("5")
        summary = app.query_one("#profile-summary", Static)
        await wait_until(pilot, lambda: "refused:" in str(summary.render()), timeout=60)
        text = " ".join(str(summary.render()).split())
        assert "CuPy" in text and "key 5" in text and "b backend" in text


async def test_a_speedup_that_points_against_the_medians_says_why(tmp_path):
    """Paired 1.05× beside torch 9.63 ms and NumPy 6.99 ms: the figure is marked and
    says which statistic it is and why the medians shown read the other way."""
    from gpuplay.tui.widgets import SpeedupDigits
    from tests.snapshot_feed import fixed_result, fixed_samples

    app = make_app(tmp_path)
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_until(pilot, lambda: app.probed)
        spec, base = app.spec.replace(backend="torch"), app.spec.replace(backend="numpy")
        base_r, live_r = fixed_result(base, 0.00699, 3e-7), fixed_result(spec, 0.00963, 3e-7)
        live_r.speedup = {"point": 1.05, "interval": [1.02, 1.08], "pairs": 24,
                          "baseline_dtype": "float32", "baseline_median_s": base_r.median}  # fmt: skip
        s = app.session
        s.spec, s.results, s.baselines, s.speedups = (
            spec,
            [base_r, live_r],
            {base: base_r},
            {spec: live_r.speedup},
        )
        s.samples, s.live_result, s.phase = fixed_samples(live_r.median), live_r, "done"
        app.refresh_all()
        await pilot.pause()
        digits = app.query_one(SpeedupDigits)
        assert digits.marker == "~"
        assert "1.05× is the median of 24 paired ratios" in (digits.tooltip or "")
        assert "read 0.726×, the other way" in (digits.tooltip or "")
        import html

        screen = html.unescape(app.export_screenshot()).replace("\xa0", " ")
        # Under the digits (wrapped to the column) and in the stats panel's ⚠ speedup line:
        assert "~ This speedup is" in screen and "uncertain: the medians" in screen
        assert "shown point the other" in screen
        assert "0.726×, the other way" in screen


async def test_the_reason_under_the_big_digits_is_not_cut_on_a_projector(tmp_path):
    """At 1920×1080 (a 200-column terminal in the browser) the '~' reason under the digits was
    cut: "is wide (high/low 1.43 > 1.2…". It has a line of its own now, read whole."""
    import html

    from gpuplay.core.catalogue.scenarios import load_scenarios
    from gpuplay.core.result import RunResult
    from gpuplay.tui.presenter import PresenterApp
    from tests.tui.test_presenter import deck_of

    scenarios = load_scenarios([tiny_scenarios(tmp_path / "sc")])
    app = PresenterApp(deck_of(scenarios), remember=False, autostart=False)
    async with app.run_test(size=(200, 56)) as pilot:
        await pilot.press("pagedown")
        spec = app.deck.steps[1].spec
        app.measured[spec] = RunResult(spec, samples=[0.00963] * 9, size="64×64",
                                       speedup={"point": 1.21, "interval": [1.02, 1.46], "pairs": 9})  # fmt: skip
        app.refresh_figures()
        await pilot.pause()
        screen = html.unescape(app.export_screenshot()).replace("\xa0", " ")
        assert "~ wide interval 1.02–1.46× (high/low 1.43 > 1.2): noisy, or too few pairs" in screen


async def test_compare_at_80x24_keeps_what_each_row_is_of(tmp_path):
    """Rows of matmul 1024² and SVD 384² read alike at 80×24 once scenario and size were the
    first columns to go: they are kept, abbreviated, before the secondary ones."""
    import html

    from gpuplay.core.studies.compare import attach_baselines
    from gpuplay.tui.widgets import CompareView
    from tests.snapshot_feed import fixed_result

    app = make_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: app.probed)
        results = []
        for scenario, n, base_s, torch_s in (("matmul", 1024, 0.0212, 0.0244), ("svd", 384, 0.0300, 0.0191)):
            spec = app.spec.replace(scenario=scenario, workload=scenario, params_items=(("n", n),))
            results += [fixed_result(spec.replace(backend="numpy"), base_s, 3e-7),
                        fixed_result(spec.replace(backend="torch"), torch_s, 3e-7)]  # fmt: skip
        app.session.results = results
        await pilot.press("2")
        await pilot.pause()
        view = app.query_one(CompareView)
        view.show(attach_baselines(results), None)
        await pilot.pause()
        assert "scenario" in view.columns, view.columns
        screen = html.unescape(app.export_screenshot()).replace("\xa0", " ")
        assert "1024² matmul" in screen and "384² svd" in screen


async def test_the_compare_chart_names_what_it_has_no_measurement_of(tmp_path):
    """After switching scenario the chart said "no finished measurement of this scenario yet"
    above five finished rows: it names the scenario and accounts for the rows."""
    from gpuplay.tui.widgets import CompareChart

    app = make_app(tmp_path)
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_until(pilot, lambda: app.probed)
        feed(app)  # two finished matmul rows
        await pilot.press("2")
        await pilot.pause()
        # The view as the tab draws it when the scenario on screen (svd) has no finished row yet
        # (the switch starts its measurement; here the rows stay those of matmul).
        from gpuplay.core.studies.compare import attach_baselines
        from gpuplay.tui.widgets import CompareView

        app.query_one(CompareView).show(attach_baselines(app.session.results), ("svd", "32×32"))
        await pilot.pause()
        assert app.query_one(CompareChart).size.height > 0
        import html

        screen = html.unescape(app.export_screenshot()).replace("\xa0", " ")
        assert "no finished svd 32×32 yet · the 2 rows above are of others" in screen


async def test_a_refused_talk_step_says_why_under_its_digits(tmp_path):
    """A step refused here showed a bare grey block: its reason is under the digits."""
    from gpuplay.core.catalogue.scenarios import load_scenarios
    from gpuplay.core.result import RunResult
    from gpuplay.tui.presenter import PresenterApp
    from tests.tui.test_presenter import deck_of, text

    scenarios = load_scenarios([tiny_scenarios(tmp_path / "sc")])
    app = PresenterApp(deck_of(scenarios), remember=False, autostart=False)
    async with app.run_test(size=(200, 56)) as pilot:
        await pilot.press("pagedown")
        spec = app.deck.steps[1].spec
        app.failed[spec] = RunResult(spec, status="refused", message="no CUDA device here")
        app.refresh_figures()
        await pilot.pause()
        note = " ".join(text(app, "#speedup-note").split())
        assert "refused here: no CUDA device here" in note, note


@pytest.mark.parametrize("size", [(120, 36), (80, 24)])
async def test_the_scenario_list_keeps_its_height_and_control_values_fit(tmp_path, size):
    """At 120×36 the list shrank from 10 rows to 3 as the controls grew with a workload's
    parameters, dtype's values took a line each, and "reduce-overhe…" was cut."""
    from rich.console import Console
    from textual.widgets import OptionList

    from gpuplay.tui.sidebar import Sidebar
    from gpuplay.tui.widgets import ControlsPanel

    # Each choice starts a measurement that nothing here reads. At the live 2 s budget it kept the
    # process busy, and every pilot.pause() waits up to 1 s for an idle process: 9-11 s a size,
    # against 2-2.5 s at 0.05 s. The shipped scenarios stay: their parameters size the controls.
    app = GpuPlayApp(None, autostart=False, telemetry=False, export_dir=tmp_path, budget_s=0.05)
    async with app.run_test(size=size) as pilot:
        await wait_until(pilot, lambda: app.probed)
        heights = []
        for name in ("matmul", "inference", "dataloader", "fft2d"):
            app.query_one(Sidebar).highlight(name)
            await wait_until(pilot, lambda name=name: app.spec is not None and app.spec.workload == name)
            panel = app.query_one(ControlsPanel)
            # drawn for this scenario (its controls), and laid out again after it
            await wait_until(pilot, lambda p=panel: getattr(p, "_key", (None,))[0] == app.spec)
            await pilot.pause()
            await pilot.pause()
            heights.append(app.query_one("#scenarios", OptionList).size.height)
            console = Console(width=panel.content_size.width, color_system=None, record=True)
            console.print(panel.content)
            lines = console.export_text().splitlines()
            if size == (120, 36) and name == "inference":
                compile_row = next(i for i, line in enumerate(lines) if line.startswith("c compile"))
                block = " ".join(lines[compile_row : compile_row + 3])
                assert "reduce-overhead" in block and "…" not in block, block
                dtype_row = next(line for line in lines if line.startswith("t dtype"))
                assert "float64" in dtype_row and "float32" in dtype_row, lines  # values share a line
        assert len(set(heights)) == 1 and heights[0] >= 7, (size, heights)


async def test_the_roofline_legend_is_never_overprinted(tmp_path):
    """A point in the chart's top-left corner wrote its workload over the legend ("torch cpu
    +amp:fp16 floatmatmul"): on the rendered screen every legend line and every label
    reads whole."""
    from gpuplay.tui.roofline import RooflineChart
    from tests.snapshot_feed import fixed_result

    app = make_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(pilot, lambda: app.probed)
        feed(app)
        spec = app.spec
        # the fastest result at the lowest intensity: it lands where plotext writes its legend
        low = fixed_result(
            spec.replace(workload="elementwise", scenario="elementwise", backend="numpy", params={}),
            1e-7,
            0.0,
        )
        high = fixed_result(spec.replace(backend="torch", amp="fp16"), 0.05, 1e-3)
        app.session.results = [low, high]
        app.refresh_all()
        await pilot.press("2")
        await pilot.pause()
        chart = app.query_one(RooflineChart)
        await wait_until(pilot, lambda: chart._shown is not None and len(chart._shown[0]) == 2)
        await pilot.pause()
        screen = "\n".join("".join(s.text for s in chart.render_line(y)) for y in range(chart.size.height))
        # each legend line names what differs between the two (rowlabels), then the dtype computed in
        for text in ("numpy float32", "torch +amp:fp16 float32", "elementwise", "matmul"):
            assert text in screen, screen


async def test_roofline_labels_of_neighbouring_points_do_not_overprint(tmp_path):
    """Two workloads at nearly the same intensity and rate: each label reads whole on screen."""
    from gpuplay.tui.roofline import RooflineChart
    from tests.snapshot_feed import fixed_result

    app = make_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(pilot, lambda: app.probed)
        feed(app)
        spec = app.spec
        a = fixed_result(spec.replace(backend="numpy"), 0.02, 1e-7)
        b = fixed_result(spec.replace(backend="torch", scenario="renamed_mm"), 0.0201, 1e-7)
        app.session.results = [a, b]
        app.refresh_all()
        await pilot.press("2")
        chart = app.query_one(RooflineChart)
        await wait_until(pilot, lambda: chart._shown is not None and len(chart._shown[0]) == 2)
        await pilot.pause()
        screen = "\n".join("".join(s.text for s in chart.render_line(y)) for y in range(chart.size.height))
        assert "matmul" in screen and "renamed_mm" in screen, screen
