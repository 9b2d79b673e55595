"""The public Python API (gpuplay.run/compare/sweep/measure/load) and the notebook magics.

Measurements run in-process here (GPUPLAY_IN_PROCESS=1, as the CLI tests do) except the tests that
check the real path: a fresh interpreter doing `import gpuplay; gpuplay.run(...)` through the
engine process."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from click.testing import CliRunner

import gpuplay
from gpuplay import api

TINY = {"n": 64}


def _need(name: str) -> None:
    """pandas and matplotlib are the notebook extra's: skipped without them, except in CI's notebook
    step (GPUPLAY_REQUIRE_NOTEBOOK=1), where a missing one fails."""
    import os

    if os.environ.get("GPUPLAY_REQUIRE_NOTEBOOK") == "1":
        __import__(name)
    else:
        pytest.importorskip(name)


@pytest.fixture(autouse=True)
def _in_process(monkeypatch):
    monkeypatch.setenv("GPUPLAY_IN_PROCESS", "1")


def _python(code: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    import os

    env = {k: v for k, v in os.environ.items() if k != "GPUPLAY_IN_PROCESS"}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, env=env)  # fmt: skip


def test_import_gpuplay_loads_no_torch_textual_or_api():
    out = _python("""
        import sys, gpuplay
        heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'textual', 'rich', 'click', 'cupy'))
        print(heavy, 'gpuplay.api' in sys.modules)
        gpuplay.Result  # the lazy re-export resolves
        print('gpuplay.api' in sys.modules, 'torch' in sys.modules)
    """)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["[] False", "True False"]


def test_run_through_the_engine_process_numpy_then_torch_with_paired_speedup():
    out = _python("""
        import json, sys, gpuplay
        r = gpuplay.run('matmul', backend='numpy', params={'n': 64}, budget_s=0.05)
        t = gpuplay.run('matmul', backend='torch', params={'n': 64}, budget_s=0.1)
        print(json.dumps({'median': r.median, 'ok': r.check_ok, 'speedup': t.speedup,
                          'interval': t.speedup_interval, 'baseline': t.baseline,
                          'versions': t.versions, 'torch_here': 'torch' in sys.modules}))
    """)
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout.strip().splitlines()[-1])
    assert d["median"] > 0 and d["ok"] is True
    assert (
        d["speedup"] > 0 and len(d["interval"]) == 2 and d["interval"][0] <= d["speedup"] <= d["interval"][1]
    )
    assert d["baseline"].startswith("numpy cpu")
    assert {"gpuplay", "python", "numpy", "torch"} <= set(d["versions"])
    assert d["torch_here"] is False  # measured in the engine process, never imported by the caller


def test_result_fields_and_to_dict():
    r = gpuplay.run("matmul", params=TINY, budget_s=0.05)
    assert r.median is not None and r.iqr is not None and r.iqr[0] <= r.median <= r.iqr[1]
    assert len(r.samples) >= 5 and r.check_ok is True and r.error is not None
    assert r.speedup == pytest.approx(1.0)  # NumPy on the CPU is its own baseline
    d = r.to_dict()
    json.dumps(d)  # JSON-ready
    assert d["median_s"] == r.median and d["versions"]["numpy"] == np.__version__
    assert d["result"]["spec"]["workload"] == "matmul"


@pytest.mark.parametrize(
    ("kw", "named"),
    [
        ({"scenario": "no-such-scenario"}, "no-such-scenario"),
        ({"amp": "fp8"}, "amp"),
        ({"tf32": "yes"}, "tf32"),
        ({"not_a_lever": 1}, "not_a_lever"),
        ({"budget_s": math.nan}, "budget"),
        ({"budget_s": math.inf}, "budget"),
        ({"params": {"n": -3}}, "n"),
        ({"backend": "jax"}, "backend"),
    ],
)
def test_bad_arguments_raise_value_error_naming_them(kw, named):
    scenario = kw.pop("scenario", "matmul")
    with pytest.raises(ValueError, match=named):
        gpuplay.run(scenario, **{"params": TINY, **kw})


def test_a_refused_configuration_raises_refused_with_the_reason():
    with pytest.raises(gpuplay.Refused) as info:
        gpuplay.run("matmul", backend="torch", device="cuda", params=TINY)
    assert info.value.reason and "torch cuda" in str(info.value)


def test_all_names_are_exported_and_typed():
    assert set(api.__all__) <= set(gpuplay.__all__)
    for name in api.__all__:
        assert getattr(gpuplay, name) is getattr(api, name)
    from pathlib import Path

    assert (Path(gpuplay.__file__).parent / "py.typed").is_file()


def inputs(rng, n):
    return rng.standard_normal(n), rng.standard_normal(n)


def saxpy(xp, x, y):
    return 2.5 * x + y


def test_measure_a_function_defined_here_on_numpy_and_torch():
    _need("pandas")
    res = gpuplay.measure(saxpy, inputs, params={"n": 4096}, backends=["numpy", "torch"], budget_s=0.05,
                          progress=False)  # fmt: skip
    by = {r.backend: r for r in res}
    assert set(by) == {"numpy", "torch"}
    assert all(r.check_ok for r in res)
    assert by["torch"].speedup is not None and by["torch"].speedup_interval is not None
    df = res.to_pandas()
    assert list(df["backend"]) == ["numpy", "torch"] and df["median_s"].notna().all()
    assert df["speedup_low"].iloc[1] <= df["speedup"].iloc[1] <= df["speedup_high"].iloc[1]


def test_measure_refuses_a_closure_with_its_reason():
    k = 3.0

    def step(xp, x):
        return k * x

    with pytest.raises(ValueError, match="enclosing function"):
        gpuplay.measure(step, inputs, params={"n": 8})


def test_sweep_to_pandas_and_chart():
    _need("pandas")
    _need("matplotlib")
    sw = gpuplay.sweep("matmul", {"n": [32, 64]}, backends="numpy", budget_s=0.03, progress=False)
    df = sw.to_pandas()
    assert list(df["n"]) == [32, 64] and df["median_s"].notna().all()
    assert "█" in sw.text_chart()
    ax = sw.plot()  # the Axes, as pandas returns; its figure left open for plt.show()
    assert ax.get_lines()
    import matplotlib.pyplot as plt

    assert plt.fignum_exists(ax.figure.number)
    plt.close(ax.figure)


def _result(scenario: str, samples, torch_version: str = "2.5.0", label_backend: str = "numpy"):
    from gpuplay.core.result import RunResult
    from gpuplay.core.spec import RunSpec

    spec = RunSpec.make("matmul", {"n": 64}, scenario=scenario, backend=label_backend)
    return RunResult(spec=spec, samples=list(samples), size="64×64", error=1e-7, tolerance=1e-5,
                     conditions={"versions": {"gpuplay": "0.1.0", "torch": torch_version}})  # fmt: skip


def test_html_and_markdown_show_hostile_text_as_text():
    r = _result("<img src=x onerror=alert(1)>\x1b[2J|*", [0.001] * 5)
    res = api.Results.from_run_results([r])
    page = res._repr_html_()
    assert "<img" not in page and "\x1b" not in page and "&lt;img" in page
    md = res._repr_markdown_()
    assert "<img" not in md and "\x1b" not in md and "\\|\\*" in md
    # repr() is what a terminal REPL prints: a loaded file's ESC must not reach the terminal.
    assert "\x1b" not in repr(res[0]) and "␛[2J" in repr(res[0]) and "\x1b" not in str(res[0])


def _write(path, results, environment_torch="2.5.0"):
    from gpuplay.core.reports import report
    from gpuplay.core.studies.compare import attach_baselines

    doc = json.loads(report.to_json(attach_baselines(results)))
    doc["environment"]["torch"] = environment_torch
    path.write_text(json.dumps(doc))
    return path


def _times(rng, scale, n=60):
    return list(1e-3 * scale * np.exp(rng.normal(0, 0.03, n)))


def test_across_versions_flags_30_percent_slower_and_not_noise(tmp_path):
    rng = np.random.default_rng(1)
    old = _write(tmp_path / "old.json", [_result("a", _times(rng, 1.0)), _result("b", _times(rng, 1.0))])
    new = _write(tmp_path / "new.json", [_result("a", _times(rng, 1.3), "2.6.0"), _result("b", _times(rng, 1.0), "2.6.0")],
                 environment_torch="2.6.0")  # fmt: skip
    cmp = gpuplay.load(old).compare(gpuplay.load(new))
    verdicts = {c.key[0]: c.verdict for c in cmp.changes}
    assert verdicts == {"a": "slower", "b": "within noise"}
    a = next(c for c in cmp.changes if c.key[0] == "a")
    assert a.low is not None and 1.2 < a.low < a.ratio < a.high < 1.4
    assert ("PyTorch", "2.5.0", "2.6.0") in cmp.versions

    from gpuplay.cli import main

    out = CliRunner().invoke(main, ["compare", "--from", str(old), str(new)])
    assert out.exit_code == 0, out.output
    assert "a (64×64) numpy cpu float32: slower" in out.output
    assert "b (64×64) numpy cpu float32: within noise" in out.output
    assert "PyTorch 2.5.0 → 2.6.0" in out.output
    merged_path = old.parent / "m.json"
    CliRunner().invoke(
        main, ["compare", "--from", str(old), str(new), "--format", "json", "--out", str(merged_path)]
    )
    doc = json.loads(merged_path.read_text())
    merged = gpuplay.load(merged_path)  # the merge itself is a file gpuplay writes
    assert isinstance(merged, api.Table) and [r["scenario"] for r in merged] == ["a", "b"]
    assert [c["verdict"] for c in doc["across_versions"]["changes"]] == ["slower", "within noise"]


def test_faster_is_flagged_too():
    from gpuplay.core.reports import crossversion as cv

    rng = np.random.default_rng(2)
    old = [_result("a", _times(rng, 1.0)).to_dict()]
    new = [_result("a", _times(rng, 0.7)).to_dict()]
    assert [c.verdict for c in cv.compare_results(old, new)] == ["faster"]


def test_load_reads_back_every_file_gpuplay_writes(tmp_path):
    _need("pandas")
    from gpuplay.cli import main
    from gpuplay.core.reports.sessionlog import list_sessions
    from gpuplay.core.studies.compare import attach_baselines
    from gpuplay.tui.exports import export_session

    cli = CliRunner()
    base = ["-s", "n=64", "--budget", "0.03"]
    for fmt in ("json", "csv"):
        res = cli.invoke(
            main, ["run", "matmul", *base, "--format", fmt, "--out", str(tmp_path / f"run.{fmt}")]
        )
        assert res.exit_code == 0, res.output
        res = cli.invoke(main, ["sweep", "matmul", "--over", "n=32,64", "--backends", "numpy", "--budget", "0.03",
                                "--format", fmt, "--out", str(tmp_path / f"sweep.{fmt}")])  # fmt: skip
        assert res.exit_code == 0, res.output
    res = cli.invoke(main, ["compare", "--scenario", "matmul", "--backends", "numpy", "--budget", "0.03",
                            "--format", "json", "--out", str(tmp_path / "compare.json")])  # fmt: skip
    assert res.exit_code == 0, res.output
    run_json = gpuplay.load(tmp_path / "run.json")
    assert isinstance(run_json, api.Results) and run_json[0].median and run_json[0].samples
    assert run_json[0].versions.get("numpy") == np.__version__
    assert isinstance(gpuplay.load(tmp_path / "compare.json"), api.Results)
    sw = gpuplay.load(tmp_path / "sweep.json")
    assert isinstance(sw, api.Sweep) and list(sw.to_pandas()["n"]) == [32, 64]
    for name in ("run.csv", "sweep.csv"):
        table = gpuplay.load(tmp_path / name)
        assert isinstance(table, api.Table) and len(table) >= 1
    logs = list_sessions()
    assert logs, "the CLI wrote no session log"
    logged = gpuplay.load(logs[0])
    assert isinstance(logged, api.Results) and logged[0].samples
    export_session([r.run_result for r in run_json], tmp_path)
    exported = sorted(tmp_path.glob("gpuplay-session-*"))
    assert {p.suffix for p in exported} == {".json", ".csv", ".md"}
    for p in exported:
        if p.suffix == ".md":
            with pytest.raises(ValueError, match="Markdown"):
                gpuplay.load(p)
        else:
            assert len(gpuplay.load(p)) == 1
    assert attach_baselines  # imported for the export's rows
    (tmp_path / "junk.json").write_text('{"hello": 1}')
    with pytest.raises(ValueError, match="not a gpuplay result file"):
        gpuplay.load(tmp_path / "junk.json")


def test_line_magic_parses_gpuplay_run_arguments():
    from gpuplay import notebook

    r = notebook.line_magic("run matmul -s n=64 --budget 0.03 --seed 3")
    assert isinstance(r, api.Result) and r.run_result.spec.seed == 3 and r.size == "64×64"
    with pytest.raises(notebook.MagicUsageError, match="--format"):
        notebook.line_magic("run matmul --format json")
    with pytest.raises(notebook.MagicUsageError, match="No such option"):
        notebook.line_magic("run matmul --no-such-flag")


def test_cell_magic_measures_the_cell_as_a_code_file():
    from gpuplay import notebook

    cell = textwrap.dedent("""
        PARAMS = {"n": 2048}
        def inputs(rng, n):
            return rng.standard_normal(n)
        def step(xp, x):
            return xp.sin(x) * 2
    """)
    with pytest.raises(notebook.MagicUsageError, match="--format"):
        notebook.cell_magic("-b numpy,torch --format json", cell)
    with pytest.raises(notebook.MagicUsageError, match="--bogus"):
        notebook.line_magic("compare matmul --bogus 1")
    res = notebook.cell_magic("-b numpy,torch -s n=512 --budget 0.03", cell)
    assert [r.backend for r in res] == ["numpy", "torch"] and all(r.check_ok for r in res)
    assert res[1].size and "512" in res[1].size


def test_an_interrupt_stops_a_compare_and_keeps_what_finished():
    """A notebook's stop button is a SIGINT to the kernel: the measurement in progress is
    cancelled, the finished ones come back, marked interrupted."""
    import os
    import signal
    import threading

    results: list[api.Results] = []
    finished = threading.Event()
    original = api._log

    def log_then_interrupt(rs):
        original(rs)
        if not finished.is_set():
            finished.set()  # the first finished measurement: now press stop
            threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT)).start()

    api._log = log_then_interrupt
    try:
        with pytest.warns(UserWarning, match="interrupted"):
            # matmul's NumPy and torch rows come from one paired measurement; fft1d's is stopped.
            results.append(gpuplay.compare(["matmul", "fft1d"], backends=["numpy", "torch"], preset="quick",
                                           budget_s=1.0, progress=False))  # fmt: skip
    finally:
        api._log = original
    res = results[0]
    assert res.interrupted and [(r.scenario, r.backend) for r in res] == [
        ("matmul", "numpy"),
        ("matmul", "torch"),
    ]
    assert all(r.median for r in res)


@pytest.mark.gpu_fake
def test_a_cuda_result_records_the_driver_and_the_device_uuid(monkeypatch):
    """On a GPU the versions name the driver (NVML's nvmlSystemGetDriverVersion) and the UUID of
    the CUDA device the run used (torch's device properties), matched by CUDA index."""
    import torch

    from gpuplay.core.measure import provenance
    from tests.unit.gpu_fakes import FakeGpu, FakePynvml, install_cuda_uuids, install_nvml

    class Nvml(FakePynvml):
        def nvmlSystemGetDriverVersion(self) -> str:  # noqa: N802 - pynvml's name
            return "580.65.06"

    install_nvml(monkeypatch, Nvml([FakeGpu("GPU-aaaa", "A"), FakeGpu("GPU-bbbb", "B")]))
    install_cuda_uuids(monkeypatch, ["GPU-bbbb-0000", "GPU-aaaa-1111"])
    monkeypatch.setattr(torch.version, "cuda", "13.0", raising=False)
    v = provenance.versions("cuda:1")
    assert v["driver"] == "580.65.06" and v["device_uuid"] == "aaaa1111" and v["torch_cuda"] == "13.0"
    assert "driver" not in provenance.versions("cpu")


def test_progress_is_a_widget_bar_in_a_kernel_with_ipywidgets(monkeypatch):
    """ipywidgets' documented pieces (IntProgress(min, max, value), Label(value), HBox(children),
    bar_style) faked: in a kernel the bar advances once per finished measurement; elsewhere text."""
    import io
    import types

    from gpuplay import progress

    _need("IPython")

    shown = []

    class Widget:
        def __init__(self, *args, **kw):
            self.__dict__.update(kw)
            self.children = args[0] if args else []

    fake = types.SimpleNamespace(IntProgress=Widget, Label=Widget, HBox=Widget)
    monkeypatch.setitem(sys.modules, "ipywidgets", fake)
    monkeypatch.setattr(progress, "in_kernel", lambda: True)
    import IPython.display

    monkeypatch.setattr(IPython.display, "display", shown.append)
    bar = progress.make(2)
    assert isinstance(bar, progress.WidgetProgress) and shown == [bar.box]
    bar.step("numpy cpu \x1b[2J: 1 ms")
    assert "\x1b" not in bar.label.value and "␛[2J" in bar.label.value
    bar.step("torch cpu: 2 ms")
    bar.close()
    assert bar.bar.value == 2 and bar.bar.bar_style == "success"
    monkeypatch.setattr(progress, "in_kernel", lambda: False)
    out = io.StringIO()
    text = progress.TextProgress(1, out)
    text.step("numpy cpu: 1 ms")
    assert out.getvalue() == "[1/1] numpy cpu: 1 ms\n"
    assert isinstance(progress.make(1), progress.TextProgress)


def test_a_sweep_shows_hostile_labels_as_text():
    doc = {"scenario": "<b>s</b>", "param": "n", "values": [1, 2],
           "series": [{"label": "<script>x</script>$\\x1b", "points": [
               {"value": 1, "median": 1e-3, "low": 9e-4, "high": 1.1e-3, "n": 5, "status": "ok"},
               {"value": 2, "median": 2e-3, "low": 1.9e-3, "high": 2.1e-3, "n": 5, "status": "ok"}]}]}  # fmt: skip
    page = api.Sweep(doc)._repr_html_()
    assert "<script>" not in page and "<b>s" not in page and "&lt;script&gt;" in page


def test_to_pandas_without_pandas_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas → ImportError
    res = api.Results.from_run_results([_result("a", [0.001] * 5)])
    with pytest.raises(ImportError, match=r"pip install pandas "):
        res.to_pandas()


def test_an_interrupt_through_the_engine_process_keeps_what_finished():
    """The real path: a script (or kernel) measuring through the engine process gets SIGINT while
    the second measurement runs; the engine stops it, the first comes back."""
    import os
    import signal

    code = textwrap.dedent("""
        import sys, warnings, gpuplay
        warnings.simplefilter("ignore")
        res = gpuplay.compare(["matmul", "fft1d"], backends=["numpy", "torch"], preset="quick", budget_s=1.0)
        print("RESULT", len(res), res.interrupted, [r.backend for r in res], flush=True)
    """)
    env = {k: v for k, v in os.environ.items() if k != "GPUPLAY_IN_PROCESS"}
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)  # fmt: skip
    try:
        # matmul's two rows, from one paired measurement: "[1/4] matmul numpy …", "[2/4] matmul torch …"
        first, second = proc.stderr.readline(), proc.stderr.readline()
        assert first.startswith("[1/4]") and second.startswith("[2/4]"), (first, second)
        proc.send_signal(signal.SIGINT)  # while fft1d's pairs run
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "RESULT 2 True ['numpy', 'torch']" in out


def test_a_sweep_without_matplotlib_shows_a_text_chart(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    doc = {"scenario": "s", "param": "n", "values": [1, 2],
           "series": [{"label": "numpy cpu float32", "points": [
               {"value": 1, "median": 1e-3, "n": 5, "status": "ok"},
               {"value": 2, "median": 4e-3, "n": 5, "status": "ok"}]}]}  # fmt: skip
    page = api.Sweep(doc)._repr_html_()
    assert "<img" not in page and "<pre>" in page and "█" in page
    with pytest.raises(ImportError, match=r"pip install matplotlib "):
        api.Sweep(doc).plot()


def test_a_failing_step_raises_measurement_error_with_its_result(tmp_path):
    code = tmp_path / "boom.py"
    code.write_text(
        textwrap.dedent("""
        def inputs(rng, n=16):
            return rng.standard_normal(n)
        def step(xp, x):
            raise RuntimeError("boom \\x1b[2J")
    """)
    )
    with pytest.raises(api.MeasurementError, match="boom") as info:
        gpuplay.run(str(code), budget_s=0.05)
    assert info.value.result.status == "failed" and "\x1b" not in str(info.value)


def test_magics_take_gpuplay_runs_flags_and_no_baseline():
    """The cell magic's options are `gpuplay run`'s own (click parses them: --warmup, --seed, a
    NaN budget refused as the CLI refuses it), and both magics honour --no-baseline: no NumPy row
    the user did not name, no interleaved pairs."""
    from gpuplay import notebook

    cell = (
        "def inputs(rng, n=256):\n    return rng.standard_normal(n)\ndef step(xp, x):\n    return xp.sin(x)\n"
    )
    with pytest.raises(notebook.MagicUsageError, match="finite"):
        notebook.cell_magic("--budget nan", cell)
    paired = notebook.cell_magic("-b torch --budget 0.03 --warmup 2 --seed 7", cell)
    assert [r.backend for r in paired] == ["numpy", "torch"] and paired[1].speedup_interval is not None
    assert paired[1].run_result.spec.warmup == 2 and paired[1].run_result.spec.seed == 7
    alone = notebook.cell_magic("-b torch --budget 0.03 --no-baseline", cell)
    assert [r.backend for r in alone] == ["torch"] and alone[0].speedup_interval is None
    line = notebook.line_magic("run matmul -s n=64 --budget 0.03 -b torch --no-baseline")
    assert line.speedup is None
    assert notebook.line_magic("run matmul -s n=64 --budget 0.03 -b torch").speedup is not None


def test_backends_are_a_list_or_comma_separated_text_as_on_the_command_line():
    with pytest.raises(ValueError, match="'jax'"):
        gpuplay.compare("matmul", backends="numpy,jax", progress=False)
    with pytest.raises(ValueError, match="none given"):
        gpuplay.compare("matmul", backends=" , ", progress=False)
    res = gpuplay.compare("matmul", backends="numpy, numpy", budget_s=0.02, progress=False)
    assert [r.backend for r in res] == ["numpy"]


def test_an_interrupt_returns_only_when_the_measurement_has_stopped():
    """Ctrl-C (a notebook's stop button) during gpuplay.run: it returns the cancelled Result with the
    steps timed so far, and only once the measuring thread has ended (never with it running on)."""
    import os
    import signal
    import threading
    import time

    timer = threading.Timer(1.5, os.kill, (os.getpid(), signal.SIGINT))
    t0 = time.monotonic()
    timer.start()
    try:
        with pytest.warns(UserWarning, match="interrupted"):
            r = gpuplay.run(
                "matmul", params={"n": 256}, budget_s=30.0, min_repeat=1000000, max_repeat=1000000
            )
    finally:
        timer.cancel()
    assert time.monotonic() - t0 < 25  # stopped by the interrupt, not by the budget
    assert isinstance(r, api.Result) and r.run_result.status == "cancelled" and len(r.samples) > 0
    assert not [t for t in threading.enumerate() if t.name == "gpuplay-measure"]


def test_load_names_a_fifo_and_a_code_file_without_presets_says_so(tmp_path):
    import os

    for name in ("log.jsonl", "r.json", "t.csv"):
        os.mkfifo(tmp_path / name)  # never opened: reading one would wait forever
        with pytest.raises(ValueError, match="not a regular file"):
            gpuplay.load(tmp_path / name)
    from gpuplay import notebook

    with pytest.raises(ValueError, match="defines no PRESETS"):
        notebook.cell_magic(
            "-p quick", "def inputs(rng, n=8):\n    return rng.random(n)\ndef step(xp, x):\n    return x\n"
        )


def test_load_of_a_damaged_log_warns_a_few_times_not_once_per_line(tmp_path):
    import warnings

    log = tmp_path / "damaged.jsonl"
    log.write_text('{"spec": {"no_such_field": "\\u001b[2J"}}\n' * 2000)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = gpuplay.load(log)
    assert len(res) == 0 and 2 <= len(caught) <= 6
    assert "1995 more problem(s)" in str(caught[-1].message)
    assert not any("\x1b" in str(w.message) for w in caught)


def test_compare_on_a_device_not_here_says_so_instead_of_an_empty_table(monkeypatch):
    from gpuplay.core.spec import RunSpec

    with pytest.raises(ValueError, match="device must be"):
        gpuplay.compare("matmul", backends="numpy,torch", devices="gpu", progress=False)
    with pytest.raises(ValueError, match="'cuda:7': not here"):
        gpuplay.compare("matmul", backends="numpy,torch", devices="cuda:7", progress=False)
    # On a GPU machine the plan has 'cuda:0' rows: devices="cuda" must select them.
    seen = []

    def plan(scenarios, preset, backends, **kw):
        specs = [RunSpec.make("matmul", {"n": 64}, backend="numpy"),
                 RunSpec.make("matmul", {"n": 64}, backend="torch", device="cuda:0")]  # fmt: skip
        return specs, []

    monkeypatch.setattr("gpuplay.core.studies.compare.plan_compare", plan)
    monkeypatch.setattr(
        api, "_run_specs", lambda specs, *a: (seen.extend(specs), (list(specs)[:0], False))[1]
    )
    gpuplay.compare("matmul", backends="numpy,torch", devices="cuda", progress=False)
    assert [s.device for s in seen] == ["cpu", "cuda:0"]


def test_across_versions_drops_samples_no_step_could_take_and_writes_strict_json(tmp_path):
    """A file claiming 1e-320 s steps (or a year) is not compared: the ratio would be inf, the
    verdict 'within noise' and `compare --from --format json` would write Infinity/NaN."""
    from gpuplay.cli import main
    from gpuplay.core.reports import crossversion as cv

    rng = np.random.default_rng(3)
    old = _write(tmp_path / "old.json", [_result("a", [1e-320] * 20), _result("b", [4e7] * 20)])
    new = _write(tmp_path / "new.json", [_result("a", _times(rng, 1.0)), _result("b", _times(rng, 1.0))])
    changes = cv.compare_results(
        json.loads(old.read_text())["results"], json.loads(new.read_text())["results"]
    )
    assert [(c.verdict, c.ratio) for c in changes] == [("not compared", None)] * 2  # named, not dropped
    assert all("its samples are no step times" in c.note for c in changes)
    out = tmp_path / "m.json"
    res = CliRunner().invoke(
        main, ["compare", "--from", str(old), str(new), "--format", "json", "--out", str(out)]
    )
    assert res.exit_code == 0, res.output

    def strict(constant):
        raise ValueError(f"not JSON: {constant}")

    json.loads(out.read_text(), parse_constant=strict)


HOSTILE = "<script>alert(1)</script>[red]x\x1b[2J\u202e"


def _escaped(html: str) -> None:
    assert "<script>" not in html and "\x1b" not in html and "\u202e" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;[red]x" in html


def test_the_api_names_are_the_packages_less_its_own_two():
    assert sorted(api.__all__) == sorted(set(gpuplay.__all__) - {"__version__", "load_ipython_extension"})


@pytest.mark.parametrize("content", [b"{not json", b"[" * 100_000, b"\xff\xfe"], ids=["bad", "deep", "latin"])
def test_load_and_a_sweep_file_say_the_same_words_about_the_same_bad_file(tmp_path, content):
    from gpuplay.core.reports import sweepreport

    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    with pytest.raises(ValueError) as by_load:
        gpuplay.load(bad)
    with pytest.raises(sweepreport.SweepFileError) as by_sweep:
        sweepreport.load_sweep(bad)
    assert str(by_load.value) == str(by_sweep.value) and str(bad) in str(by_load.value)


def test_a_loaded_csv_shows_as_an_escaped_table_in_a_notebook(tmp_path):
    import csv

    path = tmp_path / "r.csv"
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["scenario", HOSTILE])
        w.writerow([HOSTILE, "1.5"])
        w.writerow(["matmul", "2", "a cell beyond the header"])  # DictReader's None key
        w.writerows([["s", str(i)] for i in range(600)])
    table = gpuplay.load(path)
    html = table._repr_html_()
    _escaped(html)
    assert html.count("&lt;script&gt;") == 2  # the heading and the cell
    assert "<th>(extra)</th>" in html and "a cell beyond the header" in html
    assert html.count("<tr>") == 1 + 500 and "… 102 more row(s)" in html  # bounded, the rest counted


def test_a_comparison_of_two_loaded_files_shows_escaped_in_a_notebook(tmp_path):
    import json

    r = gpuplay.run("matmul", params={"n": 16}, budget_s=0.05, baseline=False)
    doc = r.run_result.to_dict()
    doc["spec"]["scenario"] = HOSTILE  # a file's words: anything at all
    for name, env in (("old.json", {"torch": "2.12.0"}), ("new.json", {"torch": "<b>2.13</b>"})):
        (tmp_path / name).write_text(json.dumps({"environment": env, "results": [doc]}))
    comparison = gpuplay.load(tmp_path / "old.json").compare(gpuplay.load(tmp_path / "new.json"))
    assert comparison.changes, comparison.text()
    html = comparison._repr_html_()
    _escaped(html)
    assert "within noise" in html and "<b>2.13" not in html


def test_compare_takes_params_as_run_does():
    """gpuplay.compare had no params=: a notebook could not compare matmul at another n."""
    res = gpuplay.compare("matmul", backends="numpy", params={"n": 48}, budget_s=0.02, progress=False)
    assert [r.size for r in res] == ["48×48"]
    assert res[0].run_result.spec.params["n"] == 48


@pytest.mark.parametrize("call", [gpuplay.run, gpuplay.compare])
def test_an_unknown_parameter_is_a_value_error_naming_the_known_ones_in_run_and_compare(call):
    with pytest.raises(ValueError, match=r"unknown parameter\(s\) nn for matmul \(known: n\)"):
        call("matmul", params={"nn": 8})


def test_compare_params_of_the_wrong_kind_are_refused():
    with pytest.raises(TypeError, match="params takes a dict of parameter names to values"):
        gpuplay.compare("matmul", backends="numpy", params=[("n", 8)], progress=False)


@pytest.mark.parametrize("call", [gpuplay.run, gpuplay.compare, gpuplay.sweep])
def test_a_scenario_folder_that_is_not_there_is_a_value_error(call, tmp_path):
    args = {"over": {"n": [8, 16]}} if call is gpuplay.sweep else {}
    with pytest.raises(ValueError, match=r"scenario_dirs: .*missing does not exist"):
        call("matmul", **args, scenario_dirs=[tmp_path / "missing"])
