"""The rehearsal: every stage of the kit run on this machine's CPU, then audited for code errors.

A lease on a GPU comes by chance and is short; a kit that crashes on a renamed import wastes it.
`scripts/gpu-verify rehearse OUT` runs env, tests, bench, app and talk with `cpu` where a stage
would use cuda:0 (stages.REHEARSAL), records every child process the stages start (proc.LOG), and
sorts what went wrong into:

code error       a traceback of any kind, an ImportError of gpuplay's own names, TypeError,
                 AttributeError, a missing file, a probe's `error` key, a command line gpuplay
                 no longer accepts (exit 2), pytest unable to collect, a step the kit itself
                 broke in: the rehearsal fails (exit 1) and prints each
not installed    what the CPU machine lacks on purpose (CUDA, NVML, CuPy, triton, the
                 wheelhouse, nvidia-smi, ncu, pytest-xdist): expected, listed
test failure     a test of the GPU chunk that failed: listed, not a code error
failed check     a goal or check that does not hold on a CPU (first frame, ratios): listed
timed out        a child stopped at its time box: listed
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

# Modules whose absence is expected on the CPU machine: named in words, never a code error.
EXPECTED_MODULES = {
    "cupy": "CuPy",
    "cupyx": "CuPy",
    "cupy_backends": "CuPy",
    "pynvml": "nvidia-ml-py (NVML)",
    "triton": "triton",
    "amdsmi": "amdsmi",
    "xdist": "pytest-xdist",
    "playwright": "playwright",
    "tensorrt": "TensorRT",
    "cuda": "cuda-python",
}
# Tools that are not on the CPU machine's PATH.
EXPECTED_TOOLS = {"nvidia-smi": "nvidia-smi (NVIDIA driver)", "ncu": "ncu (Nsight Compute)"}

CODE_ERROR_TYPES = ("TypeError", "AttributeError", "ImportError", "NameError", "KeyError", "ValueError")
_TRACEBACK = "Traceback (most recent call last)"
_EXC_LINE = re.compile(
    r"^\s*((?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Failure)\b.*)$"
)
_NO_MODULE = re.compile(r"ModuleNotFoundError: No module named '([\w.]+)'")


# torch's own words when a CUDA device is asked of a CPU-only build or a machine with no driver.
_NO_CUDA = (
    "Torch not compiled with CUDA enabled",
    "Found no NVIDIA driver on your system",
    "No CUDA GPUs are available",
)


def absent_module(text: str) -> str | None:
    """The expected-absent library an exception line names (a missing module, no CUDA), or None."""
    if any(words in text for words in _NO_CUDA):
        return "CUDA"
    m = _NO_MODULE.search(text)
    if m is None:
        return None
    return EXPECTED_MODULES.get(m.group(1).split(".")[0])


def exception_lines(text: str) -> list[str]:
    """The final exception line of each traceback in `text` (also inside JSON-escaped text)."""
    text = text.replace("\\n", "\n").replace('\\"', '"')
    found = []
    for block in text.split(_TRACEBACK)[1:]:
        lines = [ln for ln in block.splitlines() if _EXC_LINE.match(ln)]
        found.append(lines[-1].strip() if lines else block.strip().splitlines()[-1:][0][:300])
    return found


class Findings:
    def __init__(self) -> None:
        self.code_errors: list[dict[str, str]] = []
        self.not_installed: set[str] = set()
        self.refused: set[str] = set()
        self.test_failures: list[str] = []
        self.failed_checks: list[str] = []
        self.timed_out: list[str] = []

    def code_error(self, where: str, text: str) -> None:
        item = {"where": where, "error": text.strip()[:1500]}
        if item not in self.code_errors:
            self.code_errors.append(item)

    def as_dict(self) -> dict[str, Any]:
        return {
            "code_errors": self.code_errors,
            "not_installed": sorted(self.not_installed),
            "refused": sorted(self.refused),
            "test_failures": self.test_failures,
            "failed_checks": self.failed_checks,
            "timed_out": self.timed_out,
        }


def label(argv: list[str]) -> str:
    """A child's command line, short: `probes.py parity torch …`, `gpuplay demo …`, `pytest …`."""
    if not argv or "python" not in Path(argv[0]).name:
        return " ".join([Path(argv[0]).name if argv else "?", *argv[1:]])[:160]
    args = [Path(a).name if a.endswith(".py") else a for a in argv[1:]]
    if args[:2] == ["-m", "gpuplay"]:
        args = ["gpuplay", *args[2:]]
    elif args[:2] == ["-m", "pytest"]:
        args = ["pytest", *[a for a in args[2:] if not a.startswith("--junitxml")]]
    elif args[:1] == ["-c"]:
        args = ["python -c", (args[1].strip().splitlines() or [""])[0][:60] if len(args) > 1 else ""]
    return " ".join(args)[:160]


def audit_child(child: dict[str, Any], found: Findings) -> None:
    argv = [str(a) for a in child.get("argv", [])]
    where = label(argv)
    stdout, stderr = child.get("stdout") or "", child.get("stderr") or ""
    if child.get("rc") is None:  # it could not start at all
        tool = Path(argv[0]).name if argv else ""
        if tool in EXPECTED_TOOLS:
            found.not_installed.add(EXPECTED_TOOLS[tool])
        else:
            found.code_error(where, child.get("error") or "could not start")
        return
    if child.get("timed_out"):
        found.timed_out.append(f"{where} (after {child.get('seconds')} s)")
    if argv[1:3] == ["-m", "pytest"]:
        _audit_pytest(child, where, found)
        return
    last = _last_json(stdout)
    if last is None and _prints_json(argv) and not child.get("timed_out") and child.get("rc") != 2:
        # The kit reads a probe's verdict from its last line: none (a crash before it, or output
        # cut short) loses the probe's result on the box.
        found.code_error(where, "printed no JSON line: " + (stderr or stdout).strip()[-300:])
    if last is not None:
        found.not_installed.update(str(x) for x in last.get("not_installed") or [])
        if last.get("refused"):
            found.refused.add(f"{where}: {last['refused']}")
            if "cpu" in argv and str(last["refused"]).startswith("no CUDA device"):
                # asked for the CPU, it went for CUDA: the probe dropped its device argument
                found.code_error(where, f"given cpu, refused for CUDA: {last['refused']}")
        for row in last.get("rows") or []:
            if isinstance(row, dict):
                _audit_row(row, where, found)
        if last.get("error"):
            _exception(where, str(last["error"]) + "\n" + str(last.get("trace", "")), found)
            return
    for line in exception_lines(stdout + "\n" + stderr):
        _exception(where, line, found)
    if child.get("rc") == 2 and not child.get("timed_out"):  # a usage error or a missing file
        tail = (stderr or stdout).strip().splitlines()[-3:]
        found.code_error(where, "exit 2: " + " / ".join(tail))


def _prints_json(argv: list[str]) -> bool:
    """The kit's own children, which end with one JSON line (probes.py, app_drive.py)."""
    return any(Path(a).name in ("probes.py", "app_drive.py") for a in argv[1:2])


def _exception(where: str, text: str, found: Findings) -> None:
    lib = absent_module(text)
    if lib is not None:
        found.not_installed.add(lib)
    else:
        found.code_error(where, text)


def _audit_row(row: dict[str, Any], where: str, found: Findings) -> None:
    name = f"{row.get('scenario')} {row.get('backend')} {row.get('dtype')}"
    if row.get("status") == "error":
        found.code_error(f"{where}: {name}", f"{row.get('message')}\n{row.get('trace', '')}")
    elif row.get("status") == "refused":
        found.not_installed.update(str(x) for x in row.get("not_installed") or [])
        found.refused.add(f"{name}: {row.get('message')}")


def _audit_pytest(child: dict[str, Any], where: str, found: Findings) -> None:
    rc = child.get("rc")
    tail = (child.get("stdout") or "").strip().splitlines()
    # 1: tests failed (a test failure, counted from the JUnit XML); 0: passed. 2: interrupted, by
    # the time box (SIGINT) or by errors during collection; 3: internal error; 4: usage; 5: nothing
    # collected (a test folder gone).
    if rc == 2 and child.get("timed_out"):
        return
    if rc in (2, 3, 4, 5):
        errors = [ln for ln in tail if ln.startswith("ERROR ") or "Error" in ln][-8:]
        found.code_error(where, f"pytest exit {rc}: " + " / ".join(errors or tail[-3:]))


def audit_stage(doc: dict[str, Any], found: Findings) -> None:
    """What the stage's own JSON says: a step the kit broke in, checks that failed, tests failed."""
    for c in doc.get("checks", []):
        detail = str(c.get("detail", ""))
        if detail.startswith("the kit failed:"):
            found.code_error(f"{doc.get('stage')}: {c.get('check')}", detail)
        elif c.get("ok") is False:
            found.failed_checks.append(f"{c.get('check')}: {detail[:200]}")
        elif c.get("ok") is None and detail.startswith("not installed: "):  # looked for, not run
            found.not_installed.add(detail.removeprefix("not installed: ").split(" (")[0])
    install = doc.get("install") or {}
    if install.get("wheelhouse"):
        found.not_installed.add("the wheelhouse (.whl)")
    mapping = (doc.get("cuda_probe") or {}).get("mapping") or {}
    if mapping.get("status") == "no mapping function found":  # gpuplay renamed or moved it
        found.code_error("probes.py cuda: the CUDA→NVML mapping", json.dumps(mapping))
    for key in ("cupy_error", "nvml_error", "torch_error"):
        # A library's own failure, caught by the probe: the probe's code is at fault only when
        # it called something the library does not have (or with the wrong arguments).
        text = str((doc.get("cuda_probe") or {}).get(key) or "")
        if text.startswith(CODE_ERROR_TYPES):
            found.code_error(f"probes.py cuda: {key}", text)
        elif text and "not installed" not in text:
            found.refused.add(f"probes.py cuda: {text[:200]}")
    for f in doc.get("failures") or []:
        if isinstance(f, dict):
            found.test_failures.append(f"{f.get('test')}: {str(f.get('message'))[:200]}")


def audit(children: list[dict[str, Any]], doc: dict[str, Any] | None, crash: str = "") -> Findings:
    """Sort one stage's outcome: its child processes, its JSON, and a crash of the stage itself."""
    found = Findings()
    for child in children:
        audit_child(child, found)
    if doc is not None:
        audit_stage(doc, found)
    else:
        found.code_error("the stage", "wrote no JSON")
    if crash:
        found.code_error("the stage itself", crash)
    return found


def _last_json(stdout: str) -> dict[str, Any] | None:
    for line in reversed(stdout.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except json.JSONDecodeError:
                return None
            return value if isinstance(value, dict) else None
    return None


def markdown(
    per_stage: dict[str, dict[str, Any]], wall_s: float, quick: bool, simulated: str | None = None
) -> str:
    """The rehearsal's section of REPORT.md: the verdict first, then each stage's findings."""
    errors = sum(len(f["code_errors"]) for f in per_stage.values())
    where = f"on a simulated {simulated.upper()}" if simulated else "on the CPU"
    device = f"cuda:0 a simulated {simulated.upper()} (tests/gpu_sim)" if simulated else "`cpu` for cuda:0"
    lines = [
        f"## rehearsal {where}{' (quick)' if quick else ''}: "
        + ("no code errors" if not errors else f"**{errors} CODE ERROR(S)**"),
        "",
        f"Every stage run here with {device}, in {wall_s:.0f} s. A GPU is still needed "
        "for what only a GPU shows (docs/gpu-verification.md).",
        "",
        "| stage | code errors | not installed (expected) | tests failed | checks failed | timed out |",
        "|---|---|---|---|---|---|",
    ]
    for name, f in per_stage.items():
        lines.append(
            f"| {name} | {len(f['code_errors'])} | {', '.join(f['not_installed']) or '—'} | "
            f"{len(f['test_failures'])} | {len(f['failed_checks'])} | {len(f['timed_out'])} |"
        )
    for name, f in per_stage.items():
        for e in f["code_errors"]:
            first = e["error"].strip().splitlines()[-1:] or [""]
            lines.append(f"- **code error** in {name}, {_md(e['where'])}: {_md(first[0])}")
        for t in f["test_failures"][:10]:
            lines.append(f"- test failure in {name}: {_md(t)}")
        for t in f["timed_out"]:
            lines.append(f"- timed out in {name}: {_md(t)}")
    return "\n".join(lines)


def _md(text: str) -> str:
    return re.sub(r"[\x00-\x1f\x7f]+", " ", str(text)).replace("|", "\\|")[:300]
