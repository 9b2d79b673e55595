"""What a new user trips over: each command as typed, piped, as a script would run it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def gpuplay(
    *args: str, cwd=None, stdin=subprocess.DEVNULL, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TEXTUAL_DRIVER", "COLUMNS")}
    return subprocess.run([sys.executable, "-m", "gpuplay", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, stdin=stdin, env=env)  # fmt: skip


# -- (2) no terminal: say so and name the headless commands, at once ---------------------------
@pytest.mark.parametrize("args", [[], ["demo", "numpy-to-gpu"]])
def test_without_a_terminal_the_front_ends_refuse_at_once(args):
    proc = gpuplay(*args, timeout=30)  # before the fix: one frame, then a spinning core for minutes
    assert proc.returncode == 2, proc.stderr
    assert "needs a terminal" in proc.stderr and "stdin and stdout are not one" in proc.stderr
    for headless in ("gpuplay run", "gpuplay compare", "gpuplay sweep", "gpuplay serve"):
        assert headless in proc.stderr
    assert proc.stdout == ""


def test_a_terminal_on_stdin_only_names_stdout():
    import pty

    leader, follower = pty.openpty()
    try:
        proc = gpuplay(stdin=follower, timeout=30)
    finally:
        os.close(follower)
        os.close(leader)
    assert proc.returncode == 2
    assert "and stdout is not one" in proc.stderr


# -- (3) only a .py path is code; a .toml path is data; anything else is refused -----------------
PYTHON_TEXT = "import pathlib\npathlib.Path({marker!r}).write_text('ran')\ndef inputs(rng, n=8):\n    return rng.random(n)\ndef step(xp, x):\n    return x\n"


@pytest.mark.parametrize("name", ["scen.toml", "scen.txt", "scen"])
def test_a_file_that_is_not_py_is_never_run_as_code(tmp_path, name):
    marker = tmp_path / "marker"
    (tmp_path / name).write_text(PYTHON_TEXT.format(marker=str(marker)))
    proc = gpuplay("run", f"./{name}", "-p", "quick", "--repeat", "2", cwd=tmp_path)
    assert not marker.exists(), "a file that is not .py was executed as Python"
    assert proc.returncode == 2, proc.stderr
    if name.endswith(".toml"):
        assert "scen.toml: not valid TOML" in proc.stderr  # read as a scenario file: data
    else:
        assert "a FILE.py is your code, a FILE.toml is a scenario (data)" in proc.stderr


def test_a_toml_path_runs_as_a_scenario_file(tmp_path):
    scen = tmp_path / "mine.toml"
    scen.write_text('name = "mine"\nworkload = "matmul"\n[params]\nn = 16\n')
    proc = gpuplay("run", str(scen), "--repeat", "2", "--warmup", "0", "--format", "json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    import json

    result = json.loads(proc.stdout)["results"][0]
    assert result["spec"]["scenario"] == "mine" and result["check_ok"]


def test_a_py_path_is_still_code(tmp_path):
    marker = tmp_path / "marker"
    (tmp_path / "mine.py").write_text(PYTHON_TEXT.format(marker=str(marker)))
    proc = gpuplay("run", "mine.py", "--repeat", "2", "--warmup", "0", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert marker.exists()


# -- (4) a failed correctness check exits 3, after everything is printed ------------------------
OFF_BY_ONE_PERCENT = """
def inputs(rng, n=64):
    return rng.random(n) + 1.0

def step(xp, x):
    # 1 % off everywhere but on NumPy, which is also where the float64 reference comes from
    return x * 1.01 if "numpy" not in xp.__name__ else x
"""


def test_run_of_a_code_file_whose_check_fails_exits_3_after_printing(tmp_path):
    (tmp_path / "off.py").write_text(OFF_BY_ONE_PERCENT)
    proc = gpuplay(
        "run", "off.py", "-b", "torch", "--repeat", "2", "--warmup", "0", "--format", "json", cwd=tmp_path
    )
    assert proc.returncode == 3, proc.stderr
    import json

    assert json.loads(proc.stdout)["results"][0]["check_ok"] is False  # printed in full first
    assert "check failed: off torch cpu" in proc.stderr and "> tolerance" in proc.stderr
    ok = gpuplay("run", "off.py", "-b", "numpy", "--repeat", "2", "--warmup", "0", cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr


@pytest.fixture
def matmul_never_agrees(monkeypatch):
    """A tolerance no float32 product meets: the engine (in-process here) then fails the check."""
    from gpuplay.core.workloads import get_workload

    monkeypatch.setattr(type(get_workload("matmul")), "tolerance", lambda self, dtype, p: 1e-300)


@pytest.mark.parametrize(
    "args",
    [
        ["compare", "-p", "quick", "--scenario", "matmul", "--backends", "numpy", "--budget", "0.02"],
        ["sweep", "matmul", "--over", "n=16..32", "--backends", "numpy", "--budget", "0.02"],
    ],
)
def test_compare_and_sweep_exit_3_on_a_failed_check(args, matmul_never_agrees):
    from click.testing import CliRunner

    from gpuplay.cli import main

    res = CliRunner().invoke(main, args)
    assert res.exit_code == 3, res.output
    assert "check failed: matmul numpy cpu" in res.stderr
    assert res.stdout.strip()  # the table came first


def test_help_documents_the_exit_codes():
    from click.testing import CliRunner

    from gpuplay.cli import main

    for args in ([], ["run"], ["compare"], ["sweep"]):
        text = " ".join(CliRunner().invoke(main, [*args, "--help"]).output.split())
        assert (
            "3 a result failed its correctness check" in text
            and "130/143" in text
            and "2 a usage error" in text
        )


# -- (5) every option a hint names is accepted by the command that prints it -------------------
MEASURING = ("run", "compare", "sweep")
FLAG = r"(?<![\w-])--[a-z][a-z0-9-]+"
# Texts of the core that only some measuring commands can print, and why; every other text of
# the core can reach the output of run, compare and sweep alike (notes, refusals, warnings).
ONLY = {
    ("levers.py", "--budget"): ("run",),  # the help of run's own --repeat/--budget options
    ("levers.py", "--repeat"): ("run",),
    ("alloc.py", "--alloc"): ("run",),  # allocation notes: only run sets --alloc
    ("planner.py", "--graphs"): ("run",),  # graphs with transfers: only run takes both
    ("inference.py", "--graphs"): (
        "run",
    ),  # a runtime torch cannot capture: compare/sweep say --variants graphs
    ("planner.py", "--transfers"): ("run", "sweep"),  # compare never times transfers
    ("fused.py", "--compile"): ("run",),  # compare and sweep say --variants compile
    ("devices_compare.py", "--devices"): ("compare", "sweep"),  # many devices: those two only
    # never printed: the early engine's reading of a command line (engine/process.py probe_hint)
    ("process.py", "--backend"): ("run",),
    ("process.py", "--backends"): ("compare", "sweep"),
    ("process.py", "--help"): (),  # click's own: a command asked for help starts no engine
    ("process.py", "--from"): ("compare",),  # compare --from merges files: it starts no engine
}


def _command_options():
    from gpuplay.cli import main

    def names(cmd):
        return {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)}

    return {"": names(main), **{name: names(cmd) for name, cmd in main.commands.items()}}


def _texts(folder: str):
    import ast
    from pathlib import Path

    import gpuplay

    root = Path(gpuplay.__file__).parent / folder
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text())
        docstrings = {
            id(n.body[0].value)
            for n in ast.walk(tree)
            if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and n.body
            and isinstance(n.body[0], ast.Expr)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                yield path.name, node.value


def test_every_option_a_hint_names_is_accepted_by_the_commands_that_print_it():
    import re

    options = _command_options()
    wrong = []
    for folder in ("core", "cli"):
        for name, text in _texts(folder):
            for m in re.finditer(FLAG, text):
                flag = m.group(0)
                before = text[: m.start()]
                named = re.findall(r"(?:gpuplay |`)(?!gpuplay\b)(\w+)\b[^`;()]*$", before)
                if before.endswith("gpuplay "):  # "gpuplay --code FILE.py": the group's own
                    targets: tuple[str, ...] = ("",)
                elif named and named[-1] in options:  # "gpuplay sweep --format json"
                    targets = (named[-1],)
                elif folder == "core":
                    targets = ONLY.get((name, flag), MEASURING)
                else:
                    continue  # a command's own help and messages: its options, checked by click
                wrong += [f"{name}: {flag} in {text!r} ({t})" for t in targets if flag not in options[t]]
    assert not wrong, "\n".join(wrong)


def test_the_unstable_advice_names_options_every_measuring_command_takes():
    import re

    from gpuplay.core.measure.noise import unstable_advice

    options = _command_options()
    flags = re.findall(FLAG, unstable_advice(1e-4))
    assert flags  # it does name some
    for command in MEASURING:
        assert set(flags) <= options[command], (command, flags)


# -- (6) small CLI edges -----------------------------------------------------------------------
def test_compare_takes_a_scenario_name_as_run_and_sweep_do():
    import json

    from click.testing import CliRunner

    from gpuplay.cli import main

    args = ["-p", "quick", "--backends", "numpy", "--budget", "0.02", "--format", "json"]
    res = CliRunner().invoke(main, ["compare", "reductions", *args])
    assert res.exit_code == 0, res.output
    assert {r["spec"]["scenario"] for r in json.loads(res.stdout)["results"]} == {"reductions"}
    bad = CliRunner().invoke(main, ["compare", "matmuk", *args])
    assert bad.exit_code == 2
    said = " ".join(bad.stderr.split())
    assert "'matmuk' is not a scenario" in said and "--scenario NAME" in said and "--from A.json" in said


@pytest.mark.parametrize(
    "args", [["list"], ["run", "reductions", "-p", "quick", "--repeat", "2", "--warmup", "0"]]
)
def test_piped_tables_have_no_trailing_spaces(args):
    proc = gpuplay(*args)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) > 3
    assert [line for line in lines if line != line.rstrip()] == []


def test_threads_reads_the_same_in_every_command():
    from click.testing import CliRunner

    from gpuplay.cli import main

    helps = set()
    for command in ("run", "compare", "sweep"):
        cmd = main.commands[command]
        (option,) = [p for p in cmd.params if "--threads" in p.opts]
        helps.add((option.help, option.type.get_metavar(option, None)))
    assert len(helps) == 1, helps
    res = CliRunner().invoke(main, ["sweep", "matmul", "--over", "n=16..32", "--threads", "100000"])
    assert res.exit_code == 2 and "logical cores" in res.output


# -- (1) install lines that can work: never a bare name the package index does not have --------
def test_no_text_tells_a_user_to_install_gpuplay_from_the_index():
    import re
    from pathlib import Path

    import gpuplay

    checkout = Path(gpuplay.__file__).resolve().parents[2]
    bad = [
        f"{name}: {text!r}"
        for name, text in _texts(".")  # the whole package
        if "gpuplay[" in text
    ]
    readme = (checkout / "README.md").read_text()
    bare = r"(?:pip|pipx|uv tool|uv pip) install (?:--\S+ )*['\"]?gpuplay\b"
    docs = [readme, *(p.read_text() for p in (checkout / "docs").glob("*.md"))]
    bad += [
        line for text in docs for line in text.splitlines() if re.search(bare, line) or "gpuplay[" in line
    ]
    assert not bad, "\n".join(bad)
    assert "uv tool install ./dist/gpuplay-" in readme and "pipx install ./dist/gpuplay-" in readme
    assert "scripts/check-wheel" in (checkout / ".ci" / "run").read_text()


# -- (10) a step-limit refusal never reads "estimated at 2.0 s (limit 2.0 s)" ---------------------
@pytest.mark.parametrize(
    ("estimate", "said"),
    [(2.04, "estimated at 2.04 s (limit 2.00 s)"), (2.0004, "estimated at 2.0004 s (limit 2.0000 s)"),
     (2.00000001, "estimated above its limit of 2.0 s"), (3.5, "estimated at 3.5 s (limit 2.0 s)")],
)  # fmt: skip
def test_a_step_limit_refusal_shows_figures_that_differ(monkeypatch, estimate, said):
    from click.testing import CliRunner

    from gpuplay.cli import main
    from gpuplay.core.runner import measure

    monkeypatch.setattr(measure, "estimate_step_seconds", lambda *a, **kw: estimate)
    res = CliRunner().invoke(main, ["run", "reductions", "-p", "quick", "--max-step", "2"])
    assert res.exit_code == 1, res.output
    assert said in " ".join(res.stderr.split())


# -- (12) a step over its limit is said on stderr, with when it will be stopped -------------------
@pytest.mark.real_engine
def test_a_step_that_never_returns_is_said_to_be_over_its_limit_while_it_waits(tmp_path):
    import re
    import time

    (tmp_path / "hang.py").write_text(
        "import time\ndef inputs(rng, n=8):\n    return rng.random(n)\ndef step(xp, x):\n    time.sleep(3600)\n"
    )
    args = [sys.executable, "-m", "gpuplay", "run", "hang.py", "--max-step", "0.5", "--warmup", "0"]
    env = {k: v for k, v in os.environ.items() if k not in ("GPUPLAY_IN_PROCESS", "COLUMNS")}
    proc = subprocess.Popen(args, cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        first = proc.stderr.readline()  # before the fix: nothing until the engine was ended
        while first and "past its limit" not in first:
            first = proc.stderr.readline()
        told = time.monotonic()
        out, rest = proc.communicate(timeout=120)
        stopped = time.monotonic()
    finally:
        proc.kill()
    assert "past its limit of 0.5 s (--max-step)" in first, first + rest
    when = re.search(r"stopped in ([\d.]+) s, at (\d\d:\d\d:\d\d)", first)
    assert when, first
    assert stopped - told < float(when.group(1)) + 30  # it said when, and that came to pass
    assert proc.returncode == 1 and "was stopped by ending the engine" in rest


# -- (4) exit 1 when a measurement failed or was refused, in compare and sweep as in run ---------
@pytest.mark.parametrize(
    "args",
    [
        # every configuration refused at the step limit: nothing measured, the reasons printed
        ["compare", "matmul", "-p", "quick", "--backends", "numpy", "--max-step", "0.001", "--budget", "0.02"],
        # the same per device (--devices): a device's refused rows exit 1 too, with their reasons
        ["compare", "matmul", "-p", "quick", "--backends", "numpy", "--devices", "cpu", "--max-step", "0.001",
         "--budget", "0.02"],
        # the first size already over the limit: the series measured nothing
        ["sweep", "matmul", "--over", "n=512..1024", "--backends", "numpy", "--max-step", "0.001",
         "--budget", "0.02"],
    ],
)  # fmt: skip
def test_compare_and_sweep_exit_1_when_nothing_could_be_measured(args):
    from click.testing import CliRunner

    from gpuplay.cli import main

    res = CliRunner().invoke(main, args)
    assert res.exit_code == 1, res.output
    assert "one step is estimated" in res.stderr


def test_sweep_exits_1_when_a_point_raised(monkeypatch):
    """A size whose step raises (not a refusal or out-of-memory, which end a series by design)."""
    from click.testing import CliRunner

    from gpuplay.cli import main
    from gpuplay.core.workloads import get_workload

    cls = type(get_workload("matmul"))
    real = cls.kernel_function

    def kernel_function(self, backend, p):
        if p["n"] <= 16:
            return real(self, backend, p)

        def boom(*args):
            raise RuntimeError("boom at this size")

        return boom

    monkeypatch.setattr(cls, "kernel_function", kernel_function)
    res = CliRunner().invoke(
        main, ["sweep", "matmul", "--over", "n=8..32", "--backends", "numpy", "--budget", "0.02"]
    )
    assert res.exit_code == 1, res.output
    assert "boom at this size" in res.output


# -- (3) a bare word is a scenario's name, even beside a file of that name ---------------------
def test_a_scenario_name_runs_beside_a_file_of_that_name(tmp_path):
    (tmp_path / "matmul").write_bytes(b"\x7fELF a binary the user built")
    proc = gpuplay(
        "run", "matmul", "-s", "n=16", "--repeat", "2", "--warmup", "0", "--format", "json", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert '"scenario": "matmul"' in proc.stdout
    (tmp_path / "mine").write_text(PYTHON_TEXT.format(marker=str(tmp_path / "marker")))
    proc = gpuplay("run", "mine", cwd=tmp_path)  # no such scenario: the file is named, not run
    assert proc.returncode == 2 and not (tmp_path / "marker").exists(), proc.stderr
    assert "mine: not something gpuplay runs: a FILE.py is your code" in proc.stderr


def test_a_usage_error_shows_the_control_characters_of_a_path(tmp_path):
    proc = gpuplay("run", "gone\x1b[31m.py", cwd=tmp_path)
    assert proc.returncode == 2
    assert "\x1b" not in proc.stderr and "gone␛[31m.py: no such file" in proc.stderr, proc.stderr
