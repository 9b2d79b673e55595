"""The tune ladder (core/studies/tune.py): which rungs apply, how each is judged, and that each one
is paired with the best configuration so far, not with the baseline."""

from __future__ import annotations

import threading

import pytest

from gpuplay.core.catalogue.scenarios import load_scenarios, spec_for
from gpuplay.core.result import RunResult
from gpuplay.core.spec import RunSpec
from gpuplay.core.studies import tune


def _spec(name: str, preset: str = "quick", **params: object) -> RunSpec:
    sc = load_scenarios([]).get(name)
    return spec_for(sc, preset, params)[0]


def _result(
    spec: RunSpec, median: float, speedup: tuple[float, float, float] | None, error: float = 0.0
) -> RunResult:
    r = RunResult(spec=spec, samples=[median] * 9, error=error, tolerance=1e-3)
    if speedup is not None:
        point, low, high = speedup
        r.speedup = {"point": point, "interval": [low, high], "pairs": 9, "method": "test"}
    return r


def test_the_order_is_fixed_and_cpu_refusals_are_listed_with_reasons():
    ladder = tune.plan_ladder(_spec("matmul", n=64), "cpu", "matmul", budget_s=60)
    names = [r.name for r in ladder.rungs]
    assert names == ["baseline", "device", "amp-bf16", "amp-fp16", "tf32", "compile", "compile-ro",
                     "compile-ma", "graphs"]  # fmt: skip
    by = {r.name: r for r in ladder.rungs}
    assert by["baseline"].spec.backend == "numpy"
    for name in ("tf32", "graphs", "amp-fp16", "compile-ro"):
        assert by[name].status == "refused" and by[name].reason, name
    assert "NVIDIA" in by["tf32"].reason
    # the budget is split over the rungs that run (compile weighs more), one share for the final pairing
    live = [r for r in ladder.rungs if r.status != "refused"]
    assert sum(r.share_s for r in live) + ladder.total.share_s == pytest.approx(60)
    assert by["compile"].share_s == pytest.approx(3 * by["device"].share_s)
    assert "budget 60 s" in ladder.budget_line()


def test_workload_rungs_apply_to_their_workloads_only():
    inference = [r.name for r in tune.plan_ladder(_spec("inference"), "cpu", "inference", 60).rungs]
    assert inference.index("inference_mode") == 2
    assert inference[-3:] == ["torchscript", "onnxruntime", "tensorrt"]
    attention = [r.name for r in tune.plan_ladder(_spec("attention"), "cpu", "attention", 60).rungs]
    assert "sdpa-flash" in attention and "torchscript" not in attention
    svd = {r.name: r for r in tune.plan_ladder(_spec("svd"), "cpu", "svd", 60).rungs}
    assert svd["linalg-cusolver"].status == "refused"


@pytest.mark.parametrize(
    ("speedup", "error", "kept", "words"),
    [
        ((1.5, 1.2, 1.8), 0.0, True, "kept"),
        ((1.02, 0.9, 1.1), 0.0, False, "within noise"),
        ((0.5, 0.4, 0.6), 0.0, False, "slower"),
        ((2.0, 1.8, 2.2), 0.5, False, "failed the float64 check: error 0.5 > tolerance 0.001"),
    ],
)
def test_a_rung_is_kept_only_above_one_and_within_its_tolerance(speedup, error, kept, words):
    rung = tune.Rung("amp-bf16", "AMP")
    rung.result = _result(_spec("matmul"), 0.01, speedup, error)
    tune.judge(rung)
    assert rung.status == "measured" and rung.kept is kept
    assert words in rung.reason


def test_each_rung_is_paired_with_the_best_so_far_and_a_failing_check_is_dropped_and_named():
    ladder = tune.plan_ladder(_spec("matmul", n=64), "cpu", "matmul", budget_s=60)
    asked: list[tuple[str, str | None]] = []
    outcomes = {  # per configuration label: (median, speedup over what it is paired with, error)
        "numpy": (0.010, None, 0.0),
        "torch": (0.005, (2.0, 1.8, 2.2), 0.0),
        "bf16": (0.002, (2.5, 2.2, 2.9), 0.5),  # fast but wrong: must be dropped
        "compile:max-autotune": (0.006, (0.8, 0.7, 0.9), 0.0),
        "compile": (0.004, (1.25, 1.1, 1.4), 0.0),
    }

    def measure(spec: RunSpec, *, cancel: threading.Event, paired_with: RunSpec | None = None) -> RunResult:
        asked.append((tune.config_label(spec), tune.config_label(paired_with) if paired_with else None))
        label = spec.label()
        last = label.split("+")[-1] if "+" in label else spec.backend
        key = "bf16" if last == "amp:bf16" else last
        median, sp, err = outcomes[key]
        if paired_with is not None and paired_with.backend == "numpy" and key == "compile":
            sp = (2.5, 2.2, 2.8)  # the final pairing: the winner against the baseline
        return _result(spec, median, sp, err)

    tune.run_ladder(ladder, measure)
    by = {r.name: r for r in ladder.rungs}
    assert by["device"].kept and by["device"].against == "numpy cpu float32"
    assert not by["amp-bf16"].kept and "failed the float64 check" in by["amp-bf16"].reason
    # compile is paired with the device move (the best so far), not with bf16 nor the baseline
    assert by["compile"].against == "torch cpu float32" and by["compile"].kept
    assert by["compile"].cumulative == pytest.approx(2.5)
    # max-autotune is paired with compile default, the best so far by then
    assert by["compile-ma"].against == "torch cpu float32 +compile" and "slower" in by["compile-ma"].reason
    assert [r.name for r in ladder.kept] == ["device", "compile"]
    assert ladder.winner is not None and ladder.winner.compile == "default"
    assert ladder.total is not None and ladder.total.against == "numpy cpu float32"
    assert ladder.verdict.startswith("kept 2 of 4 rungs: 2.5× [2.2–2.8] over the baseline")
    d = ladder.to_dict()
    assert {"rungs", "verdict"} <= set(d)
    for r in d["rungs"]:
        assert {"name", "status", "kept", "reason", "median", "speedup", "interval"} <= set(r)
        assert r["status"] in ("measured", "dropped", "refused")


def test_a_cancel_keeps_the_finished_rungs():
    ladder = tune.plan_ladder(_spec("matmul", n=64), "cpu", "matmul", budget_s=60)
    cancel = threading.Event()

    def measure(spec: RunSpec, *, cancel: threading.Event, paired_with: RunSpec | None = None) -> RunResult:
        if paired_with is not None:
            stop.set()
        return _result(spec, 0.01, (2.0, 1.8, 2.2) if paired_with else None)

    stop = cancel
    tune.run_ladder(ladder, measure, cancel=cancel)
    by = {r.name: r for r in ladder.rungs}
    assert by["baseline"].status == "measured" and by["device"].kept
    assert by["amp-bf16"].status == "dropped" and "interrupted" in by["amp-bf16"].reason
    assert ladder.interrupted and "interrupted" in ladder.verdict


def test_cpu_bf16_is_read_from_the_cpu_flags():
    assert tune.cpu_has_bf16("flags\t: fpu sse2 avx512f avx512_bf16\n") is True
    assert tune.cpu_has_bf16("flags\t: fpu sse2 avx2\n") is False
    assert tune.cpu_has_bf16("Features\t: fp asimd bf16\n") is True
    assert tune.cpu_has_bf16("nothing here") is None


def test_the_limit_sentence_names_overhead_or_the_top_operator():
    busy = {"status": "ok", "overhead_share": 0.7, "activities": ["cpu"], "top_ops": []}
    assert "per-op overhead: 70%" in tune.limit_sentence(busy, [])
    compute = {"status": "ok", "overhead_share": 0.1, "busy_ms_per_step": 2.0, "activities": ["cpu"],
               "top_ops": [{"name": "aten::mm", "self_cpu_ms": 1.5}]}  # fmt: skip
    assert tune.limit_sentence(compute, []) == "now limited by compute in aten::mm (75% of the busy time)"


def test_the_limit_sentence_skips_the_profilers_own_markers():
    data = {"status": "ok", "overhead_share": 0.1, "busy_ms_per_step": 2.0, "activities": ["cpu"],
            "top_ops": [{"name": "## Call CompiledFxGraph fabc123 ##", "self_cpu_ms": 1.9},
                        {"name": "mkldnn::_linear_pointwise", "self_cpu_ms": 1.0}]}  # fmt: skip
    assert (
        tune.limit_sentence(data, [])
        == "now limited by compute in mkldnn::_linear_pointwise (50% of the busy time)"
    )


def test_the_data_wait_names_the_pipeline_as_the_limit():
    rung = tune.Rung("workers-2", "2 workers", kept=True, status="measured")
    rung.result = RunResult(spec=_spec("matmul"), samples=[0.01] * 3,
                            split={"data_wait_s": [0.8, 0.8], "h2d_s": [0.1, 0.1], "model_s": [0.1, 0.1]})  # fmt: skip
    assert tune.limit_sentence(None, [rung]).startswith("now limited by the data pipeline: 80%")


def test_on_a_gpu_every_rung_is_climbed_and_graphs_give_way_to_a_kept_compile_mode(monkeypatch):
    # No GPU here: the planner is replaced by one that lets everything run on cuda:0 except what
    # the real planner refuses between these levers (CUDA graphs under a compile mode that captures
    # its own); the ladder's order, pairing and refusal listing are what is pinned.
    from gpuplay.core.spec import Plan, Refusal

    def check(spec, probe_timeout=None):
        if spec.cuda_graphs and spec.compile in ("reduce-overhead", "max-autotune"):
            return Refusal(f"compile mode {spec.compile} already captures CUDA graphs of its own")
        return Plan(spec, [])

    monkeypatch.setattr(tune, "check", check)
    ladder = tune.plan_ladder(_spec("matmul", n=64), "cuda:0", "matmul", budget_s=60)
    assert [r.name for r in ladder.rungs if r.status == "refused"] == []
    pairs: list[tuple[str, str]] = []

    def measure(spec, *, cancel, paired_with=None):
        if paired_with is not None:
            pairs.append((tune.config_label(spec), tune.config_label(paired_with)))
        return _result(spec, 0.01, (1.5, 1.2, 1.8) if paired_with else None)

    tune.run_ladder(ladder, measure)
    by = {r.name: r for r in ladder.rungs}
    assert by["device"].spec.device == "cuda:0"
    assert by["amp-fp16"].against == "torch cuda:0 float32 +amp:bf16"  # fp16 replaces bf16, paired with it
    assert by["tf32"].spec.amp == "fp16" and by["tf32"].spec.tf32
    assert by["compile-ma"].against == "torch cuda:0 float32 +amp:fp16 +compile:reduce-overhead +tf32"
    assert by["graphs"].status == "refused" and "captures CUDA graphs" in by["graphs"].reason
    assert [r.name for r in ladder.kept] == ["device", "amp-bf16", "amp-fp16", "tf32", "compile", "compile-ro",
                                             "compile-ma"]  # fmt: skip
    assert pairs[-1][1] == "numpy cpu float32"  # the winner against the baseline, last


def test_a_runtime_winner_is_not_called_overhead_bound():
    rung = tune.Rung("onnxruntime", "ONNX Runtime", kept=True, status="measured")
    rung.spec = _spec("inference", runtime="onnxruntime")
    busy = {"status": "ok", "overhead_share": 1.0, "activities": ["cpu"], "top_ops": []}
    assert "torch.profiler does not see" in tune.limit_sentence(busy, [rung])


def test_a_runtime_rung_on_top_of_amp_runs_and_is_named_in_its_dtype(monkeypatch):
    """An ONNX Runtime rung over a kept AMP rung read '+amp:bf16' and was judged at AMP's
    tolerance while its error (2.6e-07) said float32: autocast does not reach an exported graph."""
    from gpuplay.core.catalogue import planner
    from gpuplay.core.runtimes import onnxruntime as ortmod

    # AMP's refusal whether or not ONNX Runtime is installed here (CI's main venv has not it)
    monkeypatch.setattr(ortmod, "installed", lambda package: True)
    from gpuplay.core.spec import RunSpec
    from gpuplay.core.studies.tune import RungDef, _candidate

    best = RunSpec.make("inference", {"model": "mlp"}, backend="torch", amp="bf16", compile="default")
    for runtime, amp in (("onnxruntime", "off"), ("tensorrt", "off"), ("torchscript", "bf16")):
        spec = _candidate(RungDef(runtime, runtime, params={"runtime": runtime}, kind="runtime"), best)
        assert (spec.params["runtime"], spec.amp, spec.compile) == (runtime, amp, "off")
    refused = planner.check(best.replace(compile="off", params={**best.params, "runtime": "onnxruntime"}))
    assert isinstance(refused, planner.Refusal) and "torch.autocast" in refused.reason


@pytest.mark.parametrize("budget", [6.0, 2.0])
def test_a_short_budget_still_measures_the_baseline_first_and_pairs_every_rung(budget):
    """The baseline is what every rung is paired with: its share of a short budget (0.4 s of 6 s
    for inference's thirteen rungs) must not drop it while a rung of larger weight runs unpaired."""
    ladder = tune.plan_ladder(_spec("matmul", n=64), "cpu", "matmul", budget_s=budget)
    asked: list[tuple[str, str | None]] = []

    def measure(spec: RunSpec, *, cancel: threading.Event, paired_with: RunSpec | None = None) -> RunResult:
        asked.append((tune.config_label(spec), tune.config_label(paired_with) if paired_with else None))
        return _result(spec, 0.01, (1.5, 1.2, 1.8) if paired_with else None)

    tune.run_ladder(ladder, measure)
    by = {r.name: r for r in ladder.rungs}
    assert by["baseline"].status == "measured" and by["baseline"].reason == "the reference"
    assert asked[0] == ("numpy cpu float32", None)
    assert all(against is not None for _, against in asked[1:]), asked
    for r in ladder.rungs[1:]:
        assert r.status == "refused" or r.reason != "not run: the baseline did not run", r
