"""The wheelhouse: every package gpuplay and its tests import that the GPU box lacks, as wheels.

The box (a lent H100/H200) has Python 3.12 with torch, CuPy, NumPy, SciPy, pytest … but no
network, so what it lacks travels with the working tree (64 MiB in all). The closure is computed
here from the wheels' own METADATA, so a new dependency of textual is followed without anyone
listing it. Versions are pinned to the ones installed where this runs (the ones the suite passes
with), falling back to the newest that satisfies the requirement.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from email.parser import Parser
from importlib import metadata
from pathlib import Path

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

# What the box's Python already has (KINDS.md's package list, for the image 'cuda'). Only the
# names gpuplay's closure can reach matter; a wrong entry here shows up in the `env` stage's
# import check, which names the missing module.
BOX_HAS = frozenset(
    canonicalize_name(n)
    for n in [
        "torch",
        "numpy",
        "scipy",
        "cupy-cuda13x",
        "nvidia-ml-py",
        "pytest",
        "hypothesis",
        "rich",
        "click",
        "psutil",
        "threadpoolctl",
        "aiohttp",
        "aiosignal",
        "aiohappyeyeballs",
        "attrs",
        "frozenlist",
        "multidict",
        "propcache",
        "yarl",
        "idna",
        "anyio",
        "typing-extensions",
        "pygments",
        "markdown-it-py",
        "mdurl",
        "jinja2",
        "markupsafe",
        "packaging",
        "pluggy",
        "iniconfig",
        "sortedcontainers",
        "filelock",
        "fsspec",
        "networkx",
        "sympy",
        "mpmath",
        "triton",
        "setuptools",
        "pip",
        "colorama",
    ]
)

# Pure-Python packages the box has, carried anyway at the versions tested here: textual 8.2.8 needs
# rich >= 14.2, syrupy 4.8 needs pytest < 9, and the box's versions are not known in advance.
# pip keeps the box's copy where it satisfies the requirement; where not, it takes these.
CARRY_ANYWAY = frozenset(
    canonicalize_name(n)
    for n in ["rich", "pytest", "pygments", "markdown-it-py", "mdurl", "typing-extensions"]
)

# Left out on purpose: playwright (its browser tests skip where it is missing, and it is ~40 MiB),
# ruff (lint, not the suite), the CUDA 12 CuPy extras (the box has cupy-cuda13x).
LEFT_OUT = {
    "playwright": "tests/e2e/test_browser.py skips without it; its wheel is ~40 MiB",
    "ruff": "a linter: .ci/run lints on the CPU machine, not on the GPU box",
}

PLATFORMS = (
    "manylinux_2_39_x86_64",
    "manylinux_2_35_x86_64",
    "manylinux_2_34_x86_64",
    "manylinux_2_31_x86_64",
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_24_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
)

# The box: CPython 3.12 on x86-64 Linux (markers in Requires-Dist are evaluated for it).
BOX_ENVIRONMENT = {
    "python_version": "3.12",
    "python_full_version": "3.12.3",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
}

SIZE_LIMIT = 55 * 2**20  # the working tree travels with a 64 MiB cap; leave room for the repo


def project_requirements(pyproject: Path, extras: Iterable[str] = ("test",)) -> list[Requirement]:
    """The project's dependencies and the named extras, as requirements (self-references dropped)."""
    data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    project = data["project"]
    name = canonicalize_name(project["name"])
    texts = list(project.get("dependencies", []))
    optional = project.get("optional-dependencies", {})
    for extra in extras:
        texts.extend(optional.get(extra, []))
    reqs = [Requirement(t) for t in texts]
    return [r for r in reqs if canonicalize_name(r.name) != name and applies(r)]


def needed(req: Requirement) -> bool:
    """Whether the box must get `req` from the wheelhouse (it lacks it, or it is carried anyway)."""
    key = canonicalize_name(req.name)
    if key in LEFT_OUT:
        return False
    if key in CARRY_ANYWAY:
        return True
    return key not in BOX_HAS  # markers were evaluated where the requirement was read


def applies(req: Requirement, extra: str = "") -> bool:
    if req.marker is None:
        return True
    env = {**BOX_ENVIRONMENT, "extra": extra}
    return Marker(str(req.marker)).evaluate(env)


def wheel_requirements(wheel: Path, extras: Iterable[str] = ()) -> list[Requirement]:
    """Requires-Dist of a wheel that apply on the box (with `extras` asked for)."""
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        meta = Parser().parsestr(zf.read(name).decode("utf-8"))
    out = []
    for text in meta.get_all("Requires-Dist") or []:
        req = Requirement(text)
        if req.marker is None or any(applies(req, e) for e in ("", *extras)):
            out.append(req)
    return out


def wheels_in(folder: Path) -> dict[str, Path]:
    """Wheel files in `folder` by canonical project name."""
    found: dict[str, Path] = {}
    if folder.is_dir():
        for path in sorted(folder.glob("*.whl")):
            try:
                name = parse_wheel_filename(path.name)[0]
            except Exception:
                continue
            found[canonicalize_name(name)] = path
    return found


def wheel_version(path: Path) -> str:
    return str(parse_wheel_filename(path.name)[1])


@dataclass
class Check:
    """What a wheelhouse folder lacks against the project's requirements."""

    present: dict[str, str] = field(default_factory=dict)  # name -> version
    missing: list[str] = field(default_factory=list)  # requirement text, and who needs it
    mismatched: list[str] = field(default_factory=list)  # a wheel whose version the requirement refuses
    duplicates: list[str] = field(default_factory=list)  # two versions of one name stop a --no-deps install
    size_bytes: int = 0

    @property
    def ok(self) -> bool:
        return not (self.missing or self.mismatched or self.duplicates) and self.size_bytes <= SIZE_LIMIT

    def lines(self) -> list[str]:
        out = [f"{len(self.present)} wheels, {self.size_bytes / 2**20:.1f} MiB"]
        out += [f"missing: {m}" for m in self.missing]
        out += [f"wrong version: {m}" for m in self.mismatched]
        out += [f"two versions of: {d}" for d in self.duplicates]
        if self.size_bytes > SIZE_LIMIT:
            out.append(f"too large: over {SIZE_LIMIT / 2**20:.0f} MiB")
        return out


def check(folder: Path, roots: list[Requirement], follow_metadata: bool = True) -> Check:
    """Whether `folder` holds every wheel the box needs for `roots`, transitively.

    Dependencies are followed through each present wheel's METADATA (a wheel file that is not a
    real zip, as in a test's fake folder, is taken as having none).
    """
    result = Check()
    seen_names: dict[str, list[str]] = {}
    for path in sorted(folder.glob("*.whl")) if folder.is_dir() else []:
        try:
            name, version, *_ = parse_wheel_filename(path.name)
        except Exception:
            continue
        seen_names.setdefault(canonicalize_name(name), []).append(str(version))
        result.size_bytes += path.stat().st_size
    result.duplicates = sorted(f"{n} ({', '.join(v)})" for n, v in seen_names.items() if len(v) > 1)
    wheels = wheels_in(folder)
    result.present = {n: wheel_version(p) for n, p in wheels.items()}
    queue: list[tuple[Requirement, str]] = [(r, "gpuplay") for r in roots]
    done: set[tuple[str, str]] = set()
    while queue:
        req, who = queue.pop(0)
        key = canonicalize_name(req.name)
        mark = (key, f"{sorted(req.extras)}{req.specifier}")
        if not needed(req) or mark in done:
            continue
        done.add(mark)
        wheel = wheels.get(key)
        if wheel is None:
            result.missing.append(f"{req} (for {who})")
            continue
        if req.specifier and not req.specifier.contains(wheel_version(wheel), prereleases=True):
            result.mismatched.append(f"{wheel.name} for {req} (for {who})")
        if follow_metadata and zipfile.is_zipfile(wheel):
            queue.extend((r, key) for r in wheel_requirements(wheel, req.extras))
    return result


def local_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def pinned(req: Requirement) -> str:
    """`req` pinned to the version installed here when that satisfies it, else `req` itself."""
    v = local_version(req.name)
    extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
    if v is not None and (not req.specifier or req.specifier.contains(v, prereleases=True)):
        return f"{req.name}{extras}=={v}"
    return f"{req.name}{extras}{req.specifier}"


def download(specs: list[str], dest: Path, log: list[str]) -> None:
    """`pip download` of `specs` for the box (binary wheels only, no dependencies)."""
    argv = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:"]
    argv += ["--python-version", "3.12", "--implementation", "cp", "--abi", "cp312", "--abi", "abi3"]
    argv += ["--abi", "none"]
    for p in PLATFORMS:
        argv += ["--platform", p]
    argv += ["-d", str(dest), *specs]
    log.append("$ pip download … " + " ".join(specs))
    subprocess.run(argv, check=True, timeout=600)


def build(folder: Path, roots: list[Requirement], log: list[str]) -> Check:
    """Fetch the closure of `roots` into `folder`, level by level, then check it."""
    folder.mkdir(parents=True, exist_ok=True)
    queue: list[Requirement] = list(roots)
    followed: dict[str, set[str]] = {}  # name -> extras whose requirements were followed
    while queue:
        level: dict[str, Requirement] = {}
        extras: dict[str, set[str]] = {}
        for req in queue:
            key = canonicalize_name(req.name)
            if not needed(req):
                continue
            if key not in followed or not req.extras <= followed[key]:
                level.setdefault(key, req)
                extras.setdefault(key, set()).update(req.extras)  # rich's and textual's [linkify]
        queue = []
        if not level:
            break
        have = wheels_in(folder)
        fetch = [pinned(r) for k, r in level.items() if k not in have]
        if fetch:
            download(fetch, folder, log)
        have = wheels_in(folder)
        for key in level:
            asked = extras[key] | followed.get(key, set())
            followed[key] = asked
            if key in have:
                queue.extend(wheel_requirements(have[key], asked))
    return check(folder, roots)


def describe(folder: Path) -> list[tuple[str, str, int]]:
    """(name, version, bytes) of each wheel, largest first."""
    rows = [(n, wheel_version(p), p.stat().st_size) for n, p in wheels_in(folder).items()]
    return sorted(rows, key=lambda r: -r[2])


def version_pins(wheels: Mapping[str, Path], installed: Mapping[str, str | None]) -> list[str]:
    """`name==version` for each wheel whose project the box has at another version (or lacks).

    An import check alone passes on a box whose textual, rich or pytest is at another version
    than the one the suite passed with here; such a box gets the carried wheel."""
    pins = []
    for key, path in sorted(wheels.items()):
        want = wheel_version(path)
        have = installed.get(key)
        if have is None or not _same_version(have, want):
            pins.append(f"{key}=={want}")
    return pins


def _same_version(a: str, b: str) -> bool:
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def install_commands(
    folder: str, roots: Iterable[Requirement], pins: Iterable[str] = ()
) -> Mapping[str, list[str]]:
    """The two ways the box installs from the folder: resolved into its own Python, or unpacked.
    `pins` (from version_pins) replace the range of the same project: its wheel's exact version."""
    pinned_names = {canonicalize_name(Requirement(p).name): p for p in pins}
    # With their version ranges: the box's pytest 9 must give way to syrupy's pytest < 9.
    names = sorted(
        {
            f"{r.name}{r.specifier}"
            for r in roots
            if needed(r) and canonicalize_name(r.name) not in pinned_names
        }
        | set(pinned_names.values())
    )
    base = ["-m", "pip", "install", "--quiet", "--no-index", "--no-cache-dir", "--find-links", folder]
    return {
        "resolved": [*base, *names],
        "target": [*base, "--no-deps", "--no-compile", "--upgrade", "--target"],
    }


def safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", text)
