"""The stages of gpu-verify. Each fits one 10-minute device command: it runs its steps while its
time box lasts, rewrites its JSON after every step, and ends with a REPORT.md section.

Exit status of a stage: 0 every check passed; 1 a check failed (or a step ran out of time);
3 no CUDA GPU here (the report says so, and what could still be checked was).
"""

from __future__ import annotations

import html
import json
import re
import shutil
import signal
import sys
import tempfile
import time
import traceback
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gpukit import proc
from gpukit.outdir import OutDir, OutDirError

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NO_CUDA = 0, 1, 2, 3
STAGE_SECONDS = 560.0  # one device command is at most 600 s; keep 40 s for start-up and transfer
PROBES = str(Path(__file__).with_name("probes.py"))
APP_DRIVE = str(Path(__file__).with_name("app_drive.py"))
WORK = Path(tempfile.gettempdir()) / "gpukit"


@dataclass(frozen=True)
class Box:
    """Where the stages run. The GPU box by default; `REHEARSAL` is the same stages on this
    machine's CPU (scripts/gpu-verify rehearse): `cpu` wherever a stage would use cuda:0, the
    GPU-only branches run anyway, short budgets, and nothing is installed."""

    device: str = "cuda:0"
    preset: str = "published"
    rehearse: bool = False
    parity_s: float = 70.0  # each parity probe's share
    drive_s: float = 60.0  # the app driven by Pilot
    monitor_count: int = 20
    collectives: tuple[str, ...] = ("--backend", "nccl", "--sizes", "1K:256M")
    calibrate: tuple[str, ...] = ("-d", "all")
    compare: tuple[str, ...] = ("--preset", "published")
    chunks: tuple[tuple[str, list[str], int], ...] | None = None  # None: CHUNKS
    parity_runs: tuple[tuple[str, str, list[str]], ...] | None = None  # None: PARITY_RUNS
    decks: int | None = None  # how many of the shipped decks (None: all)

    @property
    def gpu_branches(self) -> bool:
        """Run the steps that need CUDA: on the box when CUDA is there, always in the rehearsal."""
        return self.rehearse


BOX = Box()
REHEARSAL = Box(
    device="cpu",
    preset="quick",
    rehearse=True,
    parity_s=60.0,
    drive_s=30.0,
    monitor_count=4,
    collectives=("--backend", "gloo", "--sizes", "1K:64K", "--iters", "3"),
    calibrate=("-d", "cpu", "--budget", "0.05"),
    compare=("--preset", "quick", "--devices", "cpu", "--scenario", "elementwise", "--budget", "0.1"),
    # The GPU chunk only: tests/gpu (skipped without CUDA, yet collected: a renamed import in them
    # shows) and every test marked gpu_fake, wherever it lives.
    chunks=(("gpu", ["tests", "-m", "gpu or gpu_fake"], 300),),
)
# CI's share of it (a few minutes): every probe and every stage's entry point, once each. The
# tests stage collects tests/gpu (every GPU test module imports gpuplay's names) and runs none.
REHEARSAL_QUICK = replace(
    REHEARSAL,
    parity_s=25.0,
    drive_s=20.0,
    monitor_count=2,
    chunks=(("gpu", ["tests/gpu"], 120),),
    parity_runs=(
        ("torch", "float32", ["elementwise"]),
        ("torch", "bfloat16", ["matmul"]),
        ("cupy", "float32", ["elementwise"]),
    ),
    decks=1,
)
# `rehearse --simulate h100`: the same stages with cuda:0 a simulated H100 (tests/gpu_sim: every
# child process starts with its sitecustomize on PYTHONPATH), so the kit's CUDA branches (events,
# NVML, GPM, energy, peak memory, OOM words) run here; the device's name says it is simulated.
SIMULATED = ("h100",)


def simulated_box(quick: bool) -> Box:
    base = REHEARSAL_QUICK if quick else REHEARSAL
    return replace(
        base,
        device="cuda:0",
        calibrate=("-d", "cuda:0", "--budget", "0.05"),
        compare=("--preset", "quick", "--devices", "cuda:0", "--scenario", "elementwise", "--budget", "0.1"),
        # The GPU tests assume a real GPU (NCCL, TF32's rounding, sparse storage): collected, not run;
        # tests/gpu_sim is where the simulated device is tested.
        chunks=(("gpu", ["tests/gpu", "--collect-only"], 120),),
        parity_runs=(("torch", "float32", ["elementwise"]), ("torch", "bfloat16", ["matmul"])),
    )


# Modules the stages import on the box, and the wheel that brings each.
NEEDED_MODULES = {
    "textual": "textual",
    "textual_plotext": "textual-plotext",
    "plotext": "plotext",
    "platformdirs": "platformdirs",
    "array_api_compat": "array-api-compat",
    "watchfiles": "watchfiles",
    "textual_serve": "textual-serve",
    "scipy": "scipy",
    "pytest_asyncio": "pytest-asyncio",
    "pytest_textual_snapshot": "pytest-textual-snapshot",
    "syrupy": "syrupy",
}


class Stage:
    """One stage's checks and data, written out after every step."""

    def __init__(self, name: str, out: OutDir, seconds: float = STAGE_SECONDS) -> None:
        self.name = name
        self.out = out
        self.deadline = proc.Deadline(seconds)
        self.started = time.time()
        self.checks: list[dict[str, Any]] = []
        self.data: dict[str, Any] = {}
        self.notes: list[str] = []
        self.not_run: list[str] = []  # the parts the time box did not reach, in order
        self.cuda: bool | None = None

    def check(self, name: str, ok: bool | None, detail: str = "") -> bool | None:
        """ok None: could not be checked here (no GPU, out of time); it is neither pass nor fail."""
        self.checks.append({"check": name, "ok": ok, "detail": detail})
        self.flush()
        return ok

    def step(self, name: str, fn: Callable[[], Any], need: float = 5.0) -> Any:
        if not self.deadline.enough(need):
            self.skip(name, f"{self.deadline.left():.0f} s left of the stage's time box, {need:.0f} s needed")
            return None
        t0 = time.monotonic()
        try:
            value = fn()
        except Exception as exc:  # a kit bug must not cost the lease: say it and go on
            self.data.setdefault("kit_tracebacks", []).append(traceback.format_exc()[-3000:])
            self.check(name, False, f"the kit failed: {type(exc).__name__}: {exc}")
            value = None
        self.data.setdefault("step_seconds", {})[name] = round(time.monotonic() - t0, 1)
        self.flush()
        return value

    def skip(self, name: str, why: str) -> None:
        """A part the time box did not reach: listed under "not_run", and the stage fails (what a
        lease did not check is not a pass)."""
        self.not_run.append(name)
        self.check(name, False, f"not run: {why}")

    @property
    def status(self) -> int:
        if any(c["ok"] is False for c in self.checks):
            return EXIT_FAILED
        if self.cuda is False:
            return EXIT_NO_CUDA
        return EXIT_OK

    def flush(self) -> None:
        doc = {
            "stage": self.name,
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started)),
            "seconds": round(time.time() - self.started, 1),
            "cuda": self.cuda,
            "device": BOX.device,
            "rehearsal": BOX.rehearse,
            "exit_status": self.status,
            "checks": self.checks,
            "not_run": self.not_run,
            "notes": self.notes,
            **self.data,
        }
        self.out.write_json(f"{self.name}.json", doc)
        self.out.report_section(self.name, self.markdown())

    def markdown(self) -> str:
        mark = {True: "pass", False: "**FAIL**", None: "n/a"}
        verdict = {EXIT_OK: "passed", EXIT_FAILED: "FAILED", EXIT_NO_CUDA: "no CUDA GPU here"}[self.status]
        lines = [f"## {self.name}: {verdict}", ""]
        if self.cuda is False:
            lines += ["No CUDA GPU is visible on this machine: the GPU checks read n/a.", ""]
        lines += ["| check | result | detail |", "|---|---|---|"]
        for c in self.checks:
            lines.append(f"| {_cell(c['check'])} | {mark[c['ok']]} | {_cell(c['detail'])} |")
        lines += [f"- {_cell(n)}" for n in self.notes]
        if self.not_run:
            lines += ["", f"Not run (out of time): {_cell(', '.join(self.not_run))}."]
        return "\n".join(lines)


def _cell(text: Any) -> str:
    """Text from tools and exceptions, safe in one Markdown table cell."""
    s = re.sub(r"[\x00-\x1f\x7f]+", " ", str(text))
    return s.replace("|", "\\|")[:400]


def last_json(stdout: str) -> dict[str, Any] | None:
    for line in reversed(stdout.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                return None
    return None


def _brief(r: dict[str, Any]) -> str:
    if r.get("error"):
        return r["error"]
    if r.get("timed_out"):
        return f"timed out after {r['timeout_s']} s"
    text = (r.get("stderr") or r.get("stdout") or "").strip().splitlines()
    return f"exit {r.get('rc')}: {text[-1] if text else ''}"


def _probe_check(st: Stage, label: str, res: dict[str, Any]) -> None:
    """A probe's verdict: ok, broken (`error`), or refused because a piece is absent, which is
    expected in the rehearsal (n/a) and a failure on the GPU box (it should have it)."""
    if "refused" in res and "error" not in res:
        st.check(label, None if BOX.rehearse else False, f"refused: {res['refused']}")
    else:
        st.check(label, bool(res.get("ok")), res.get("error") or json.dumps(res)[:200])


# -- installing from the wheelhouse -----------------------------------------------------------
# The box's Python, asked in a child: which needed modules fail to import, and which version of
# each wheelhouse project it has (None: not installed).
INSTALLED_PROBE = """
import importlib, json, sys
from importlib import metadata
missing, versions = {}, {}
for name in %r:
    try:
        importlib.import_module(name)
    except Exception as exc:
        missing[name] = f"{type(exc).__name__}: {exc}"
for dist in %r:
    try:
        versions[dist] = metadata.version(dist)
    except metadata.PackageNotFoundError:
        versions[dist] = None
print(json.dumps({"missing": missing, "versions": versions}))
"""


def ensure_installed(stage: Stage, wheelhouse: Path) -> bool:
    """Import what gpuplay needs and compare versions with the wheelhouse; install offline what is
    missing or at another version (textual, rich, pytest … at the versions the suite passes with).
    The rehearsal only reports what it would install: it never changes the Python it runs in."""
    from gpukit import wheelhouse as wh

    wheels = wh.wheels_in(wheelhouse)
    code = INSTALLED_PROBE % (list(NEEDED_MODULES), sorted(wheels))

    def ask() -> tuple[dict[str, str], list[str]]:
        r = proc.python(["-c", code], 120)
        found = last_json(r.get("stdout", ""))
        if found is None:
            return {"(the import check itself)": _brief(r)}, []
        return dict(found.get("missing", {})), wh.version_pins(wheels, found.get("versions", {}))

    gone, pins = ask()
    record: dict[str, Any] = {"missing_before": sorted(gone), "other_versions_before": pins}
    if not wheels:
        record["wheelhouse"] = f"not installed: no wheels in {wheelhouse}"
    if (gone or pins) and wheels and BOX.rehearse:
        record["would_install"] = pins or sorted(gone)
    elif (gone or pins) and wheels:
        roots = wh.project_requirements(proc.ROOT / "pyproject.toml")
        cmds = wh.install_commands(str(wheelhouse), roots, pins)
        r = proc.python(cmds["resolved"], 240)
        record["install_resolved"] = {k: r.get(k) for k in ("rc", "seconds", "stderr")}
        if r.get("rc") != 0:  # the box's Python refused (a conflict): unpack into a folder of our own
            shutil.rmtree(proc.SITE, ignore_errors=True)
            r = proc.python([*cmds["target"], str(proc.SITE), *sorted(map(str, wheels.values()))], 240)
            record["install_target"] = {k: r.get(k) for k in ("rc", "seconds", "stderr")}
        gone, pins = ask()
    record["missing_after"] = gone
    record["other_versions_after"] = pins
    stage.data["install"] = record
    detail = "all importable" if not gone else "missing: " + ", ".join(f"{k} ({v})" for k, v in gone.items())
    if pins:
        detail += "; not at the wheelhouse's version: " + ", ".join(pins)
    if (gone or pins) and not wheels:
        detail += f"; no wheels in {wheelhouse} (run scripts/gpu-wheelhouse here and carry .whl)"
    if BOX.rehearse and (gone or pins):  # this machine's own environment, not the kit's code
        detail += " (the rehearsal installs nothing)"
        return bool(stage.check("dependencies importable", None if not gone else False, detail))
    return bool(stage.check("dependencies importable", not gone and not pins, detail))


def torch_cuda(stage: Stage) -> bool:
    """Whether torch sees CUDA here, asked within the stage's time box (no time left: False)."""
    wanted = stage.deadline.give(60)
    if wanted < 1:
        return False
    r = proc.python(["-c", "import torch,sys;sys.exit(0 if torch.cuda.is_available() else 1)"], wanted)
    return r.get("rc") == 0


def cuda_probe(stage: Stage) -> dict[str, Any]:
    r = proc.python([PROBES, "cuda"], stage.deadline.give(120), keep=0)
    info = last_json(r.get("stdout", "")) or {"error": _brief(r)}
    stage.cuda = bool(info.get("cuda_available"))
    return info


# -- env ----------------------------------------------------------------------------------
def stage_env(out: OutDir, wheelhouse: Path, seconds: float = STAGE_SECONDS) -> int:
    st = Stage("env", out, seconds)
    smi = st.step(
        "nvidia-smi",
        lambda: proc.run(
            [
                "nvidia-smi",
                "--query-gpu=index,name,uuid,driver_version,memory.total,pci.bus_id",
                "--format=csv",
            ],
            st.deadline.give(30),
        ),
    )
    st.data["nvidia_smi"] = smi
    if smi is not None:
        if smi.get("rc") is None:  # not installed: a machine with no NVIDIA driver
            st.check("nvidia-smi", None, "not installed (no NVIDIA driver here)")
        else:
            st.check(
                "nvidia-smi",
                smi.get("rc") == 0,
                (smi.get("stdout") or "").strip().replace("\n", "; ")[:300] or _brief(smi),
            )
    st.step("install", lambda: ensure_installed(st, wheelhouse), need=30)
    info = st.step("cuda probe", lambda: cuda_probe(st), need=20) or {}
    st.data["cuda_probe"] = info
    # What this box is, one row a device: a simulated one (tests' harness) says so by its name.
    st.data["devices"] = [
        {
            "device": f"cuda:{d.get('index')}",
            "name": d.get("name"),
            "uuid": d.get("uuid"),
            "simulated": "simulated" in str(d.get("name", "")).lower(),
        }
        for d in info.get("torch_devices", [])
    ]
    if not st.cuda:
        st.check(
            "CUDA visible to torch",
            None,
            info.get("torch_error") or f"torch {info.get('torch')}: no CUDA device",
        )
    else:
        devs = info.get("torch_devices", [])
        st.check("CUDA visible to torch", True, "; ".join(f"cuda:{d['index']} {d['name']}" for d in devs))
        st.check(
            "NVML lists the GPUs",
            bool(info.get("nvml_devices")),
            info.get("nvml_error", f"driver {info.get('driver')}"),
        )
        m = info.get("mapping", {})
        st.check(
            "gpuplay's CUDA→NVML mapping matches the UUIDs", m.get("status") == "ok", json.dumps(m)[:300]
        )
    info_r = st.step(
        "gpuplay info", lambda: proc.gpuplay(["info", "--format", "json"], st.deadline.give(90), keep=0)
    )
    if info_r:
        parsed = _json_or_none(info_r.get("stdout", ""))
        st.data["gpuplay_info"] = parsed if parsed is not None else proc.tail(info_r.get("stdout", ""))
        st.check("gpuplay info", info_r.get("rc") == 0, _brief(info_r) if info_r.get("rc") else "ran")
    if st.cuda or BOX.gpu_branches:
        for name, label in (
            ("rawkernel", "CuPy RawKernel (NVRTC) compiles and runs"),
            ("compile", f"torch.compile on {BOX.device}"),
        ):
            r = st.step(
                label,
                lambda n=name: proc.python([PROBES, n, BOX.device], st.deadline.give(180), keep=0),
                need=20,
            )
            if r is not None:
                res = last_json(r.get("stdout", "")) or {"error": _brief(r)}
                st.data[name] = res
                _probe_check(st, label, res)
        st.step("ncu", lambda: _ncu(st), need=30)
        st.step("GPM activity", lambda: gpm_env(st), need=30)
    else:
        st.check("CuPy RawKernel, torch.compile, ncu", None, "need a CUDA GPU")
    st.flush()
    return st.status


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return None


NCU_TARGET = (
    "import cupy as cp; k=cp.ElementwiseKernel('float32 x','float32 y','y=2*x','dbl');"
    "a=cp.ones(1<<20,dtype=cp.float32); k(a); cp.cuda.Device().synchronize()"
)


def _ncu(st: Stage) -> None:
    ncu = shutil.which("ncu") or next(iter(sorted(Path("/opt/nvidia").glob("nsight-compute/*/ncu"))), None)
    if ncu is None:
        st.check("ncu reads counters", None, "not installed: ncu (on neither PATH nor /opt/nvidia)")
        return
    ver = proc.run([str(ncu), "--version"], 30)
    st.data["ncu_version"] = ver.get("stdout", "").strip()[-200:]
    r = proc.run(
        [
            str(ncu),
            "--clock-control",
            "none",
            "--metrics",
            "sm__cycles_elapsed.avg",
            "-c",
            "1",
            sys.executable,
            "-c",
            NCU_TARGET,
        ],
        st.deadline.give(120),
    )
    got = "sm__cycles_elapsed.avg" in r.get("stdout", "")
    st.data["ncu_run"] = {k: r.get(k) for k in ("rc", "seconds", "timed_out", "stdout", "stderr")}
    st.check("ncu reads counters", got, "read sm__cycles_elapsed.avg" if got else _brief(r))


# -- tests --------------------------------------------------------------------------------
# The GPU tests first, with the GPU paths' fakes (tests/unit/test_gpu_fakes.py, where it exists);
# the unit chunk then leaves that file out. A path that does not exist here is dropped.
GPU_FAKES = "tests/unit/test_gpu_fakes.py"
CHUNKS = (
    ("gpu", ["tests/gpu", GPU_FAKES], 240),
    ("unit+cli", ["tests/unit", "tests/cli", f"--ignore={GPU_FAKES}"], 300),
    ("tui", ["tests/tui"], 300),
    ("e2e", ["tests/e2e"], 300),
)


def _chunk_args(given: list[str]) -> list[str]:
    """A chunk's pytest arguments less the test paths that do not exist in this checkout."""
    return [a for a in given if not a.startswith("tests/") or (proc.ROOT / a).exists()]


def stage_tests(
    out: OutDir, wheelhouse: Path, seconds: float = STAGE_SECONDS, only: list[str] | None = None
) -> int:
    st = Stage("tests", out, seconds)
    st.step("install", lambda: ensure_installed(st, wheelhouse), need=30)
    st.cuda = torch_cuda(st)
    xdist = proc.python(["-c", "import xdist"], st.deadline.give(30)).get("rc") == 0
    WORK.mkdir(parents=True, exist_ok=True)
    junits: list[Path] = []
    st.data["chunks"] = []
    chunks = [c for c in (BOX.chunks or CHUNKS) if not only or c[0] in only]
    for name, given, wanted in chunks:
        paths = _chunk_args(given)
        xml = WORK / f"junit-{name.replace('+', '-')}.xml"
        xml.unlink(missing_ok=True)
        argv = [
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--junitxml={xml}",
            "-o",
            "junit_family=xunit2",
            *paths,
        ]
        if xdist and name != "gpu":  # 16 cores there; the GPU chunk stays in one process (one GPU)
            argv += ["-n", "8", "--dist", "loadfile"]
        elif xdist:
            argv += ["-n", "0"]  # pyproject's addopts ask for two workers
        else:  # without pytest-xdist, pyproject's `-n 2` would be an unknown option
            argv += ["-o", "addopts="]

        def one(argv: list[str] = argv, wanted: float = wanted) -> dict[str, Any]:
            return proc.python(
                argv, st.deadline.give(wanted), env=proc.pytest_env(), grace=20, first_signal=signal.SIGINT
            )

        r = st.step(f"pytest {name}", one, need=30)
        if r is None:
            continue
        counts = _junit_counts(xml) if xml.exists() else {}
        if xml.exists():
            junits.append(xml)
        summary = (r.get("stdout") or "").strip().splitlines()[-1:] or [""]
        st.data["chunks"].append(
            {
                "chunk": name,
                "paths": paths,
                "rc": r.get("rc"),
                "timed_out": r.get("timed_out"),
                "seconds": r.get("seconds"),
                "summary": summary[0],
                **counts,
            }
        )
        if name == "gpu" and st.cuda and counts.get("tests") and counts.get("skipped") == counts.get("tests"):
            st.check("gpu tests ran (not skipped)", False, "CUDA is here, yet every gpu test was skipped")
        ok = r.get("rc") == 0 and not r.get("timed_out")
        st.check(f"pytest {name}", ok, summary[0] if not r.get("timed_out") else f"timed out: {summary[0]}")
    merged = merge_junit(junits)
    st.data["totals"] = _junit_totals(merged)
    st.data["failures"] = _junit_failures(merged)
    st.flush()
    return st.status


def merge_junit(files: list[Path]) -> ET.Element:
    """One <testsuites> holding every chunk's <testsuite>, with the totals added up."""
    root = ET.Element("testsuites", name="gpuplay on the GPU box")
    totals = dict.fromkeys(("tests", "failures", "errors", "skipped"), 0)
    for path in files:
        try:
            tree = ET.parse(path).getroot()
        except ET.ParseError:
            continue  # a chunk killed mid-write
        suites = [tree] if tree.tag == "testsuite" else list(tree.iter("testsuite"))
        for s in suites:
            s.set("name", f"{s.get('name', 'pytest')}:{path.stem}")
            root.append(s)
            for k in totals:
                totals[k] += int(s.get(k, 0) or 0)
    for k, v in totals.items():
        root.set(k, str(v))
    return root


def _junit_counts(path: Path) -> dict[str, int]:
    try:
        root = merge_junit([path])
    except Exception:
        return {}
    return {k: int(root.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}


def _junit_totals(root: ET.Element) -> dict[str, int]:
    """The merged chunks' counts (tests, failures, errors, skipped) for tests.json."""
    keys = ("tests", "failures", "errors", "skipped")
    return {k: sum(int(el.get(k) or 0) for el in root.iter("testsuite")) for k in keys}


def _junit_failures(root: ET.Element, limit: int = 60) -> list[dict[str, str]]:
    out = []
    for case in root.iter("testcase"):
        for kind in ("failure", "error"):
            el = case.find(kind)
            if el is not None:
                out.append(
                    {
                        "test": f"{case.get('classname')}::{case.get('name')}",
                        "kind": kind,
                        "message": (el.get("message") or "")[:500],
                    }
                )
    return out[:limit]


# -- bench --------------------------------------------------------------------------------
GOALS = {
    "parity": (0.97, 1.03),  # gpuplay median ÷ do_bench
    "bandwidth": 0.85,  # element-wise, reductions: fraction of the measured copy bandwidth
    "bf16_matmul": 0.85,  # fraction of the measured bf16 matmul rate
    "fft": 0.50,
    "overhead_us": 5.0,
    "first_frame_s": 1.0,
}
# The seed's workloads (../shared/published-claims.md) at the published sizes first, one row each,
# then the bf16 roof's row, then the rest: a bench cut short has judged the seed's table first.
PARITY_RUNS = (
    ("torch", "float32", ["matmul", "elementwise", "fft1d", "fft2d", "batched_matmul", "reductions", "heat"]),
    ("torch", "bfloat16", ["matmul"]),
    ("cupy", "float32", ["elementwise", "reductions", "fft1d", "matmul"]),
    ("torch", "bfloat16", ["batched_matmul"]),
)
COMPARE_VARIANTS = "base,tf32,amp-bf16,compile,graphs"


def stage_bench(out: OutDir, wheelhouse: Path, seconds: float = STAGE_SECONDS) -> int:
    st = Stage("bench", out, seconds)
    st.step("install", lambda: ensure_installed(st, wheelhouse), need=30)
    st.data["cuda_probe"] = st.step("cuda probe", lambda: cuda_probe(st), need=20)
    st.data["goals"] = GOALS
    if not st.cuda and not BOX.gpu_branches:
        st.check("bench", None, "needs a CUDA GPU; nothing measured")
        st.flush()
        return st.status
    cal = st.step(
        "gpuplay calibrate",
        lambda: proc.gpuplay(
            ["calibrate", *BOX.calibrate, "--format", "json"], st.deadline.give(150), keep=0
        ),
        need=60,
    )
    if cal:
        st.data["calibrate"] = _json_or_none(cal.get("stdout", "")) or proc.tail(cal.get("stdout", ""))
        st.check("gpuplay calibrate", cal.get("rc") == 0, _brief(cal) if cal.get("rc") else "peaks cached")
    rows: list[dict[str, Any]] = []
    st.data["parity"] = rows
    for backend, dtype, names in BOX.parity_runs or PARITY_RUNS:
        budget = st.deadline.give(BOX.parity_s)
        r = st.step(
            f"parity {backend} {dtype}",
            lambda b=backend, d=dtype, n=names, t=budget: proc.python(
                [PROBES, "parity", b, d, BOX.preset, str(max(t - 10, 5)), BOX.device, *n],
                t + 30,
                keep=0,  # its one JSON line outgrows a tail: six rows with their roofs pass 4000 characters
            ),
            need=min(30, BOX.parity_s),
        )
        got = last_json((r or {}).get("stdout", "")) or {}
        if r is not None and "rows" not in got:
            _probe_check(st, f"parity {backend} {dtype}", got if got else {"error": _brief(r)})
        rows.extend(got.get("rows", []))
    judge_parity(st, rows)
    over = st.step("harness overhead", lambda: _overhead(st), need=30)
    st.data["overhead"] = over
    if over:
        us = over.get("overhead_us")
        st.check(
            f"harness overhead ≤ {GOALS['overhead_us']} µs per step",
            (False if "error" in over or over.get("status") not in (None, "ok") else None)
            if us is None
            else us <= GOALS["overhead_us"],
            f"{us:.2f} µs (empty step {over.get('gpuplay_empty_step_us') or 0:.2f} µs, do_bench no-op {over.get('do_bench_noop_us') or 0:.2f} µs)"
            if us is not None
            else str(over)[:300],
        )
    cmp_ = st.step(
        f"gpuplay compare --preset {BOX.preset}",
        lambda: proc.gpuplay(
            [
                "compare",
                *BOX.compare,
                "--backends",
                "numpy,torch,cupy",
                "--variants",
                COMPARE_VARIANTS,
                "--format",
                "json",
            ],
            st.deadline.give(600),
            grace=25,
            keep=0,
        ),
        need=60,
    )
    if cmp_:
        parsed = _json_or_none(cmp_.get("stdout", ""))
        st.data["compare"] = parsed if parsed is not None else proc.tail(cmp_.get("stdout", ""), 20000)
        st.check(
            f"compare --preset {BOX.preset}",
            cmp_.get("rc") == 0 and not cmp_.get("timed_out"),
            "ran" if cmp_.get("rc") == 0 else _brief(cmp_) + (" (partial rows kept)" if parsed else ""),
        )
    st.flush()
    return st.status


def judge_parity(st: Stage, rows: list[dict[str, Any]]) -> None:
    lo, hi = GOALS["parity"]
    for row in rows:
        label = f"{row.get('scenario')} {row.get('backend')} {row.get('dtype')}"
        ratio, warm = row.get("do_bench_ratio"), row.get("warm_ratio")
        if ratio is None:
            # Refused for an absent piece (CuPy, triton): expected in the rehearsal, not on the box.
            expected = BOX.rehearse and row.get("status") == "refused"
            st.check(
                f"median ÷ reference: {label}",
                None if expected else False,
                row.get("message") or row.get("status", ""),
            )
            continue
        ok = lo <= ratio <= hi
        st.check(
            f"median ÷ reference {lo}–{hi}: {label}",
            ok,
            f"{ratio:.3f} (flushed L2), {warm:.3f} warm; gpuplay {row['gpuplay_ms']:.4g} ms"
            if warm
            else f"{ratio:.3f}",
        )
        roof = row.get("roof") or {}
        frac = roof.get("fraction")
        cls = row.get("goal_class")
        goal = None
        if cls == "bandwidth":
            goal = ("of the copy bandwidth", GOALS["bandwidth"])
        elif cls == "fft":
            goal = ("of the roof", GOALS["fft"])
        elif row.get("scenario") == "matmul" and row.get("dtype") == "bfloat16":
            goal = ("of the bf16 matmul rate", GOALS["bf16_matmul"])
        if goal:
            st.check(
                f"{label} ≥ {goal[1]:.0%} {goal[0]}",
                None if frac is None else frac >= goal[1],
                f"{frac:.1%} ({roof.get('bound')}-bound)"
                if frac is not None
                else roof.get("note", roof.get("status", "no roof")),
            )


def _overhead(st: Stage) -> dict[str, Any]:
    from gpukit.probes import EMPTY_STEP

    WORK.mkdir(parents=True, exist_ok=True)
    code = WORK / "empty_step.py"
    code.write_text(EMPTY_STEP, encoding="utf-8")
    r = proc.python([PROBES, "overhead", str(code), BOX.device], st.deadline.give(90), keep=0)
    return last_json(r.get("stdout", "")) or {"error": _brief(r)}


# -- app ----------------------------------------------------------------------------------
def stage_app(
    out: OutDir, wheelhouse: Path, seconds: float = STAGE_SECONDS, drive_s: float | None = None
) -> int:
    st = Stage("app", out, seconds)
    # the rest of the box: the install check, the monitor, writing
    drive_s = min(drive_s or BOX.drive_s, max(10.0, seconds - 80))
    st.step("install", lambda: ensure_installed(st, wheelhouse), need=30)
    st.cuda = torch_cuda(st)
    shots = WORK / "screens"
    shutil.rmtree(shots, ignore_errors=True)
    shots.mkdir(parents=True)
    r = st.step(
        "drive the app (Pilot, 120×36)",
        lambda: proc.python([APP_DRIVE, str(shots), str(drive_s)], st.deadline.give(drive_s + 90), keep=0),
        need=drive_s + 20,
    )
    # None: the step did not run (its row says why) or the kit failed (its row says how)
    drive = None if r is None else last_json(r.get("stdout", "")) or {"error": _brief(r)}
    st.data["drive"] = drive
    if drive is not None and "error" in drive:
        st.check("app driven", False, drive["error"])
    elif drive is not None:
        ff = drive.get("first_frame_s")
        st.check(
            f"first frame ≤ {GOALS['first_frame_s']} s",
            None if ff is None else ff <= GOALS["first_frame_s"],
            f"{ff:.2f} s" if ff is not None else "",
        )
        st.check(
            "the backend key switched the live run to torch",
            drive.get("backend_after_key") == "torch",
            f"backend after the key: {drive.get('backend_after_key')}",
        )
        st.check(
            "a live result on cuda",
            bool(drive.get("cuda_results")) if st.cuda else None,
            f"{drive.get('cuda_results', 0)} cuda results, {drive.get('results', 0)} in all",
        )
        st.check(
            "Telemetry shows NVML values",
            nvml_read(drive.get("nvml_sample") or []) if st.cuda else None,
            json.dumps(drive.get("nvml_sample"))[:300],
        )
    svgs = sorted(shots.glob("*.svg"))
    if svgs:  # inline in app.json: one file back per stage (scripts/gpu-verify screens app.json DIR)
        st.data["screens"] = {p.name: p.read_text(encoding="utf-8", errors="replace") for p in svgs}
    mon = st.step(
        "gpuplay monitor 10 s",
        lambda: proc.gpuplay(
            ["monitor", "--interval", "0.5", "--count", str(BOX.monitor_count)], st.deadline.give(40), keep=0
        ),
        need=20,
    )
    if mon:
        lines = [_json_or_none(x) for x in mon.get("stdout", "").splitlines() if x.strip()]
        samples = [x for x in lines if isinstance(x, dict)]
        st.data["monitor"] = {"samples": len(samples), "first": samples[:1], "last": samples[-1:]}
        has_gpu = any(s.get("gpus") for s in samples)
        st.check(
            f"gpuplay monitor: {BOX.monitor_count} samples",
            len(samples) == BOX.monitor_count and mon.get("rc") == 0,
            f"{len(samples)} samples, GPUs {'seen' if has_gpu else 'not seen'}",
        )
        gpm_app(st, samples)
    st.flush()
    return st.status


# -- GPM: SM, tensor-core and DRAM activity from NVML's GPM counters ----------------
def gpm_env(st: Stage) -> None:
    """A bf16 matmul must keep the tensor cores busy and an add must not; n/a with GPM's reason
    on a GPU without GPM (pre-Hopper, MIG without support, an older driver)."""
    r = proc.python([PROBES, "gpm", "cuda:0"], st.deadline.give(120))
    res = last_json(r.get("stdout", "")) or {"error": _brief(r)}
    st.data["gpm"] = res
    if "refused" in res and "error" not in res:
        # No CUDA here (the rehearsal): n/a, as every other refused probe; on the box, a failure.
        _probe_check(st, "GPM: bf16 matmul on the tensor cores, add on DRAM", res)
        return
    mm, add = res.get("matmul_bf16") or {}, res.get("add_fp32") or {}
    reason = res.get("error") or mm.get("reason") or add.get("reason")
    if reason:
        st.check(
            "GPM: bf16 matmul on the tensor cores, add on DRAM", None if mm.get("reason") else False, reason
        )
        return
    st.check("GPM: bf16 matmul keeps the tensor cores busy (> 30 %)", (mm.get("tensor_active") or 0) > 30,
             json.dumps(mm)[:300])  # fmt: skip
    st.check("GPM: an add uses DRAM (> 30 %) and no tensor core (< 5 %)",
             (add.get("dram_active") or 0) > 30 and (add.get("tensor_active") or 0) < 5, json.dumps(add)[:300])  # fmt: skip


def gpm_app(st: Stage, samples: list[dict[str, Any]]) -> None:
    """`gpuplay monitor` carries each GPU's GPM figures or the reason there are none."""
    gpus = [g for s in samples[1:] for g in s.get("gpus") or []]
    if not gpus:
        st.check("gpuplay monitor: GPM per GPU", None, "no GPU in the samples")
        return
    acts = [g.get("activity") or {} for g in gpus]
    with_figures = sum(1 for a in acts if a.get("sm_active") is not None)
    reasons = sorted({str(a.get("reason")) for a in acts if a.get("reason")})
    st.check("gpuplay monitor: GPM per GPU (figures or a reason)", all(acts),
             f"{with_figures}/{len(acts)} readings with figures; {'; '.join(reasons)[:200]}")  # fmt: skip


NVML_FIELDS = ("util_gpu", "mem_used", "power_w", "temp_c", "sm_clock_mhz")


def nvml_read(sample: list[dict[str, Any]]) -> bool:
    """Whether NVML gave real values (a GPU whose every field reads n/a is not telemetry)."""
    return bool(sample) and all(sum(g.get(f) is not None for f in NVML_FIELDS) >= 3 for g in sample)


def screens_page(svgs: list[Path]) -> str:
    """One HTML page with each SVG inline: one file back instead of one per screenshot."""
    parts = [
        "<!doctype html><meta charset='utf-8'><title>gpuplay on the GPU box</title>",
        "<style>body{background:#222;color:#ddd;font-family:sans-serif} figure{margin:1em 0}</style>",
    ]
    for p in svgs:
        svg = p.read_text(encoding="utf-8", errors="replace")
        svg = re.sub(r"<\?xml[^>]*\?>", "", svg)
        parts.append(f"<figure><figcaption>{html.escape(p.stem)}</figcaption>{svg}</figure>")
    return "\n".join(parts)


# -- talk ---------------------------------------------------------------------------------
def stage_talk(out: OutDir, wheelhouse: Path, seconds: float = STAGE_SECONDS) -> int:
    st = Stage("talk", out, seconds)
    st.step("install", lambda: ensure_installed(st, wheelhouse), need=30)
    st.cuda = torch_cuda(st)
    decks = sorted((proc.ROOT / "scenarios" / "decks").glob("*.toml"))[: BOX.decks]
    WORK.mkdir(parents=True, exist_ok=True)
    st.data["decks"] = {}
    for deck in decks:
        rec = WORK / f"rehearsal-{deck.stem}.json"
        rec.unlink(missing_ok=True)
        argv = ["demo", str(_deck_for_box(deck)), "--rehearse", "--out", str(rec)]
        if BOX.rehearse:
            argv += ["--preset", BOX.preset]
        r = st.step(
            f"rehearse {deck.stem}",
            lambda a=argv: proc.gpuplay(a, st.deadline.give(220), grace=20),
            need=min(60, st.deadline.left() / 2) if BOX.rehearse else 60,
        )
        if r is None:
            continue
        recorded = _json_or_none(rec.read_text(encoding="utf-8")) if rec.exists() else None
        st.data["decks"][deck.stem] = {
            "run": {k: r.get(k) for k in ("rc", "seconds", "timed_out", "stderr")},
            "rehearsal": recorded,
        }
        st.check(
            f"rehearse {deck.stem} (its own presets)",
            r.get("rc") == 0 and recorded is not None,
            _brief(r) if r.get("rc") else "recorded",
        )
    collectives_label = f"collectives {BOX.collectives[1].upper()}, 1 rank"
    if st.cuda or BOX.gpu_branches:
        r = st.step(
            collectives_label,
            lambda: proc.gpuplay(
                ["collectives", "--nproc", "1", *BOX.collectives, "--format", "json"],
                st.deadline.give(150),
                keep=0,
            ),
            need=40,
        )
        if r:
            st.data["collectives"] = _json_or_none(r.get("stdout", "")) or proc.tail(r.get("stdout", ""))
            st.check(
                collectives_label,
                r.get("rc") == 0,
                _brief(r) if r.get("rc") else "ran, every result checked",
            )
    else:
        st.check(collectives_label, None, "NCCL needs a CUDA GPU")
    st.flush()
    return st.status


_CUDA_DEVICE_LINE = re.compile(r'^(\s*device\s*=\s*)"cuda(:\d+)?"', re.MULTILINE)


def _deck_for_box(deck: Path) -> Path:
    """The deck as shipped; in the rehearsal a copy with `cpu` for every CUDA device, so its
    GPU steps run their levers through gpuplay here instead of being refused."""
    if not BOX.rehearse:
        return deck
    text = deck.read_text(encoding="utf-8")
    copy = WORK / "decks" / deck.name
    copy.parent.mkdir(parents=True, exist_ok=True)
    copy.write_text(_CUDA_DEVICE_LINE.sub(rf'\g<1>"{BOX.device}"', text), encoding="utf-8")
    return copy


STAGES: dict[str, tuple[Callable[..., int], str]] = {
    "env": (
        stage_env,
        "install from .whl; driver, CUDA, torch/CuPy, NVML + UUIDs, gpuplay's CUDA→NVML mapping, "
        "gpuplay info, CuPy RawKernel (NVRTC), torch.compile, ncu counters",
    ),
    "tests": (
        stage_tests,
        "the suite with gpu marks, in chunks "
        + ", ".join(f"{n} ({' '.join(p)}, ≤{s} s)" for n, p, s in CHUNKS)
        + " (all: the gpu chunk only); counts and failures in tests.json",
    ),
    "bench": (
        stage_bench,
        "gpuplay calibrate; the seed's workloads at the published sizes, one row each: median vs do_bench "
        "/ cupyx benchmark (warm, flushed L2) and roof fraction; then the rest: harness overhead, compare "
        "--preset published (numpy, torch, cupy × " + COMPARE_VARIANTS + ")",
    ),
    "app": (
        stage_app,
        "the app at 120×36 for ~60 s with Pilot (Live, Telemetry, Profile, Compare), SVG screenshots "
        "(inline in app.json), first-frame time; gpuplay monitor 10 s",
    ),
    "talk": (
        stage_talk,
        "each shipped deck rehearsed with its own presets; gpuplay collectives over NCCL on one rank",
    ),
}
# `all`, the lease's main call: the stages in the order of what a lease must not miss (what the box
# is, then the figures, then the GPU tests, then the app and the talk), each given its share of
# what is left of the call's seconds when it starts, so time a stage does not use goes to the next.
ALL_ORDER = ["env", "bench", "tests", "app", "talk"]
# env's share is its checks' own time on a loaded 2-core machine (41 s) plus the 20 s a stage keeps
# for writing; bench gets the most, the seed's rows first.
ALL_SHARES = {"env": 0.16, "bench": 0.36, "tests": 0.20, "app": 0.14, "talk": 0.14}
ALL_CHUNKS = ["gpu"]  # `all` runs the GPU chunk of the tests; the rest is `tests` on its own
MIN_STAGE_SECONDS = 25.0  # below this a stage starts nothing and says so (its file still written)


def stage_seconds(name: str, left: float, remaining: list[str]) -> float:
    """A stage's time box: its share of what is left among the stages still to run."""
    total = sum(ALL_SHARES[n] for n in remaining)
    return max(0.0, left * ALL_SHARES[name] / total) if total else 0.0


def not_reached(out: OutDir, name: str, seconds: float) -> int:
    """A stage the call's seconds did not reach: its file says so, its parts all under not_run."""
    st = Stage(name, out, 0.0)
    st.skip(
        f"the {name} stage",
        f"{seconds:.0f} s were left for it, under the {MIN_STAGE_SECONDS:.0f} s it needs to start",
    )
    return st.status


def run_all(
    out: OutDir,
    wheelhouse: Path,
    seconds: float,
    after: Callable[[str, int, float, str], None] | None = None,
    table: dict[str, tuple[Callable[..., int], str]] | None = None,
) -> list[int]:
    """Every stage in ALL_ORDER within `seconds` in all; `after(name, status, seconds, crash)` is
    called as each ends (its file is written by then; `crash` is the traceback of a stage that
    broke, else ""). A stage that breaks is a kit bug: said, and the next stage still runs."""
    table = table or STAGES
    end = time.monotonic() + seconds
    statuses: list[int] = []
    for i, name in enumerate(ALL_ORDER):
        t0, crash = time.monotonic(), ""
        box = stage_seconds(name, end - t0, ALL_ORDER[i:])
        if box < MIN_STAGE_SECONDS:
            status = not_reached(out, name, box)
        else:
            fn, _ = table[name]
            kw: dict[str, Any] = {"only": ALL_CHUNKS} if name == "tests" else {}
            try:
                status = fn(out, wheelhouse, seconds=box, **kw)
            except OutDirError:
                raise
            except Exception:  # the stage broke: say it, keep what was written, go on
                crash = traceback.format_exc()
                print(crash, file=sys.stderr, flush=True)
                status = EXIT_FAILED
        statuses.append(status)
        if after is not None:
            after(name, status, time.monotonic() - t0, crash)
    return statuses


FILES = {
    "env": ["env.json", "REPORT.md"],
    "tests": ["tests.json", "REPORT.md"],
    "bench": ["bench.json", "REPORT.md"],
    "app": ["app.json", "REPORT.md"],
    "talk": ["talk.json", "REPORT.md"],
}
