"""Property-based: hostile scenario and deck files, and hostile numbers on the command line.

For every case: no traceback, exit code 0 or 2, a bad file named while the good ones still load,
and no escape byte (nor any other control character) from a file ever reaches the output.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuplay.cli import main
from gpuplay.core.catalogue.scenarios import load_scenarios
from gpuplay.core.reports.decks import DeckError, load_deck

CONTROL = [chr(c) for c in (*range(0, 9), *range(11, 32), *range(0x7F, 0xA0))] + ["\u202e"]
PIECES = ["[", "]", "/", "[/]", "[bold", "[/bold]", "\\", "\x1b", "\x1b[31m", "\x1b]0;t\x07", *CONTROL]
hostile_text = st.lists(
    st.one_of(st.sampled_from(PIECES), st.characters(blacklist_categories=("Cs",))), max_size=12
).map("".join)


def toml_string(s: str) -> str:
    out = []
    for ch in s:
        code = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def toml_number(x: float) -> str:
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return repr(x)


def no_controls(text: str) -> bool:
    return not any(ch in text for ch in CONTROL if ch not in "\n")


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(title=hostile_text, description=hostile_text, claim=hostile_text, field=hostile_text,
       depth=st.integers(1, 3000))  # fmt: skip
def test_list_over_hostile_scenario_files(title, description, claim, field, depth):
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        (folder / "hostile.toml").write_text(
            f'name = "hostile"\nworkload = "elementwise"\ntitle = {toml_string(title)}\n'
            f"description = {toml_string(description)}\n[claim]\nsource = {toml_string(claim)}\n"
            f"text = {toml_string(claim)}\n",
            encoding="utf-8",
        )
        (folder / "badfield.toml").write_text(f'{toml_string(field)} = 1\nname = "bf"\nworkload = "matmul"\n')
        (folder / "deep.toml").write_text(
            f'name = "deep"\nworkload = "matmul"\ntags = {"[" * depth}{"]" * depth}\n'
        )
        res = CliRunner().invoke(main, ["list", "--scenarios", d])
        out = res.stdout + res.stderr
        assert res.exit_code == 0, out
        assert "Traceback" not in out
        assert no_controls(out), repr(out)
        flat = out.replace("\n", "")
        assert "badfield.toml" in flat or field in ("name", "workload")
        assert "hostile" in res.stdout and "matmul" in res.stdout  # the good ones, and the built-ins
        sset = load_scenarios([folder])
        assert "hostile" in sset.scenarios


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    budget=st.floats(allow_nan=True, allow_infinity=True),
    title=hostile_text,
    depth=st.integers(1, 5000),
)
def test_hostile_deck_files_are_named(budget, title, depth):
    from gpuplay.core.catalogue.scenarios import load_scenarios

    with tempfile.TemporaryDirectory() as d:
        deck = Path(d) / "deck.toml"
        deck.write_text(
            f'title = {toml_string(title)}\n[[steps]]\ntitle = {toml_string(title)}\ncaption = "c"\n'
            f'scenario = "elementwise"\nbudget_s = {toml_number(budget)}\ntags = {"[" * depth}{"]" * depth}\n'
        )
        try:
            load_deck(deck, load_scenarios())
        except DeckError as exc:
            assert str(exc).startswith("deck.toml")


NUMBER_TEXT = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(-(2**70), 2**70).map(str),
    st.sampled_from(["nan", "inf", "-inf", "NaN", "1e-300", "1e300", "", "abc", "0x10", "1_000"]),
)


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(option=st.sampled_from(["--budget", "--max-step", "--warmup", "--repeat", "--seed", "--threads"]),
       value=NUMBER_TEXT)  # fmt: skip
def test_hostile_numbers_on_run(option, value):
    res = CliRunner().invoke(main, ["run", "elementwise", "-s", "n=100", "--repeat", "3", "--warmup", "0",
                                    "--budget", "0.01", option, value])  # fmt: skip
    out = res.stdout + res.stderr
    assert res.exit_code in (0, 2), out
    assert "Traceback" not in out
    if res.exit_code == 0:
        number = float(value)
        assert math.isfinite(number)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(value=NUMBER_TEXT)
def test_hostile_numbers_on_monitor(value):
    res = CliRunner().invoke(main, ["monitor", "--interval", value, "--count", "1"])
    assert res.exit_code in (0, 2), res.stdout + res.stderr
    assert "Traceback" not in res.stdout + res.stderr
