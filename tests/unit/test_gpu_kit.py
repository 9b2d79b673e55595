"""The GPU verification kit (scripts/gpu-verify, scripts/gpu-wheelhouse), checked without a GPU."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from gpukit import outdir, proc, stages  # noqa: E402
from gpukit import wheelhouse as wh  # noqa: E402

VERIFY = ROOT / "scripts" / "gpu-verify"
WHEELHOUSE = ROOT / "scripts" / "gpu-wheelhouse"


@pytest.fixture(autouse=True)
def the_gpu_box_after_each_test(monkeypatch):
    """`gpu-verify rehearse` sets the module's BOX to the rehearsal's for the rest of the process:
    a test calling its main() left it set, and a later test in the same worker ran the rehearsal's
    chunks instead of its own (CHUNKS is read only where BOX has none)."""
    monkeypatch.setattr(stages, "BOX", stages.BOX)


def _run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    return subprocess.run(
        [sys.executable, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        stdin=subprocess.DEVNULL,
    )


def _cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


# -- the commands ---------------------------------------------------------------------------
def test_help_names_every_stage_and_exit_status():
    r = _run(VERIFY, "--help")
    assert r.returncode == 0, r.stderr
    for stage in ("env", "tests", "bench", "app", "talk", "all", "--dry-run", "Exit status"):
        assert stage in r.stdout
    assert os.access(VERIFY, os.X_OK) and os.access(WHEELHOUSE, os.X_OK)
    w = _run(WHEELHOUSE, "--help")
    assert w.returncode == 0 and "--check" in w.stdout


def test_usage_errors_exit_2():
    assert _run(VERIFY).returncode == 2  # no stage, no folder
    assert _run(VERIFY, "bench").returncode == 2  # no folder
    assert _run(VERIFY, "nonsense", "/tmp/x").returncode == 2


def _fake_wheelhouse(folder: Path, drop: str = "", versions: dict[str, str] | None = None) -> Path:
    """Empty files named like the wheels the project needs, at the versions installed here."""
    folder.mkdir(parents=True, exist_ok=True)
    for req in wh.project_requirements(ROOT / "pyproject.toml"):
        if not wh.needed(req) or req.name == drop:
            continue
        version = (versions or {}).get(req.name) or wh.local_version(req.name) or "1.0"
        (folder / f"{req.name.replace('-', '_')}-{version}-py3-none-any.whl").write_bytes(b"")
    return folder


def test_dry_run_lists_the_stages_and_checks_the_wheelhouse(tmp_path):
    ok = _run(VERIFY, "--dry-run", "--wheelhouse", _fake_wheelhouse(tmp_path / "whl"))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    for stage in ("env:", "tests:", "bench:", "app:", "talk:"):
        assert stage in ok.stdout
    assert f"of at most {outdir.MAX_FILES} files" in ok.stdout and "ready" in ok.stdout
    bad = _run(VERIFY, "--dry-run", "--wheelhouse", _fake_wheelhouse(tmp_path / "part", drop="textual"))
    assert bad.returncode == 1
    assert "missing: textual==8.2.8" in bad.stdout and "NOT READY" in bad.stdout


# -- the wheelhouse ---------------------------------------------------------------------------
def test_the_closure_starts_from_what_the_box_lacks():
    roots = {r.name: r for r in wh.project_requirements(ROOT / "pyproject.toml")}
    need = {name for name, r in roots.items() if wh.needed(r)}
    assert {
        "textual",
        "textual-plotext",
        "plotext",
        "platformdirs",
        "pytest-asyncio",
        "pytest-textual-snapshot",
        "textual-serve",
        "array-api-compat",
        "watchfiles",
    } <= need
    assert not need & {"torch", "numpy", "scipy", "nvidia-ml-py", "psutil", "click", "hypothesis"}
    assert "playwright" in roots and "playwright" not in need  # left out, and said so
    assert "ruff" not in need


def test_check_finds_missing_wrong_and_duplicate_wheels(tmp_path):
    roots = wh.project_requirements(ROOT / "pyproject.toml")
    assert wh.check(_fake_wheelhouse(tmp_path / "ok"), roots).ok
    missing = wh.check(_fake_wheelhouse(tmp_path / "m", drop="watchfiles"), roots)
    assert not missing.ok and any(m.startswith("watchfiles") for m in missing.missing)
    wrong = wh.check(_fake_wheelhouse(tmp_path / "w", versions={"textual": "8.0.0"}), roots)
    assert not wrong.ok and any("textual-8.0.0" in m for m in wrong.mismatched)
    dup = _fake_wheelhouse(tmp_path / "d")
    (dup / "plotext-5.2.8-py3-none-any.whl").write_bytes(b"")
    assert [d.split()[0] for d in wh.check(dup, roots).duplicates] == ["plotext"]


def _real_wheel(folder: Path, name: str, version: str, requires: list[str]) -> None:
    dist = f"{name.replace('-', '_')}-{version}"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires
    )
    with zipfile.ZipFile(folder / f"{dist}-py3-none-any.whl", "w") as zf:
        zf.writestr(f"{dist}.dist-info/METADATA", meta)


def test_check_follows_metadata_with_extras_and_markers(tmp_path):
    folder = tmp_path / "whl"
    folder.mkdir()
    root = [wh.Requirement("textual==8.2.8")]
    _real_wheel(
        folder,
        "textual",
        "8.2.8",
        ["markdown-it-py[linkify]>=2.1", "numpy>=1", 'colorama; sys_platform == "win32"'],
    )
    _real_wheel(
        folder,
        "markdown-it-py",
        "4.0.0",
        ["mdurl~=0.1", 'linkify-it-py<3,>=1; extra == "linkify"', 'sphinx; extra == "rtd"'],
    )
    _real_wheel(folder, "mdurl", "0.1.2", [])
    result = wh.check(folder, root)
    # linkify-it-py is needed through textual's [linkify]; numpy is on the box; colorama, sphinx never
    assert [m.split(";")[0] for m in result.missing] == ["linkify-it-py<3,>=1"]
    _real_wheel(folder, "linkify-it-py", "2.0.0", [])
    assert wh.check(folder, root).ok


def test_the_install_keeps_version_ranges():
    cmds = wh.install_commands(".whl", wh.project_requirements(ROOT / "pyproject.toml"))
    assert "--no-index" in cmds["resolved"] and "textual==8.2.8" in cmds["resolved"]
    assert any(a.startswith("pytest<9") or a.startswith("pytest>=8") and "<9" in a for a in cmds["resolved"])
    assert "--no-deps" in cmds["target"]


# -- the output folder ------------------------------------------------------------------------
def test_the_plan_fits_the_device_tools_file_cap():
    assert len(outdir.PLAN) <= outdir.MAX_FILES == 8
    assert set().union(*stages.FILES.values()) <= set(outdir.PLAN)
    assert set(stages.FILES) == set(stages.STAGES)


def test_the_8_file_cap_is_enforced(tmp_path):
    out = outdir.OutDir(tmp_path)
    for i in range(outdir.MAX_FILES - 1):
        (tmp_path / f"junk{i}.txt").write_text("x")
    out.write_json("env.json", {"a": float("nan")})  # the 8th file: allowed
    assert json.loads((tmp_path / "env.json").read_text()) == {"a": "nan"}
    out.write_json("env.json", {"a": 1})  # rewriting one already there: allowed
    with pytest.raises(outdir.OutDirError, match="at most 8"):
        out.write("bench.json", "{}")
    with pytest.raises(outdir.OutDirError, match="not in the output plan"):
        outdir.OutDir(tmp_path / "other").write("screens.tar", "")


def test_a_full_output_folder_is_a_usage_error(tmp_path):
    for i in range(outdir.MAX_FILES):
        (tmp_path / f"junk{i}.txt").write_text("x")
    r = _run(VERIFY, "env", tmp_path)
    assert r.returncode == 2 and "at most 8" in r.stderr


def test_report_sections_replace_their_own_and_escape_hostile_text(tmp_path):
    out = outdir.OutDir(tmp_path)
    out.report_section("env", "first")
    out.report_section("bench", "bench text")
    out.report_section("env", "second")
    text = (tmp_path / "REPORT.md").read_text()
    assert "second" in text and "first" not in text and "bench text" in text
    assert stages._cell("a|b\x1b[31m\nc") == "a\\|b [31m c"


# -- time boxes and child processes -----------------------------------------------------------
def test_a_child_past_its_time_is_ended():
    r = proc.run(
        [sys.executable, "-c", "import time; print('started', flush=True); time.sleep(60)"], 1.0, grace=2
    )
    assert r["timed_out"] and r["seconds"] < 10 and "started" in r["stdout"]
    assert proc.run(["/nonexistent/tool"], 5)["rc"] is None


def test_a_step_past_the_stage_deadline_is_reported_not_run(tmp_path):
    st = stages.Stage("env", outdir.OutDir(tmp_path), seconds=1.0)
    assert st.step("late", lambda: 1, need=30) is None
    assert st.checks[-1]["ok"] is False and "not run" in st.checks[-1]["detail"]
    assert st.status == stages.EXIT_FAILED
    assert json.loads((tmp_path / "env.json").read_text())["checks"][0]["check"] == "late"


def test_junit_chunks_merge_with_totals(tmp_path):
    a, b, broken = tmp_path / "a.xml", tmp_path / "b.xml", tmp_path / "c.xml"
    a.write_text(
        '<testsuites><testsuite name="pytest" tests="3" failures="1" errors="0" skipped="1">'
        '<testcase classname="t" name="x"><failure message="boom"/></testcase></testsuite></testsuites>'
    )
    b.write_text('<testsuite name="pytest" tests="2" failures="0" errors="1" skipped="0"/>')
    broken.write_text("<testsuite")  # a chunk killed mid-write
    root = stages.merge_junit([a, b, broken])
    assert [root.get(k) for k in ("tests", "failures", "errors", "skipped")] == ["5", "1", "1", "1"]
    assert stages._junit_failures(root) == [{"test": "t::x", "kind": "failure", "message": "boom"}]


def test_the_tests_stage_runs_chunks_and_brings_back_their_counts(tmp_path, monkeypatch):
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "test_a.py").write_text("def test_ok():\n    pass\n\ndef test_bad():\n    assert 1 == 2\n")
    monkeypatch.setattr(stages, "CHUNKS", (("gpu", [str(suite)], 60),))
    monkeypatch.setattr(stages, "ensure_installed", lambda st, w: True)
    out = tmp_path / "out"
    status = stages.stage_tests(outdir.OutDir(out), tmp_path / "no-wheels", seconds=120)
    assert status == stages.EXIT_FAILED
    doc = json.loads((out / "tests.json").read_text())
    assert doc["chunks"][0]["tests"] == 2 and doc["chunks"][0]["failures"] == 1
    assert doc["failures"][0]["test"].endswith("test_bad")
    assert doc["totals"] == {"tests": 2, "failures": 1, "errors": 0, "skipped": 0}
    assert doc["not_run"] == [] and sorted(p.name for p in out.iterdir()) == ["REPORT.md", "tests.json"]


def test_a_callers_pytest_options_do_not_reach_the_kits_chunks(tmp_path, monkeypatch):
    """A CI that runs the kit's tests under `PYTEST_ADDOPTS=--cov` handed that to each chunk, whose
    pytest-cov then erased the caller's coverage data in the checkout; an option the chunk's pytest
    does not know shows it: usage error, exit 4."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "test_a.py").write_text("def test_ok():\n    pass\n")
    monkeypatch.setattr(stages, "CHUNKS", (("gpu", [str(suite)], 60),))
    monkeypatch.setattr(stages, "ensure_installed", lambda st, w: True)
    monkeypatch.setenv("PYTEST_ADDOPTS", "--an-option-of-the-callers-own")
    monkeypatch.setenv("COV_CORE_DATAFILE", str(tmp_path / ".coverage"))
    out = tmp_path / "out"
    status = stages.stage_tests(outdir.OutDir(out), tmp_path / "no-wheels", seconds=120)
    assert status != stages.EXIT_FAILED  # passed, or "no CUDA here" (exit 3) on this machine
    doc = json.loads((out / "tests.json").read_text())
    assert doc["chunks"][0]["rc"] == 0 and doc["totals"]["tests"] == 1, doc["chunks"]


# -- a stage for real, here ---------------------------------------------------------------------
@pytest.mark.skipif(_cuda(), reason="checks the no-CUDA report")
def test_env_stage_without_cuda_writes_its_report_and_exits_3(tmp_path):
    r = _run(VERIFY, "env", tmp_path / "out", "--seconds", "120")
    assert r.returncode == stages.EXIT_NO_CUDA, r.stdout + r.stderr
    doc = json.loads((tmp_path / "out" / "env.json").read_text())
    assert doc["cuda"] is False and doc["exit_status"] == 3
    checks = {c["check"]: c["ok"] for c in doc["checks"]}
    assert checks["dependencies importable"] is True and checks["gpuplay info"] is True
    assert checks["CUDA visible to torch"] is None
    assert "no CUDA GPU here" in (tmp_path / "out" / "REPORT.md").read_text()
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["REPORT.md", "env.json"]


def test_the_goals_are_judged_per_row(tmp_path):
    st = stages.Stage("bench", outdir.OutDir(tmp_path))
    bw = {"fraction": 0.9, "bound": "memory"}
    stages.judge_parity(
        st,
        [
            {
                "scenario": "elementwise",
                "backend": "torch",
                "dtype": "float32",
                "gpuplay_ms": 1.0,
                "do_bench_ratio": 1.01,
                "warm_ratio": 1.0,
                "roof": bw,
                "goal_class": "bandwidth",
            },
            {
                "scenario": "fft1d",
                "backend": "cupy",
                "dtype": "float32",
                "gpuplay_ms": 1.0,
                "do_bench_ratio": 1.2,
                "warm_ratio": 1.1,
                "roof": {"fraction": 0.4, "bound": "memory"},
                "goal_class": "fft",
            },
            {
                "scenario": "matmul",
                "backend": "torch",
                "dtype": "bfloat16",
                "gpuplay_ms": 1.0,
                "do_bench_ratio": 0.99,
                "warm_ratio": 0.99,
                "roof": {"fraction": 0.86, "bound": "compute"},
                "goal_class": "compute",
            },
            {
                "scenario": "heat",
                "backend": "torch",
                "dtype": "float32",
                "status": "refused",
                "message": "no",
            },
        ],
    )
    got = {c["check"]: c["ok"] for c in st.checks}
    assert got["median ÷ reference 0.97–1.03: elementwise torch float32"] is True
    assert got["elementwise torch float32 ≥ 85% of the copy bandwidth"] is True
    assert got["median ÷ reference 0.97–1.03: fft1d cupy float32"] is False
    assert got["fft1d cupy float32 ≥ 50% of the roof"] is False
    assert got["matmul torch bfloat16 ≥ 85% of the bf16 matmul rate"] is True
    assert got["median ÷ reference: heat torch float32"] is False
    assert st.status == stages.EXIT_FAILED


def test_nvml_values_must_be_real_and_screens_are_one_page(tmp_path):
    assert stages.nvml_read([{"util_gpu": 3.0, "mem_used": 1, "power_w": 70.1, "temp_c": None}])
    assert not stages.nvml_read([{"util_gpu": None, "mem_used": None, "power_w": None}])
    assert not stages.nvml_read([])
    svg = tmp_path / "1-live.svg"
    svg.write_text('<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg"><text>hi</text></svg>')
    page = stages.screens_page([svg, svg])
    assert page.count("<svg") == 2 and "<?xml" not in page and "1-live" in page


# -- every stage's control flow on a pretend GPU box (canned child outputs) ------------------------
def _ok(stdout: str = "", rc: int = 0) -> dict:
    return {"rc": rc, "timed_out": False, "seconds": 0.1, "stdout": stdout, "stderr": "", "timeout_s": 1}


CUDA_INFO = {
    "cuda_available": True,
    "torch": "2.11.0+cu130",
    "driver": "580.159.04",
    "torch_devices": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-abc"}],
    "nvml_devices": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-abc"}],
    "mapping": {"status": "ok", "rows": [{"cuda": 0, "gpuplay_nvml": 0, "nvml_by_uuid": 0}]},
}


def _fake_python(argv, timeout, **kw):
    if argv[0] == "-c":
        return _ok("{}")  # every module importable; torch.cuda available
    if argv[0] == "-m" and argv[1] == "gpuplay":
        cmd = argv[2]
        if cmd == "monitor":
            gpu = {"index": 0, "power_w": 70.0, "activity": {"sm_active": 3.0, "tensor_active": 0.0}}
            line = json.dumps({"gpus": [gpu], "host": {}})
            return _ok("\n".join([line] * 20))
        if cmd == "demo":
            Path(argv[argv.index("--out") + 1]).write_text('{"steps": []}')
        return _ok('{"rows": []}')
    if argv[0] == "-m" and argv[1] == "pytest":
        return _ok("1 passed")
    if argv[0].endswith("app_drive.py"):
        Path(argv[1], "3-telemetry.svg").write_text("<svg></svg>")
        drive = {
            "first_frame_s": 0.4,
            "results": 3,
            "cuda_results": 2,
            "nvml_gpus": 1,
            "backend_after_key": "torch",
        }
        return _ok(json.dumps({**drive, "nvml_sample": [{"util_gpu": 0.0, "power_w": 70.0, "temp_c": 31.0}]}))
    probe = argv[1]
    canned = {
        "cuda": CUDA_INFO,
        "rawkernel": {"ok": True},
        "compile": {"ok": True, "cold_compile_s": 9.0},
        "overhead": {"overhead_us": 3.2, "gpuplay_empty_step_us": 9.0, "do_bench_noop_us": 5.8},
        "gpm": {
            "matmul_bf16": {"tensor_active": 71.0},
            "add_fp32": {"dram_active": 80.0, "tensor_active": 0.0},
        },
        "parity": {
            "rows": [
                {
                    "scenario": "elementwise",
                    "backend": "torch",
                    "dtype": "float32",
                    "gpuplay_ms": 1.0,
                    "do_bench_ratio": 1.0,
                    "warm_ratio": 1.0,
                    "roof": {"fraction": 0.9, "bound": "memory"},
                    "goal_class": "bandwidth",
                }
            ]
        },
    }[probe]
    return _ok(json.dumps(canned))


def _fake_run(argv, timeout, **kw):
    if "--metrics" in argv:
        return _ok("  sm__cycles_elapsed.avg   cycle   4,321")
    return _ok("index, name, uuid\n0, NVIDIA H100 80GB HBM3, GPU-abc")


def _fake_gpuplay(args, timeout, **kw):
    return _fake_python(["-m", "gpuplay", *args], timeout, **kw)


@pytest.fixture
def pretend_gpu_box(monkeypatch):
    monkeypatch.setattr(proc, "python", _fake_python)
    monkeypatch.setattr(proc, "gpuplay", _fake_gpuplay)
    monkeypatch.setattr(proc, "run", _fake_run)
    monkeypatch.setattr(stages.shutil, "which", lambda name: f"/usr/bin/{name}")


def test_env_bench_talk_stages_pass_on_a_pretend_gpu_box(tmp_path, pretend_gpu_box):
    out = outdir.OutDir(tmp_path)
    assert stages.stage_env(out, tmp_path) == stages.EXIT_OK, (tmp_path / "REPORT.md").read_text()
    assert stages.stage_bench(out, tmp_path) == stages.EXIT_OK, (tmp_path / "REPORT.md").read_text()
    assert stages.stage_talk(out, tmp_path) == stages.EXIT_OK, (tmp_path / "REPORT.md").read_text()
    assert stages.stage_app(out, tmp_path) == stages.EXIT_OK, (tmp_path / "REPORT.md").read_text()
    app = json.loads((tmp_path / "app.json").read_text())
    assert any("3-telemetry" in name for name in app["screens"]) and app["not_run"] == []
    shots = tmp_path / "shots"
    assert _verify_module().main(["screens", str(tmp_path / "app.json"), str(shots)]) == 0
    assert "3-telemetry" in (shots / "screens.html").read_text() and list(shots.glob("*.svg"))
    env = json.loads((tmp_path / "env.json").read_text())
    checks = {c["check"]: c["ok"] for c in env["checks"]}
    assert checks["gpuplay's CUDA→NVML mapping matches the UUIDs"] is True
    assert checks["ncu reads counters"] is True
    bench = json.loads((tmp_path / "bench.json").read_text())
    assert any("3.20 µs" in c["detail"] for c in bench["checks"])
    report = (tmp_path / "REPORT.md").read_text()
    assert "## env: passed" in report and "## bench: passed" in report and "## talk: passed" in report
    assert len(list(tmp_path.iterdir())) <= outdir.MAX_FILES


def test_a_mapping_that_disagrees_with_the_uuids_fails_env(tmp_path, pretend_gpu_box, monkeypatch):
    bad = {
        **CUDA_INFO,
        "mapping": {"status": "MISMATCH", "rows": [{"cuda": 0, "gpuplay_nvml": 1, "nvml_by_uuid": 0}]},
    }
    real = _fake_python
    monkeypatch.setattr(
        proc,
        "python",
        lambda argv, t, **kw: _ok(json.dumps(bad)) if argv[1:2] == ["cuda"] else real(argv, t, **kw),
    )
    assert stages.stage_env(outdir.OutDir(tmp_path), tmp_path) == stages.EXIT_FAILED


def test_the_mapping_probe_checks_gpuplay_against_uuids(monkeypatch):
    import types

    from gpukit import probes

    fake = types.ModuleType("fake_telemetry")
    fake.cuda_nvml_mapping = lambda: [
        {"cuda": "cuda:0", "nvml_index": 1},
        {"cuda": "cuda:1", "nvml_index": 0},
    ]
    monkeypatch.setitem(sys.modules, "fake_telemetry", fake)
    monkeypatch.setattr(probes, "MAPPING_CANDIDATES", (("fake_telemetry", "cuda_nvml_mapping"),))
    info = {  # CUDA's order (fastest first) differs from NVML's (PCI): only the UUIDs tell
        "torch_devices": [{"index": 0, "uuid": "bbbb-1111"}, {"index": 1, "uuid": "aaaa-2222"}],
        "nvml_devices": [{"index": 0, "uuid": "GPU-aaaa2222"}, {"index": 1, "uuid": "GPU-BBBB-1111"}],
    }
    assert probes._mapping(info)["status"] == "ok"
    fake.cuda_nvml_mapping = lambda: [
        {"cuda": "cuda:0", "nvml_index": 0},
        {"cuda": "cuda:1", "nvml_index": 1},
    ]
    assert probes._mapping(info)["status"] == "MISMATCH"
    monkeypatch.setattr(probes, "MAPPING_CANDIDATES", (("no_such_module_here", "f"),))
    assert probes._mapping(info)["status"] == "no mapping function found"


@pytest.mark.slow
def test_a_chunk_past_its_time_still_brings_back_what_finished(tmp_path, monkeypatch):
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "test_s.py").write_text(
        "import time\n\ndef test_fast():\n    pass\n\ndef test_hangs():\n    time.sleep(120)\n"
    )
    monkeypatch.setattr(stages, "CHUNKS", (("gpu", [str(suite)], 6),))
    monkeypatch.setattr(stages, "ensure_installed", lambda st, w: True)
    out = tmp_path / "out"
    assert stages.stage_tests(outdir.OutDir(out), tmp_path, seconds=100) == stages.EXIT_FAILED
    doc = json.loads((out / "tests.json").read_text())
    assert doc["chunks"][0]["timed_out"] and doc["chunks"][0]["seconds"] < 40
    assert doc["totals"]["tests"] >= 1  # pytest wrote its JUnit XML on SIGINT: test_fast is counted


def _verify_module():
    from importlib.machinery import SourceFileLoader
    from importlib.util import module_from_spec, spec_from_loader

    spec = spec_from_loader("gpu_verify", SourceFileLoader("gpu_verify", str(VERIFY)))
    module = module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_all_shares_one_box_and_reports_the_worst(tmp_path, monkeypatch, capsys):
    verify = _verify_module()
    given: dict[str, float] = {}

    def fake(status):
        def stage(out, wheelhouse, seconds, **kw):
            given[len(given)] = seconds
            return status

        return stage

    for statuses, want in (([0, 3, 0, 0, 0], 3), ([0, 3, 1, 0, 0], 1), ([0] * 5, 0)):
        given.clear()
        table = {n: (fake(s), "") for n, s in zip(verify.ORDER, statuses)}
        monkeypatch.setattr(stages, "STAGES", table)
        assert verify.main(["all", str(tmp_path / "out"), "--seconds", "560"]) == want
        # each box is a share of what is left: instant stages leave the last one nearly all of it
        assert len(given) == 5 and max(given.values()) <= 560 and given[4] > 500
    with pytest.raises(SystemExit) as exc:  # a box longer than one device command is refused
        verify.main(["env", str(tmp_path / "o2"), "--seconds", "5000"])
    assert exc.value.code == 2


def test_all_runs_env_bench_tests_app_talk_each_on_its_share_of_what_is_left(tmp_path, monkeypatch):
    seen: list[tuple[str, float, dict]] = []

    def stage(name):
        def run(out, wheelhouse, seconds, **kw):
            seen.append((name, seconds, kw))
            return 0

        return run

    monkeypatch.setattr(stages, "STAGES", {n: (stage(n), "") for n in stages.ALL_ORDER})
    assert _verify_module().main(["all", str(tmp_path / "out"), "--seconds", "500"]) == 0
    assert [n for n, _, _ in seen] == ["env", "bench", "tests", "app", "talk"]
    box = {n: s for n, s, _ in seen}
    share = stages.ALL_SHARES
    assert box["env"] == pytest.approx(500 * share["env"], rel=0.01)
    # env returned at once: bench's share is of the ~500 s still left among the four stages left
    assert box["bench"] == pytest.approx(500 * share["bench"] / (1 - share["env"]), rel=0.01)
    assert dict((n, kw) for n, _, kw in seen)["tests"] == {"only": ["gpu"]}  # the GPU chunk only


def test_all_given_too_little_time_still_writes_every_stage_file_saying_what_did_not_run(
    tmp_path, monkeypatch, capsys
):
    out = tmp_path / "out"
    # 30 s in all: each stage's share of what is left (the last one's: all 30 s) is under what a
    # stage needs to start (35 s here)
    monkeypatch.setattr(stages, "MIN_STAGE_SECONDS", 35.0)
    assert _verify_module().main(["all", str(out), "--seconds", "30"]) == stages.EXIT_FAILED
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["REPORT.md", "env.json", "bench.json", "tests.json", "app.json", "talk.json"]
    )
    for name in stages.ALL_ORDER:
        doc = json.loads((out / f"{name}.json").read_text())
        assert doc["not_run"] == [f"the {name} stage"], doc
    assert (out / "REPORT.md").read_text().count("Not run (out of time)") == 5


def test_a_stage_cut_short_names_its_parts_that_did_not_run(tmp_path, pretend_gpu_box):
    out = outdir.OutDir(tmp_path)
    # 70 s with 20 s kept for writing: the pretend box answers at once, so 50 s stay left, under
    # what calibrate and compare need (60 s each); the parity probes and the overhead run
    assert stages.stage_bench(out, tmp_path, seconds=70) == stages.EXIT_FAILED
    doc = json.loads((tmp_path / "bench.json").read_text())
    assert doc["not_run"] == ["gpuplay calibrate", "gpuplay compare --preset published"]
    assert doc["parity"] and doc["overhead"]
    assert "Not run (out of time): " in (tmp_path / "REPORT.md").read_text()


def test_an_app_stage_out_of_time_lists_its_parts_and_invents_no_failed_drive(tmp_path, pretend_gpu_box):
    out = outdir.OutDir(tmp_path)
    # 12 s: under what the install (30 s) and the Pilot drive (drive_s + 20 s) need
    assert stages.stage_app(out, tmp_path, seconds=12) == stages.EXIT_FAILED
    doc = json.loads((tmp_path / "app.json").read_text())
    assert doc["not_run"] == ["install", "drive the app (Pilot, 120×36)", "gpuplay monitor 10 s"]
    assert [c["check"] for c in doc["checks"]] == doc["not_run"]  # each part once, as not run
    assert "exit None" not in (tmp_path / "REPORT.md").read_text()


def test_the_dry_run_of_all_prints_one_line_per_stage_in_run_order_with_its_share(capsys):
    _verify_module().main(["--dry-run", "all", "--seconds", "540"])
    lines = [x for x in capsys.readouterr().out.splitlines() if x.split(":")[0] in stages.ALL_ORDER]
    assert [x.split(":")[0] for x in lines] == ["env", "bench", "tests", "app", "talk"]
    assert all(" share " in x and "of 540 s" in x for x in lines)
    assert (
        f"share {stages.ALL_SHARES['bench']:.0%} (~{540 * stages.ALL_SHARES['bench']:.0f} s of 540 s)"
        in lines[1]
    )


# -- the probes, run here as the stages run them (a rename in gpuplay breaks these) ---------------
PROBES = ROOT / "scripts" / "gpukit" / "probes.py"


def _probe(*args: str, timeout: float = 240) -> dict:
    r = _run(PROBES, *args, timeout=timeout)
    lines = [ln for ln in r.stdout.strip().splitlines() if ln.startswith("{")]
    assert lines, r.stdout + r.stderr
    doc = json.loads(lines[-1])
    # The probe itself never breaks: no `error` key; what is absent here is said in words.
    assert "error" not in doc, doc
    assert "ModuleNotFoundError" not in r.stdout and "Traceback" not in r.stdout + r.stderr, r.stdout
    assert r.returncode == 0, r.stderr
    return doc


@pytest.mark.skipif(_cuda(), reason="checks what the CPU machine reports")
def test_the_cuda_probe_names_what_is_not_installed():
    doc = _probe("cuda")
    assert doc["cuda_available"] is False and "CUDA" in doc["not_installed"]
    assert doc["mapping"]["function"]  # gpuplay's CUDA→NVML mapping was found by its name


@pytest.mark.slow  # 6 s: a probe process that imports torch and runs gpuplay's runner
def test_the_parity_probe_times_gpuplays_own_step_on_the_cpu():
    doc = _probe("parity", "torch", "float32", "quick", "20", "cpu", "elementwise")
    (row,) = doc["rows"]
    assert row["status"] == "ok", row
    assert row["gpuplay_ms"] > 0 and row["do_bench_ms"] > 0 and row["do_bench_ratio"] > 0
    assert row["reference"] == "perf_counter (cpu)" and row["goal_class"] == "bandwidth"


def test_the_parity_probe_refuses_what_is_absent_without_a_code_error():
    doc = _probe("parity", "cupy", "float32", "quick", "10", "cpu", "elementwise")
    assert doc["rows"][0]["status"] == "refused"
    if not _cuda():
        cuda = _probe("parity", "torch", "float32", "quick", "10", "cuda:0", "elementwise")
        assert cuda["rows"][0]["status"] == "refused"


def test_the_overhead_probe_runs_an_empty_step_through_gpuplay(tmp_path):
    code = tmp_path / "empty_step.py"
    code.write_text(_empty_step())
    doc = _probe("overhead", str(code), "cpu")
    assert doc["status"] == "ok" and doc["device"] == "cpu", doc
    assert doc["gpuplay_empty_step_us"] > 0 and doc["do_bench_noop_us"] > 0


def _empty_step() -> str:
    from gpukit.probes import EMPTY_STEP

    return EMPTY_STEP


@pytest.mark.slow  # 4-5 s: five probe processes, each importing torch
@pytest.mark.skipif(_cuda(), reason="checks the refusals of the CPU machine")
def test_gpu_only_probes_refuse_in_words_here(tmp_path):
    for args in (("rawkernel",), ("rawkernel", "cpu"), ("compile",), ("compile", "cuda:0")):
        doc = _probe(*args)
        assert doc["refused"] and doc["not_installed"], (args, doc)
    code = tmp_path / "empty_step.py"
    code.write_text(_empty_step())
    assert _probe("overhead", str(code))["not_installed"] == ["CUDA"]


def test_a_probe_given_a_bad_command_line_says_how_to_call_it():
    r = _run(PROBES, "parity", "torch")
    doc = json.loads(r.stdout.strip().splitlines()[-1])
    assert r.returncode == 1 and doc["error"].startswith("usage: probes.py")


@pytest.mark.long(14)
@pytest.mark.slow
@pytest.mark.compile
def test_the_compile_probe_compiles_on_the_cpu():
    doc = _probe("compile", "cpu", timeout=400)
    assert doc["ok"] is True and doc["device"] == "cpu" and doc["cold_compile_s"] > 0


def test_the_app_drive_finds_its_keys_in_the_app():
    from gpukit import app_drive

    from gpuplay.tui.app import GpuPlayApp

    actions = {b.key: b.action for b in GpuPlayApp.BINDINGS if hasattr(b, "key")}
    for tab in ("live", "telemetry", "profile", "compare"):
        assert actions[app_drive.tab_key(tab)] == f"tab('{tab}')"
    for lever in ("backend", "device"):
        assert actions[app_drive.lever_key(lever)] == f"cycle('{lever}')"


@pytest.mark.long(14)
@pytest.mark.slow
def test_the_app_drive_drives_the_real_app_here(tmp_path):
    r = _run(ROOT / "scripts" / "gpukit" / "app_drive.py", tmp_path, "6", timeout=240)
    doc = json.loads(r.stdout.strip().splitlines()[-1])
    assert "error" not in doc and r.returncode == 0, doc
    assert doc["first_frame_s"] > 0 and doc["results"] >= 1 and doc["result_lines"]
    assert doc["backend_after_key"] == "torch"  # the drive's keys reach the app's levers
    assert sorted(p.name for p in tmp_path.glob("*.svg")) == [
        "1-live-numpy-cpu.svg",
        "2-live-torch.svg",
        "3-telemetry.svg",
        "4-profile.svg",
        "5-compare.svg",
    ]


# -- the rehearsal's audit: code errors apart from what is absent on purpose ----------------------
def _child(argv, rc=0, stdout="", stderr="", **kw):
    return {"argv": argv, "rc": rc, "stdout": stdout, "stderr": stderr, "timed_out": False, **kw}


PY = sys.executable


def test_the_audit_tells_code_errors_from_absences():
    from gpukit import rehearse

    trace = (
        'Traceback (most recent call last):\n  File "x.py", line 1, in <module>\n'
        "ImportError: cannot import name 'resolve' from 'gpuplay.core.runner'\n"
    )
    broken_probe = json.dumps({"error": "ImportError: cannot import name 'resolve'", "trace": trace})
    children = [
        _child([PY, "probes.py", "parity", "torch"], 1, broken_probe),  # the issue's break
        _child(
            [PY, "-c", "import xdist"],
            1,
            "",
            "Traceback (most recent call last):\nModuleNotFoundError: No module named 'xdist'\n",
        ),  # fmt: skip
        _child(["nvidia-smi"], None, error="FileNotFoundError: nvidia-smi"),
        _child(
            [PY, "probes.py", "rawkernel", "cpu"], 0, json.dumps({"refused": "x", "not_installed": ["CuPy"]})
        ),
        _child([PY, "-m", "pytest", "-q", "tests/gpu"], 1, "1 failed, 3 passed"),  # a test failure
        _child([PY, "-m", "gpuplay", "monitor", "--no-such-flag"], 2, "", "Error: No such option"),
        _child(
            [PY, "/gone/app_drive.py"], 2, "", "can't open file '/gone/app_drive.py': [Errno 2] No such file"
        ),
        _child(
            [PY, "-m", "gpuplay", "info"],
            0,
            "",
            "Traceback (most recent call last):\n"
            "  File \"a.py\"\nAttributeError: 'X' object has no attribute 'y'\n",
        ),  # fmt: skip
        _child(
            [PY, "-m", "pytest", "tests/gpu"], 2, "ERROR tests/gpu/test_gpu.py - ImportError: cannot import"
        ),
        _child([PY, "probes.py", "parity", "torch"], 0, '…", "roof_gflops": 10.6}]}'),  # its line cut short
    ]
    doc = {
        "stage": "env",
        "checks": [{"check": "cuda probe", "ok": False, "detail": "the kit failed: TypeError: x"}],
    }
    found = rehearse.audit(children, doc).as_dict()
    where = [e["where"] for e in found["code_errors"]]
    assert where == [
        "probes.py parity torch",
        "gpuplay monitor --no-such-flag",
        "app_drive.py",
        "gpuplay info",
        "pytest tests/gpu",
        "probes.py parity torch",
        "env: cuda probe",
    ], found["code_errors"]
    assert "printed no JSON line" in found["code_errors"][-2]["error"]
    assert "resolve" in found["code_errors"][0]["error"]
    assert {"pytest-xdist", "nvidia-smi (NVIDIA driver)", "CuPy"} <= set(found["not_installed"])
    assert not any("ModuleNotFoundError" in x for x in found["not_installed"])
    # torch asked for cuda on a CPU-only build is CUDA absent; gpuplay's mapping gone is a rename
    no_cuda = json.dumps({"error": "AssertionError: Torch not compiled with CUDA enabled", "trace": "…"})
    moved = {"stage": "env", "cuda_probe": {"mapping": {"status": "no mapping function found"}}}
    got = rehearse.audit([_child([PY, "probes.py", "gpm", "cuda:0"], 1, no_cuda)], moved)
    assert got.not_installed == {"CUDA"} and [e["where"] for e in got.code_errors] == [
        "probes.py cuda: the CUDA→NVML mapping"
    ]
    # a probe that drops its device argument goes for CUDA when asked for the CPU
    dropped = json.dumps({"refused": "no CUDA device here (torch 2.13.0+cpu)", "not_installed": ["CUDA"]})
    got = rehearse.audit([_child([PY, "probes.py", "overhead", "empty.py", "cpu"], 0, dropped)], {})
    assert [e["where"] for e in got.code_errors] == ["probes.py overhead empty.py cpu"]
    # a test that failed, or a chunk stopped at its time box, is not a code error
    calm = rehearse.audit(
        [children[4], _child([PY, "-m", "pytest", "tests"], 2, "", timed_out=True, seconds=9)],
        {"stage": "tests"},
    )
    assert calm.code_errors == [] and calm.timed_out


def test_the_rehearsal_fails_on_a_code_error_and_prints_it(tmp_path, monkeypatch, capsys):
    verify = _verify_module()
    monkeypatch.setattr(proc, "LOG", None)

    def stage(name, code):
        def fn(out, wheelhouse, seconds, **kw):
            st = stages.Stage(name, out, seconds)
            st.step("child", lambda: proc.python(["-c", code], 60))
            st.flush()
            return st.status

        return fn

    fine = "print('{}')"
    broken = "from gpuplay.core.runner import resolve"  # the rename the issue found
    for code, want in ((fine, 0), (broken, 1)):
        table = {n: (stage(n, code if n == "bench" else fine), "") for n in verify.ORDER}
        monkeypatch.setattr(stages, "STAGES", table)
        out = tmp_path / f"out{want}"
        assert verify.main(["rehearse", str(out), "--quick"]) == want
        printed = capsys.readouterr().out
        assert ("CODE ERROR" in printed) == bool(want), printed
        doc = json.loads((out / "bench.json").read_text())
        assert doc["rehearsal"] is True and doc["device"] == "cpu"
        assert len(doc["rehearsal_audit"]["code_errors"]) == want
        assert "## rehearsal on the CPU (quick)" in (out / "REPORT.md").read_text()
    assert "cannot import name 'resolve'" in printed


REAL_PYTHON, REAL_RUN = proc.python, proc.run


def test_a_long_probe_line_reaches_the_bench_stage_whole(tmp_path, pretend_gpu_box, monkeypatch):
    """Six rows with their roofs outgrow the 4000-character tail a child's output is cut to."""
    row = json.loads(_fake_python(["x", "parity"], 1)["stdout"])["rows"][0]
    line = tmp_path / "rows.json"
    line.write_text(json.dumps({"rows": [{**row, "roof": {**row["roof"], "pad": "x" * 900}}] * 6}))

    def python(argv, timeout, **kw):
        if argv[1:2] == ["parity"]:  # a real child printing the long line, cut as the stage asks
            return REAL_PYTHON(["-c", f"print(open({str(line)!r}).read())"], timeout, **kw)
        return _fake_python(argv, timeout, **kw)

    monkeypatch.setattr(proc, "python", python)
    monkeypatch.setattr(proc, "run", REAL_RUN)  # the bench stage starts every child through python
    assert stages.stage_bench(outdir.OutDir(tmp_path / "out"), tmp_path) == stages.EXIT_OK
    bench = json.loads((tmp_path / "out" / "bench.json").read_text())
    assert len(bench["parity"]) == 6 * len(stages.PARITY_RUNS)


# -- the install on the box: versions, not only imports --------------------------------------------
def test_a_box_at_other_versions_gets_the_carried_wheels(tmp_path):
    folder = tmp_path / "whl"
    folder.mkdir()
    for name, version in (
        ("textual", "8.2.8"),
        ("rich", "15.0.0"),
        ("pytest", "8.4.2"),
        ("plotext", "5.3.2"),
    ):
        (folder / f"{name}-{version}-py3-none-any.whl").write_bytes(b"")
    wheels = wh.wheels_in(folder)
    box = {"textual": "8.2.8", "rich": "14.1.0", "pytest": "9.0.1", "plotext": None}
    pins = wh.version_pins(wheels, box)
    assert pins == ["plotext==5.3.2", "pytest==8.4.2", "rich==15.0.0"]
    assert (
        wh.version_pins(wheels, {"textual": "8.2.8", "rich": "15.0", "pytest": "8.4.2", "plotext": "5.3.2"})
        == []
    )
    cmd = wh.install_commands(str(folder), wh.project_requirements(ROOT / "pyproject.toml"), pins)["resolved"]
    assert "rich==15.0.0" in cmd and "pytest==8.4.2" in cmd
    # the pin replaces the range (pytest<9 …) the project gives
    assert [a for a in cmd if re.match(r"pytest(?![\w-])", a)] == ["pytest==8.4.2"]


def test_the_stage_installs_when_only_a_version_differs(tmp_path, monkeypatch):
    folder = tmp_path / "whl"
    folder.mkdir()
    (folder / "rich-15.0.0-py3-none-any.whl").write_bytes(b"")
    calls: list[list[str]] = []
    state = {"rich": "14.1.0"}

    def fake_python(argv, timeout, **kw):
        calls.append(argv)
        if argv[0] == "-c":  # every module imports; rich is at the box's version until installed
            return _ok(json.dumps({"missing": {}, "versions": dict(state)}))
        state["rich"] = "15.0.0"
        return _ok()

    monkeypatch.setattr(proc, "python", fake_python)
    st = stages.Stage("env", outdir.OutDir(tmp_path / "out"))
    assert stages.ensure_installed(st, folder) is True
    installs = [a for a in calls if "install" in a]
    assert len(installs) == 1 and "rich==15.0.0" in installs[0]
    assert st.data["install"]["other_versions_before"] == ["rich==15.0.0"]
    # the rehearsal only says what it would install
    calls.clear()
    state["rich"] = "14.1.0"
    monkeypatch.setattr(stages, "BOX", stages.REHEARSAL)
    st2 = stages.Stage("env", outdir.OutDir(tmp_path / "out2"))
    stages.ensure_installed(st2, folder)
    assert not [a for a in calls if "install" in a]
    assert st2.data["install"]["would_install"] == ["rich==15.0.0"]
    assert st2.checks[-1]["ok"] is None and "installs nothing" in st2.checks[-1]["detail"]


# -- the cuda probe's CUDA branch, on fakes of torch.cuda and NVML ---------------------------------
@pytest.mark.gpu_fake
def test_the_cuda_probe_reads_every_gpu_and_checks_gpuplays_mapping(monkeypatch):
    from types import SimpleNamespace

    import torch
    from gpukit import probes

    from tests.unit.gpu_fakes import FakeGpu, FakePynvml, install_nvml

    class Nvml(FakePynvml):  # the system queries the probe adds to what gpuplay reads
        def nvmlSystemGetDriverVersion(self):  # noqa: N802
            return b"580.159.04"

        def nvmlSystemGetCudaDriverVersion_v2(self):  # noqa: N802
            return 13000

        def nvmlDeviceGetPciInfo(self, h):  # noqa: N802
            return SimpleNamespace(busId=f"00000000:{0x1B + h.gpu:02X}:00.0".encode())

    a = FakeGpu("GPU-aaaaaaaa-1111-2222-3333-444444444444", "NVIDIA H100 A")
    b = FakeGpu("GPU-bbbbbbbb-1111-2222-3333-444444444444", "NVIDIA H100 B")
    nvml = Nvml([a, b])  # NVML's order is PCI's; CUDA's (fastest first) is b, a
    install_nvml(monkeypatch, nvml)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    props = [
        SimpleNamespace(name=g.name, uuid=g.uuid.removeprefix("GPU-"), major=9, minor=0,
                        multi_processor_count=132, total_memory=80 * 2**30, L2_cache_size=50 * 2**20,
                        pci_domain_id=0, pci_bus_id=0x1C - i, pci_device_id=0)
        for i, g in enumerate((b, a))
    ]  # fmt: skip
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: props[i])
    info = probes.probe_cuda()
    assert "torch_error" not in info and "nvml_error" not in info, info
    assert [d["name"] for d in info["torch_devices"]] == ["NVIDIA H100 B", "NVIDIA H100 A"]
    assert info["torch_devices"][0]["pci"] == "00000000:1c:00.0" and info["driver"] == "580.159.04"
    assert [g["uuid"] for g in info["nvml_devices"]] == [a.uuid, b.uuid]
    mapping = info["mapping"]
    assert (
        mapping["function"] == "gpuplay.core.measure.telemetry.cuda_nvml_mapping"
        and mapping["status"] == "ok"
    )
    assert [(r["cuda"], r["gpuplay_nvml"]) for r in mapping["rows"]] == [(0, 1), (1, 0)]
    assert "CUDA" not in info["not_installed"]


def test_the_rehearsal_keeps_its_state_out_of_the_users_folders(tmp_path, monkeypatch):
    # Its 0.05 s calibration once replaced the user's real one in the default state folder.
    verify = _verify_module()
    seen: list[tuple[str | None, str | None]] = []

    def stage(out, wheelhouse, seconds, **kw):
        seen.append((os.environ.get("GPUPLAY_STATE_DIR"), os.environ.get("GPUPLAY_CONFIG_DIR")))
        return 0

    monkeypatch.setattr(stages, "STAGES", {n: (stage, "") for n in verify.ORDER})
    monkeypatch.setenv("GPUPLAY_STATE_DIR", str(tmp_path / "users-state"))
    monkeypatch.delenv("GPUPLAY_CONFIG_DIR", raising=False)
    verify.main(["rehearse", str(tmp_path / "out"), "--quick"])  # 1: these stages write no files
    assert len(seen) == len(verify.ORDER)
    for state, config in seen:
        assert state and config and "users-state" not in state
        assert "gpu-verify-rehearsal-" in state and "gpu-verify-rehearsal-" in config
    assert os.environ["GPUPLAY_STATE_DIR"] == str(tmp_path / "users-state")  # given back
    assert "GPUPLAY_CONFIG_DIR" not in os.environ
