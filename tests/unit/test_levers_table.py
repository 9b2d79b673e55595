"""The levers table (core/catalogue/levers.py) and what is generated from it: the CLI flags, the deck field
types, the CSV columns, the live controls and their key bindings cannot drift from the table."""

from __future__ import annotations

import csv
import dataclasses
import io
import math
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuplay.core.catalogue import levers
from gpuplay.core.reports.decks import SPEC_FIELD_TYPES
from gpuplay.core.reports.report import to_csv
from gpuplay.core.result import RunResult
from gpuplay.core.spec import RunSpec
from gpuplay.core.studies.compare import VARIANTS as COMPARE_VARIANTS
from gpuplay.core.studies.compare import Row, baseline_spec
from gpuplay.core.studies.sweep import VARIANTS as SWEEP_VARIANTS
from gpuplay.core.workloads import get_workload

SRC = Path(__file__).resolve().parents[2] / "src" / "gpuplay"
NOT_LEVERS = {"workload", "params_items", "scenario"}  # what is measured, not how

# Names every layer reads, or that are also ordinary words and other things' names: a grep for
# them counts more than the lever. Every other lever is named in at most 5 source files.
PERVASIVE = {
    "backend": "the array library: every layer dispatches on it",
    "device": "every layer places work on it",
    "dtype": "every layer allocates in it",
    "compile": "also Python's compile() and torch.compile in the backends",
    "tf32": "also a compute dtype (tolerances, roofline peaks, calibration)",
    "transfers": "also a workload's name",
    "cache": "also the backends' cache flushers and file caches",
    "warmup": "collectives and the engine warm up too",
    "budget_s": "the sweep, session and compare budget their own time",
    "threads": "thread counts are reported by every backend",
    "max_step_s": "the step limit also arms the engine's watchdog",
    "seed": "inputs, preflight and pairs are seeded from it",
    "check": "an ordinary word",
    "energy": "also the energy module and its report",
    "mode": "an ordinary word (inference's autograd mode)",
    "op": "an ordinary word (transfers' operation)",
    "format": "str.format and the export formats",
    "workers": "an ordinary word (Textual's workers; a loader's worker processes the noise check counts)",
    "runtime": "an ordinary word (CUDA runtime, an inference runtime's own package core/runtimes/)",
    "amp": "also a rung of the tune ladder (core/studies/tune.py), which walks the levers in a fixed order",
    "repeat": "an ordinary word (the noise check's and the pairs' repeats; tune times by budget, not repeats)",
}


def source_files_naming(name: str) -> list[str]:
    word = re.compile(rf"\b{re.escape(name)}\b")
    return sorted(str(p.relative_to(SRC)) for p in SRC.rglob("*.py") if word.search(p.read_text()))


@pytest.mark.parametrize(
    "lever", [lv for lv in levers.LEVERS if lv.name not in PERVASIVE], ids=lambda lv: lv.name
)
def test_a_lever_is_named_in_at_most_five_source_files(lever: levers.Lever) -> None:
    files = source_files_naming(lever.name)
    assert "core/catalogue/levers.py" in files
    assert len(files) <= 5, f"{lever.name} is named in {len(files)} files: {files}"


def test_every_runspec_field_is_a_lever_and_defaults_agree() -> None:
    fields = {f.name: f for f in dataclasses.fields(RunSpec)}
    spec_levers = {lv.name: lv for lv in levers.spec_levers()}
    assert set(fields) - NOT_LEVERS == set(spec_levers)
    for name, lever in spec_levers.items():
        assert fields[name].default == lever.default, name


def test_every_spec_lever_has_a_cli_flag_a_deck_type_and_a_csv_column() -> None:
    from gpuplay.cli.run import run

    dests = {p.name: p for p in run.params}
    header = next(csv.reader(io.StringIO(to_csv([]))))
    for lever in levers.spec_levers():
        assert lever.name in dests, f"{lever.name}: no CLI flag"
        assert lever.cli_flag in dests[lever.name].opts, lever.name
        assert SPEC_FIELD_TYPES[lever.name] == lever.deck_types()
        assert lever.csv_column in header, f"{lever.name}: no CSV column"
    for lever in levers.LEVERS:  # workload parameters too: a row of a compare shows them
        assert lever.csv_column in header


def test_every_workload_parameter_lever_is_declared_by_its_workloads() -> None:
    for lever in levers.LEVERS:
        for name in lever.workloads:
            params = {p.name: p for p in get_workload(name).params}
            assert lever.name in params, f"{name} declares no parameter {lever.name}"
            param = params[lever.name]
            assert param.kind is lever.kind
            for v in lever.live_values:  # every value a key offers is one the workload takes
                assert param.coerce(v) == v


def test_values_are_finite_choices_or_bounded_numbers() -> None:
    for lever in levers.LEVERS:
        if lever.kind is str and not lever.is_param and lever.name != "device":
            assert lever.choices and lever.default in lever.choices, lever.name
        if lever.kind in (int, float) and not lever.is_param:
            lo, hi = lever.limits() if callable(lever.limits) else lever.limits
            assert math.isfinite(lo) and math.isfinite(hi) and lo <= hi, lever.name
        if lever.live:
            assert lever.values() or lever.name == "device" or lever.is_param


def test_every_live_lever_has_a_binding_with_its_name_as_id() -> None:
    from gpuplay.tui.app import GpuPlayApp

    bindings = [b for b in GpuPlayApp.BINDINGS if hasattr(b, "action")]
    by_id = {b.id: b for b in bindings}
    for lever in levers.live_levers():
        b = by_id[lever.name]
        assert b.key == lever.key and b.action == f"cycle('{lever.name}')"
    keys = [b.key for b in bindings]
    assert len(keys) == len(set(keys)), "two bindings share a key"
    # The ids users remap in config.toml [keymap] stay what they were before the table.
    assert {"backend", "device", "dtype", "amp", "compile", "tf32", "cuda_graphs"} <= set(by_id)


def test_variants_are_generated_for_compare_and_sweep() -> None:
    expected = {"base": {}, "amp-bf16": {"amp": "bf16"}, "amp-fp16": {"amp": "fp16"},
                "compile": {"compile": "default"}, "tf32": {"tf32": True}, "graphs": {"cuda_graphs": True},
                "torchscript": {"runtime": "torchscript"}, "onnxruntime": {"runtime": "onnxruntime"},
                "tensorrt": {"runtime": "tensorrt"}}  # fmt: skip
    assert COMPARE_VARIANTS == SWEEP_VARIANTS == expected


def test_csv_has_the_linalg_library_and_workload_parameter_columns() -> None:
    spec = RunSpec.make(
        "attention", {"sdpa": "math"}, backend="torch", linalg_library="default", alloc="cold"
    )
    out = to_csv([Row(RunResult(spec=spec, status="refused", message="x"))])
    (row,) = csv.DictReader(io.StringIO(out))
    assert row["linalg_library"] == "default" and row["sdpa"] == "math" and row["alloc"] == "cold"
    assert row["density"] == ""  # attention has no density
    assert row["mode"] == "" and row["format"] == ""
    sparse = RunSpec.make("sparse", {"n": 64})  # the workload's defaults fill what a spec leaves out
    (row,) = csv.DictReader(io.StringIO(to_csv([Row(RunResult(spec=sparse, status="refused", message="x"))])))
    assert (row["density"], row["format"]) == ("0.01", "csr")
    assert list(row)[:8] == ["scenario", "workload", "size", "backend", "device", "device_name", "dtype",
                             "compute_dtype"]  # fmt: skip


def test_the_baseline_shares_the_timing_levers_and_drops_the_torch_ones() -> None:
    spec = RunSpec.make("matmul", {"n": 64}, backend="torch", amp="bf16", warmup=7, seed=9, alloc="cold",
                        min_repeat=6, max_repeat=60, check=False)  # fmt: skip
    base = baseline_spec(spec)
    assert (base.backend, base.amp, base.warmup, base.seed, base.alloc) == ("numpy", "off", 7, 9, "cold")
    assert (base.min_repeat, base.max_repeat, base.check) == (6, 60, False)


@pytest.mark.parametrize(
    "args",
    [["--min-repeat", "0"], ["--max-repeat", "nan"], ["--min-repeat", "9", "--max-repeat", "3"],
     ["--max-repeat", "1e99"], ["--linalg", "nope"]],
    ids=["min0", "max-nan", "min-over-max", "max-huge", "linalg-bad"],
)  # fmt: skip
def test_hostile_values_of_the_new_flags_are_usage_errors(args: list[str]) -> None:
    from gpuplay.cli import main

    res = CliRunner().invoke(main, ["run", "matmul", "-s", "n=8", *args])
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output


# -- the live controls generated from the table ------------------------------------------------


def test_drawing_the_controls_twice_plans_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """ControlsPanel.show used to run the planner once per control value on every draw."""
    from gpuplay.tui import controls
    from gpuplay.tui.widgets import ControlsPanel

    plans = []
    real_check = controls.check
    monkeypatch.setattr(controls, "check", lambda spec, **kw: plans.append(spec) or real_check(spec, **kw))
    probes = ["first answers"]
    monkeypatch.setattr(controls, "_probe_state", lambda: tuple(probes))
    controls._verdict.cache_clear()
    panel = ControlsPanel()
    spec = RunSpec.make("attention", {"seq": 16})
    panel.show(spec, "quick", 30.0, paused=False)
    first = len(plans)
    assert first > 10  # every other value of every control was judged once
    panel.show(spec, "quick", 30.0, paused=True)  # redrawn: nothing planned again
    assert len(plans) == first
    probes.append("a backend's probe answered")  # a verdict can change: judged afresh
    panel.show(spec, "quick", 30.0, paused=False)
    assert len(plans) == 2 * first


def test_a_workload_parameter_is_a_live_control_of_its_workload_only() -> None:
    from gpuplay.tui.controls import controls_for, cycle, values_for

    attention = RunSpec.make("attention", {"seq": 16})
    matmul = RunSpec.make("matmul", {"n": 16})
    assert "sdpa" in [c.field for c in controls_for(attention)]
    assert "sdpa" not in [c.field for c in controls_for(matmul)]
    assert values_for("sdpa") == list(
        next(p for p in get_workload("attention").params if p.name == "sdpa").choices
    )
    # NumPy computes attention's naive form whatever the SDPA backend: torch is where it matters
    torch_attention = attention.replace(backend="torch")
    new, why = cycle(torch_attention, "sdpa")
    assert why is None and new.params["sdpa"] == "math" and new.params["seq"] == 16
    same, why = cycle(matmul, "sdpa")
    assert same == matmul and why == "matmul has no SDPA backend"
    sparse = RunSpec.make("sparse", {"n": 64})
    new, why = cycle(sparse, "density")
    assert why is None and new.params["density"] == 0.05  # the next of 0.001, 0.01, 0.05, 0.2


def test_a_new_preset_keeps_the_workload_parameter_a_key_chose() -> None:
    from gpuplay.core.catalogue.scenarios import load_scenarios
    from gpuplay.core.studies.session import LiveSession

    scenarios = load_scenarios()
    name = next(n for n, sc in scenarios.scenarios.items() if sc.workload == "attention")
    session = LiveSession(scenarios, scenario=scenarios.scenarios[name])
    spec = session.make_spec()
    chosen = spec.replace(params={**spec.params, "sdpa": "math"})
    assert session.make_spec(chosen).params["sdpa"] == "math"


def test_the_linalg_library_is_a_live_control_of_the_linalg_workloads() -> None:
    from gpuplay.tui.controls import controls_for, cycle

    svd = RunSpec.make("svd", {"n": 16}, backend="torch")
    assert "linalg_library" in [c.field for c in controls_for(svd)]
    assert "linalg_library" not in [c.field for c in controls_for(RunSpec.make("matmul", {"n": 16}))]
    same, why = cycle(svd, "linalg_library")  # a torch CUDA setting: refused on the CPU, with why
    assert same == svd and why is not None and "cusolver" in why
