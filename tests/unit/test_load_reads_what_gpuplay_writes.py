"""gpuplay.load reads what gpuplay writes (a Result's or a Results' to_dict() as JSON among them),
and refuses or warns of a result file's figures that cannot be trusted, naming the file and the
field: NaN and Infinity, step times past any real one, fields of the wrong kind."""

from __future__ import annotations

import json
import warnings

import pytest

import gpuplay


@pytest.fixture(autouse=True)
def _in_process(monkeypatch):
    monkeypatch.setenv("GPUPLAY_IN_PROCESS", "1")


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """One real measurement (NumPy on the CPU, tiny) and its set, measured once for the module."""
    state = tmp_path_factory.mktemp("state")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GPUPLAY_STATE_DIR", str(state))
        mp.setenv("GPUPLAY_IN_PROCESS", "1")
        res = gpuplay.compare("matmul", backends="numpy", params={"n": 32}, budget_s=0.02, progress=False)
    return res


def test_results_to_dict_written_as_json_loads_back(measured, tmp_path):
    res = gpuplay.Results(list(measured), refused=[("cupy cuda:0 float32", "no CuPy")], interrupted=True)
    path = tmp_path / "many.json"
    path.write_text(json.dumps(res.to_dict()))
    back = gpuplay.load(path)
    assert isinstance(back, gpuplay.Results) and len(back) == len(res)
    assert back[0].samples == res[0].samples and back[0].configuration == res[0].configuration
    assert back.refused == [("cupy cuda:0 float32", "no CuPy")] and back.interrupted


def test_one_result_to_dict_written_as_json_loads_back(measured, tmp_path):
    path = tmp_path / "one.json"
    path.write_text(json.dumps(measured[0].to_dict()))
    back = gpuplay.load(path)
    assert isinstance(back, gpuplay.Results) and len(back) == 1
    assert back[0].median == measured[0].median


def _hostile(measured, tmp_path, name, change):
    doc = json.loads(json.dumps(measured.to_dict()))
    change(doc["results"][0]["result"])
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(doc))  # NaN and Infinity as Python's json writes them
    return path


@pytest.mark.parametrize(
    ("name", "change", "words"),
    [
        (
            "nan",
            lambda r: r.update(samples_s=[float("nan")] * 3),
            r"samples_s holds nan, not a finite step time",
        ),
        ("inf", lambda r: r.update(samples_s=[float("inf")] * 3), r"samples_s holds inf"),
        ("huge", lambda r: r.update(samples_s=[1e308] * 3), r"samples_s holds 1e\+308"),
        ("text", lambda r: r.update(samples_s="0.1,0.2"), r"samples_s is str, not a list of seconds"),
        ("mixed", lambda r: r.update(warmup_s=[0.1, "x"]), r"warmup_s holds 'x', not a number"),
        ("conditions", lambda r: r.update(conditions=[1, 2]), r"conditions is list, not a table"),
    ],
)
def test_a_result_with_untrustworthy_figures_is_refused_naming_file_and_field(
    measured, tmp_path, name, change, words
):
    path = _hostile(measured, tmp_path, name, change)
    with pytest.raises(
        ValueError, match=rf"{name}\.json: no result could be read: result 1 skipped: {words}"
    ):
        gpuplay.load(path)


def test_one_bad_result_among_good_ones_is_skipped_with_a_warning(measured, tmp_path):
    doc = json.loads(json.dumps(measured.to_dict()))
    doc["results"].append(json.loads(json.dumps(doc["results"][0])))
    doc["results"][0]["result"]["samples_s"] = [1e308]
    path = tmp_path / "some.json"
    path.write_text(json.dumps(doc))
    with pytest.warns(UserWarning, match=r"some\.json: result 1 skipped: samples_s holds 1e\+308"):
        back = gpuplay.load(path)
    assert len(back) == 1


def test_a_nan_median_is_warned_of_and_recomputed(measured, tmp_path):
    path = _hostile(measured, tmp_path, "median", lambda r: r["summary"].update(median=float("nan")))
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        back = gpuplay.load(path)
    assert any("median.json: result 1: summary.median is nan; recomputed" in str(w.message) for w in said)
    assert back[0].median == measured[0].median


def test_a_session_log_line_with_bad_samples_is_skipped_naming_the_field(measured, tmp_path):
    line = measured[0].run_result.to_dict()
    bad = {**line, "samples_s": [float("-inf"), 1.0]}
    path = tmp_path / "session-1.jsonl"
    path.write_text(json.dumps(line) + "\n" + json.dumps(bad) + "\n")
    with pytest.warns(UserWarning, match=r"session-1\.jsonl: result 2 skipped: samples_s holds -inf"):
        back = gpuplay.load(path)
    assert len(back) == 1


def test_a_character_device_is_named_as_one():
    with pytest.raises(ValueError, match=r"/dev/null: not a regular file \(a device, such as /dev/null\)"):
        gpuplay.load("/dev/null")
