"""The inference runtime and the data loader's levers in the live controls."""

from __future__ import annotations

from rich.table import Table
from textual.app import App, ComposeResult

from gpuplay.core.backends import get_backend
from gpuplay.core.spec import RunSpec
from gpuplay.tui.controls import controls_for, cycle
from gpuplay.tui.widgets import ControlsPanel


class _Panel(App[None]):
    def compose(self) -> ComposeResult:
        yield ControlsPanel()


def _row(panel: ControlsPanel, title: str):
    """The cells of the controls row titled `title`, as the panel drew them."""
    renderable = panel.content  # what show() handed to update()
    table = next(r for r in getattr(renderable, "renderables", [renderable]) if isinstance(r, Table))
    titles = list(table.columns[1].cells)
    return list(table.columns[2].cells)[titles.index(title)]


async def test_a_refused_runtime_is_struck_through_with_its_reason():
    get_backend("torch").probe(120)  # the verdicts wait for no probe: answer it first
    spec = RunSpec.make("inference", {"runtime": "eager"}, backend="torch")
    assert "runtime" in [c.field for c in controls_for(spec)]
    async with _Panel().run_test(size=(160, 45)) as pilot:
        panel = pilot.app.query_one(ControlsPanel)
        panel.show(spec, "quick", 30.0, False)
        cells = _row(panel, "runtime")
        struck = [cells.plain[s.start : s.end] for s in cells.spans if "strike" in str(s.style)]
        # torchscript runs here; onnxruntime where its optional extra is installed (the README's test
        # command leaves it out; CI's runtime step installs it), else it is refused naming the extra
        import importlib.util

        has_ort = importlib.util.find_spec("onnxruntime") is not None
        assert struck == (["tensorrt"] if has_ort else ["onnxruntime", "tensorrt"])
        assert any(
            r.startswith("runtime tensorrt: TensorRT runs on NVIDIA GPUs only") for r in panel.reasons
        ), panel.reasons


def test_the_runtime_key_skips_the_refused_one_and_other_workloads_have_none():
    get_backend("torch").probe(120)
    spec = RunSpec.make("inference", {"runtime": "onnxruntime"}, backend="torch")
    after, why = cycle(spec, "runtime")
    assert why is None and after.params["runtime"] == "eager"  # tensorrt is passed over
    assert "runtime" not in [c.field for c in controls_for(RunSpec.make("matmul", {}))]
    loader = RunSpec.make("dataloader", {}, backend="torch")
    assert {"workers", "pin"} <= {c.field for c in controls_for(loader)}
    assert cycle(loader, "pin")[1] and "cpu" in cycle(loader, "pin")[1]  # on: no accelerator to pin for


def test_a_number_of_workers_is_shown_as_a_number():
    from gpuplay.tui.controls import label

    assert [label(v) for v in (0, 2, 1, False, True, "torch")] == ["0", "2", "1", "off", "on", "PyTorch"]


async def test_the_live_error_row_names_inferences_float32_reference(tmp_path):
    # Inference is checked against the float32 forward pass, not float64: the Live tab said
    # "vs float64" while the CLI's note said otherwise.
    from textual.widgets import OptionList

    from gpuplay.tui.app import GpuPlayApp
    from gpuplay.tui.widgets import StatsPanel
    from tests.tui.test_roofline_widget import shown_text
    from tests.tui_helpers import tiny_scenarios, wait_until

    folder = tiny_scenarios(tmp_path / "sc")
    (folder / "inf.toml").write_text(
        'name = "inf"\nworkload = "inference"\ntitle = "inf"\n'
        '[params]\nmodel = "mlp"\nbatch = 2\nwidth = 16\n'
    )
    app = GpuPlayApp([folder], budget_s=0.05, telemetry=False, export_dir=tmp_path / "out")
    async with app.run_test(size=(140, 40)) as pilot:
        options = app.query_one("#scenarios", OptionList)
        options.highlighted = next(
            i for i in range(options.option_count) if options.get_option_at_index(i).id == "inf"
        )
        await pilot.pause()
        await wait_until(
            pilot,
            lambda: app.session.live_result is not None and app.session.live_result.spec.scenario == "inf",
        )
        await pilot.pause(0.3)
        text = " ".join(shown_text(app.query_one(StatsPanel)).split())
        assert "vs the float32 forward pass" in text and "vs float64" not in text
