"""The Python API given careless or wrong arguments: an error naming the argument, what it got and
what it takes (never one from deep inside), the closest name for a typo, and the objects behaving
as users of torch.utils.benchmark, pandas and IPython expect."""

from __future__ import annotations

import json
import warnings

import pytest

import gpuplay
from gpuplay import api
from gpuplay.core.result import RunResult
from gpuplay.core.spec import RunSpec


@pytest.fixture(autouse=True)
def _in_process(monkeypatch):
    monkeypatch.setenv("GPUPLAY_IN_PROCESS", "1")


def _step(xp, a):
    return a + 1


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda: gpuplay.run("matmul", params=[1, 2]), r"params takes a dict .*got \[1, 2\] \(list\)"),
        (lambda: gpuplay.compare("matmul", backends=5), r"backends takes a comma-separated .*got 5 \(int\)"),
        (lambda: gpuplay.compare("matmul", devices=3.5), r"devices takes .*got 3\.5 \(float\)"),
        (lambda: gpuplay.compare(5), r"scenario takes .*got 5 \(int\)"),
        (lambda: gpuplay.sweep("matmul", over=[256]), r"over takes a dict .*got \[256\] \(list\)"),
        (lambda: gpuplay.measure(5, 6), r"step takes a function defined with def .*got 5 \(int\)"),
        (lambda: gpuplay.measure(_step, 6), r"inputs takes a function defined with def .*got 6 \(int\)"),
        (lambda: gpuplay.load(5), r"path takes a file gpuplay wrote .*got 5 \(int\)"),
        (lambda: gpuplay.run(5), r"scenario takes a scenario's name or a code file's path .*got 5 \(int\)"),
        (
            lambda: gpuplay.run("matmul", scenario_dirs=5),
            r"scenario_dirs takes a list of folders.*got 5 \(int\)",
        ),
        (lambda: gpuplay.run("matmul", preset=5), r"preset takes a preset's name.*got 5 \(int\)"),
        (lambda: gpuplay.compare("matmul", preset=5), r"preset takes a preset's name.*got 5 \(int\)"),
        (lambda: gpuplay.tune("matmul", preset=5), r"preset takes a preset's name.*got 5 \(int\)"),
        (
            lambda: gpuplay.sweep("matmul", over={"n": 5}),
            r"over\['n'\] takes the values to sweep.*got 5 \(int\)",
        ),
        (
            lambda: gpuplay.measure(lambda xp, a: a, _step),
            r"step must be a function defined with def, not a lambda",
        ),
    ],
)
def test_an_argument_of_the_wrong_kind_is_a_type_error_naming_it(call, words):
    with pytest.raises(TypeError, match=words):
        call()


def test_a_misspelt_keyword_suggests_the_argument_meant_not_only_the_levers():
    with pytest.raises(ValueError, match=r"unknown keyword argument 'bakend'; did you mean 'backend'\?") as e:
        gpuplay.run("matmul", bakend="torch")
    assert "arguments: scenario, backend" in str(e.value)
    with pytest.raises(ValueError, match=r"'tf_32'; did you mean 'tf32'\?"):
        gpuplay.run("matmul", tf_32=True)


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (
            lambda: gpuplay.compare("matmul", bakends="numpy"),
            "compare() got an unexpected keyword argument 'bakends'; did you mean 'backends'?",
        ),
        (
            lambda: gpuplay.sweep("matmul", {"n": [8]}, budget=0.1),
            "sweep() got an unexpected keyword argument 'budget'; did you mean 'budget_s'?",
        ),
        (lambda: gpuplay.measure(_step, _step, backend="numpy"), "did you mean 'backends'?"),
        (
            lambda: gpuplay.load(pth="x.json"),
            "load() got an unexpected keyword argument 'pth'; did you mean 'path'?",
        ),
    ],
)
def test_a_misspelt_keyword_of_any_function_names_the_closest(call, words):
    with pytest.raises(TypeError) as e:
        call()
    assert words in str(e.value)


def test_a_misspelt_scenario_suggests_the_closest():
    with pytest.raises(ValueError, match=r"unknown scenario 'matmull'; did you mean 'matmul'\? known: "):
        gpuplay.run("matmull")


def test_a_scenario_whose_file_did_not_load_is_named_with_that_file(tmp_path):
    folder = tmp_path / "sc"
    folder.mkdir()
    (folder / "mymm.toml").write_text('name = "mymm"\nworkload = "matmul"\ntitel = "x"\ntags = 3\n')
    with warnings.catch_warnings(record=True), pytest.raises(ValueError) as e:
        warnings.simplefilter("always")
        gpuplay.run("mymm", scenario_dirs=[folder])
    said = str(e.value)
    assert "mymm.toml defines it but did not load" in said
    # every mistake of the file, not only the first
    assert "titel: unknown field; did you mean 'title'?" in said and "tags: must be a list" in said


def _results() -> gpuplay.Results:
    spec = RunSpec.make("matmul", {"n": 64}, scenario="matmul", backend="numpy")
    r = RunResult(spec=spec, samples=[1e-3, 1.1e-3, 1.2e-3, 1.3e-3, 1.4e-3], size="64×64")
    return gpuplay.Results.from_run_results(
        [r, r], refused=[("cupy cuda:0 float32", "no CuPy")], interrupted=True
    )


def test_results_compare_takes_a_results_or_a_path_and_names_anything_else(tmp_path):
    res = _results()
    with pytest.raises(TypeError, match=r"newer takes a Results .* or a result file's path; got None"):
        res.compare(None)
    with pytest.raises(TypeError, match=r"got 3 \(int\)"):
        res.compare(3)
    path = tmp_path / "new.json"
    path.write_text(json.dumps(res.to_dict()))
    cmp = res.compare(str(path))
    assert cmp.changes and "within noise" in cmp.text()
    with pytest.raises(ValueError, match="no such file"):
        res.compare(tmp_path / "missing.json")


def test_a_slice_keeps_what_was_refused_and_interrupted():
    part = _results()[0:1]
    assert isinstance(part, gpuplay.Results) and len(part) == 1
    assert part.refused == [("cupy cuda:0 float32", "no CuPy")] and part.interrupted


def test_the_iqr_is_named_iqr_and_interval_is_a_deprecated_alias():
    r = _results()[0]
    assert r.iqr is not None and r.iqr[0] <= r.median <= r.iqr[1]
    with pytest.warns(DeprecationWarning, match="use Result.iqr"):
        assert r.interval == r.iqr
    assert "iqr_s" in r.to_dict() and "interval_s" not in r.to_dict()


def test_sweep_plot_returns_the_axes_and_leaves_its_figure_open():
    plt = pytest.importorskip("matplotlib.pyplot")
    doc = {"scenario": "s", "param": "n", "values": [1, 2],
           "series": [{"label": "numpy cpu float32", "points": [
               {"value": 1, "median": 1e-3, "n": 5, "status": "ok"},
               {"value": 2, "median": 4e-3, "n": 5, "status": "ok"}]}]}  # fmt: skip
    before = set(plt.get_fignums())
    ax = api.Sweep(doc).plot()
    assert ax.get_lines() and plt.fignum_exists(ax.figure.number)  # plt.show() would show it
    plt.close(ax.figure)
    api.Sweep(doc)._repr_html_()  # its own Figure, outside pyplot: nothing left open to show twice
    assert set(plt.get_fignums()) == before


@pytest.fixture
def shell():
    pytest.importorskip("IPython")
    from IPython.core.interactiveshell import InteractiveShell

    sh = InteractiveShell.instance()
    sh.run_line_magic("load_ext", "gpuplay")
    yield sh
    InteractiveShell.clear_instance()


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("run matmul --format json", r"--format: not taken by the magic.*r\.to_dict\(\)"),
        ("tune matmul --format json", r"--format: not taken by the magic.*%gpuplay tune.*!gpuplay tune"),
        ("tune matmul --out x.md", r"--out: not taken by the magic.*%gpuplay tune"),
        ("compare matmul --format json", r"--format: not taken by the magic.*%gpuplay compare"),
        ("sweep matmul --over n=8,16 --out x.json", r"--out: not taken by the magic.*%gpuplay sweep"),
        ("run matmul --json", r"No such option --json: for json output use --format json"),
        ("run matmull", r"did you mean 'matmul'"),
        ("compare matmul --bogus 1", r"unknown option\(s\) --bogus"),
    ],
)
def test_the_magics_raise_ipythons_usage_error(shell, line, words):
    from IPython.core.error import UsageError

    with pytest.raises(UsageError, match=words):
        shell.run_line_magic("gpuplay", line)


def test_the_cell_magic_says_the_same_of_an_output_flag(shell):
    from IPython.core.error import UsageError

    with pytest.raises(UsageError, match=r"--format: not taken by the magic.*to_dict"):
        shell.run_cell_magic("gpuplay", "-b numpy --format json", "def step(xp, a):\n    return a\n")


def test_a_magics_usage_error_shows_one_line_and_no_traceback(shell, capsys):
    result = shell.run_cell("%gpuplay run matmul --format json")
    out = capsys.readouterr()
    said = out.out + out.err
    assert not result.success and "UsageError" in said and "gpuplay: --format" in said
    assert "Traceback" not in said
