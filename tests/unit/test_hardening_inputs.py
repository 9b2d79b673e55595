"""Bad input. Property-based: scenario files and CLI arguments, hundreds of cases each.

No traceback ever reaches the user; every bad input gets a message naming what is wrong;
the good scenarios still load. Each test prints the number of cases it ran.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuplay.cli import main
from gpuplay.core.catalogue.scenarios import Scenario, ScenarioError, load_scenarios, parse_scenario
from tests.tui_helpers import tiny_scenarios

TINY = tiny_scenarios(Path(tempfile.mkdtemp(prefix="gpuplay-tiny-")))  # every real run stays tiny

WORKLOADS = ["matmul", "fft2d", "heat", "autograd", "lstsq", "svd", "nosuch", ""]
FIELDS = ["name", "title", "workload", "description", "params", "presets", "claim", "tags", "exec", "n"]
PARAM_NAMES = ["n", "m", "batch", "steps", "alpha", "method", "nrhs", "bogus"]


def toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return '"' + v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


scalars = st.one_of(
    st.integers(min_value=-(2**40), max_value=2**40),
    st.floats(allow_nan=True),
    st.booleans(),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12),
)
params = st.dictionaries(st.sampled_from(PARAM_NAMES), st.one_of(scalars, st.integers(2, 64)), max_size=3)


@st.composite
def scenario_docs(draw) -> str:
    lines = []
    top = draw(
        st.dictionaries(
            st.sampled_from(["name", "title", "workload", "description", "exec"]),
            st.one_of(st.sampled_from(WORKLOADS + ["ok_name"]), scalars),
            max_size=5,
        )
    )
    for k, v in top.items():
        lines.append(f"{k} = {toml_value(v)}")
    if draw(st.booleans()):
        lines.append("[params]")
        lines += [f"{k} = {toml_value(v)}" for k, v in draw(params).items()]
    for preset in draw(st.lists(st.sampled_from(["quick", "published", "x"]), max_size=2, unique=True)):
        lines.append(f"[presets.{preset}]")
        lines += [f"{k} = {toml_value(v)}" for k, v in draw(params).items()]
    if draw(st.booleans()):
        lines.append("[claim]")
        claim = draw(
            st.dictionaries(
                st.sampled_from(["source", "text", "speedup", "flaws", "numpy_ms"]),
                st.one_of(scalars, st.lists(scalars, max_size=2)),
                max_size=4,
            )
        )
        lines += [f"{k} = {toml_value(v)}" for k, v in claim.items()]
    return "\n".join(lines) + "\n"


COUNT = {"scenario": 0, "raw": 0, "cli": 0}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario_docs())
def test_structured_scenario_files_parse_or_name_the_field(doc):
    COUNT["scenario"] += 1
    try:
        sc = parse_scenario(doc, "fuzz.toml")
    except ScenarioError as exc:
        assert str(exc).startswith("fuzz.toml: ")
        assert exc.detail  # says what is wrong
        if exc.field:
            assert exc.field.split(".")[0] in FIELDS + ["claim"] or exc.field in str(exc)
        return
    assert isinstance(sc, Scenario)
    sc.preset_params(None)  # a file that parsed also resolves


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_text_never_raises_anything_but_scenario_error(text):
    COUNT["raw"] += 1
    try:
        parse_scenario(text, "raw.toml")
    except ScenarioError as exc:
        assert str(exc).startswith("raw.toml: ")


def test_good_scenarios_still_load_beside_fuzzed_files(tmp_path):
    for i, text in enumerate(
        [
            "name = 1",
            "[[[",
            "workload = 'matmul'",
            "\x00\x01",
            "name='a'\nworkload='heat'\n[params]\nalpha = 0.9",
        ]
    ):
        (tmp_path / f"bad{i}.toml").write_text(text)
    sset = load_scenarios([tmp_path])
    assert len(sset.scenarios) == len(load_scenarios().scenarios) and len(sset.errors) == 5
    print(f"\nR1 scenario cases: {COUNT['scenario']} structured + {COUNT['raw']} raw text")


SUBCOMMANDS = ["run", "compare", "info", "list", "monitor", "history", "bogus"]
OPTIONS = {
    "--backend": ["numpy", "torch", "cupy", "jax", ""],
    "--device": ["cpu", "cuda", "cuda:0", "cuda:9", "gpu", "mps", "cuda:x"],
    "--dtype": ["float32", "float64", "float16", "bfloat16", "int8"],
    "--amp": ["off", "fp16", "bf16", "fp8"],
    "--compile": ["off", "fast"],  # no real compile: it takes ~16 s
    "--preset": ["quick", "published", "none", ""],
    "-s": ["n=8", "n=0", "n=-1", "n=abc", "n", "=3", "steps=2", "m=4", "bogus=1", "n=99999999999"],
    "--repeat": ["1", "0", "-3", "x", "2"],
    "--warmup": ["0", "-1", "y"],
    "--budget": ["0.001", "0", "-1", "nan", "1e-3"],
    "--threads": ["1", "0", "z"],
    "--max-step": ["0.5", "0", "-2"],
    "--format": ["table", "json", "csv", "markdown", "xml"],
    "--backends": ["numpy", "numpy,torch", "jax", ",", "numpy,cupy"],
    "--variants": ["base", "amp-bf16", "turbo", ""],
    "--interval": ["0", "-1", "0.05"],
    "--count": ["1", "0", "a"],
    "--limit": ["1", "0"],
    "--scenario": ["matmul", "nosuch"],
    "--scenarios": ["/nonexistent/dir"],
}
SCENARIO_ARGS = ["matmul", "heat", "autograd", "fft1d", "nosuch", "", "--", "-x"]


@st.composite
def cli_args(draw) -> list[str]:
    args = [draw(st.sampled_from(SUBCOMMANDS))]
    if args[0] == "run" and draw(st.integers(0, 9)) > 0:
        args.append(draw(st.sampled_from(SCENARIO_ARGS)))
    for opt in draw(st.lists(st.sampled_from(sorted(OPTIONS)), max_size=4, unique=True)):
        args += [opt, draw(st.sampled_from(OPTIONS[opt]))]
    if args[0] in ("run", "compare", "list"):
        args += ["--scenarios", str(TINY)]
    if args[0] in ("run", "compare"):
        # keep every real measurement tiny: small sizes, one step
        args += ["--repeat" if args[0] == "run" else "--budget", "1" if args[0] == "run" else "0.001"]
        if args[0] == "compare" and "--scenario" not in args:
            args += ["--scenario", "matmul", "--preset", "quick"]
        if args[0] == "run" and "-s" not in args:
            args += ["-s", "n=8"]
    if args[0] == "monitor" and "--count" not in args:
        args += ["--count", "1"]
    return args


def _cli_case(args: list[str]) -> None:
    res = CliRunner().invoke(main, args)
    out = res.output
    assert "Traceback" not in out, (args, out)
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise AssertionError(f"{args} raised {res.exception!r}") from res.exception
    assert res.exit_code in (0, 1, 2), (args, res.exit_code, out)
    if res.exit_code == 2:
        assert "Error:" in out  # click names the option or value


@pytest.mark.long(20)
@pytest.mark.slow
def test_cli_never_shows_a_traceback():
    """300 generated command lines; the count and the spread are checked, not just printed."""
    seen: list[str] = []

    @settings(
        max_examples=300,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(cli_args())
    def case(args: list[str]) -> None:
        seen.append(args[0])
        _cli_case(args)

    case()
    COUNT["cli"] = len(seen)
    print(f"\nR1 CLI cases: {len(seen)}")
    # Hypothesis really generated the cases, for every subcommand (and the bogus one).
    assert len(seen) >= 250, len(seen)
    assert set(SUBCOMMANDS) <= set(seen), set(SUBCOMMANDS) - set(seen)
