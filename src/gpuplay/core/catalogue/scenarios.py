"""Scenario files: TOML data naming a workload, its presets, and the public claim it tests.

Loading parses data only (tomllib); nothing in a scenario file is ever executed.
A broken file yields a ScenarioError naming the file and the field; the rest load.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from gpuplay.core.storage.safeload import read_text_file, toml_loads
from gpuplay.core.workloads import get_workload, registry

MAX_FILE_BYTES = 256 * 1024
DEFAULT_PRESET = "quick"  # what compare and sweep run when no preset is named (Scenario.chosen_preset)
OWN_PARAMS = "default"  # the preset name of a scenario's own parameters (the playground's `p` key)


@dataclass(frozen=True)
class Claim:
    source: str
    text: str
    numpy_ms: float | None = None
    gpu_ms: float | None = None
    speedup: float | None = None
    hardware: str = ""
    flaws: tuple[str, ...] = ()


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    workload: str
    description: str
    params: Mapping[str, Any]
    presets: Mapping[str, Mapping[str, Any]]
    claim: Claim | None = None
    path: Path | None = None
    tags: tuple[str, ...] = field(default_factory=tuple)

    def chosen_preset(self, preset: str | None) -> str | None:
        """The preset a compare or a sweep runs: the one named, else `quick` where the scenario
        defines it, else none (its own parameters). A user's scenario or code file without a quick
        preset must not stop a compare of every scenario; a preset the user names is still checked."""
        if preset is not None:
            return preset
        return DEFAULT_PRESET if DEFAULT_PRESET in self.presets else None

    def preset_params(self, preset: str | None) -> dict[str, Any]:
        """Resolved parameters for a preset (None, or `default` where the scenario defines no preset
        of that name: its own parameters, as the playground's preset key calls them)."""
        base = dict(self.params)
        if preset is not None and not preset.strip():  # `-p "$UNSET"`: it ran the own parameters, unsaid
            raise ValueError(
                f"an empty preset; name one ({', '.join([*self.presets, OWN_PARAMS])}) or leave it out"
            )
        if preset == OWN_PARAMS and OWN_PARAMS not in self.presets:
            preset = None
        if preset:
            if preset not in self.presets:
                has = (
                    f"has: {', '.join(self.presets)}, or {OWN_PARAMS} for its own parameters"
                    if self.presets
                    else f"it defines no PRESETS; leave out the preset, or name {OWN_PARAMS}"
                )
                from gpuplay.core.storage.argcheck import did_you_mean

                hint = did_you_mean(str(preset), [*self.presets, OWN_PARAMS])
                raise ValueError(f"scenario {self.name} has no preset {preset!r}{hint} ({has})")
            base.update(self.presets[preset])
        return get_workload(self.workload).resolve(base)


NOT_RUNNABLE = (
    "not something gpuplay runs: a FILE.py is your code, a FILE.toml is a scenario (data), "
    "anything else is a scenario's name (gpuplay list)"
)


class ScenarioError(ValueError):
    def __init__(self, path: Path | str, field_name: str, message: str) -> None:
        self.path, self.field, self.detail = Path(path), field_name, message
        where = f"{self.path.name}: {field_name}: " if field_name else f"{self.path.name}: "
        super().__init__(where + message)


def _require(data: Mapping[str, Any], key: str, kind: type, path: Path, prefix: str = "") -> Any:
    name = prefix + key
    if key not in data:
        raise ScenarioError(path, name, "missing (required)")
    value = data[key]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise ScenarioError(path, name, f"must be a {kind.__name__}; got {type(value).__name__}")
    return value


def _optional_number(data: Mapping[str, Any], key: str, path: Path) -> float | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ScenarioError(path, f"claim.{key}", f"must be a non-negative number; got {value!r}")
    return float(value)


KNOWN_FIELDS = {"name", "title", "workload", "description", "params", "presets", "claim", "tags"}


def parse_scenario(text: str, path: Path | str = "<string>") -> Scenario:
    """Validate one scenario document. Raises ScenarioError naming the first wrong field, with
    every other mistake the file has after it (`; field: why`): a file with three mistakes is
    fixed in one go, not found out one run at a time."""
    path = Path(path)
    try:
        data = toml_loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(path, "", f"not valid TOML ({exc})") from None
    errors: list[ScenarioError] = []
    checked = _Collect(errors)
    from gpuplay.core.storage.argcheck import did_you_mean

    for key in sorted(set(data) - KNOWN_FIELDS):
        hint = did_you_mean(key, KNOWN_FIELDS) or ";"
        errors.append(
            ScenarioError(path, key, f"unknown field{hint} known: {', '.join(sorted(KNOWN_FIELDS))}")
        )
    name = checked(_name, data, path, default="")
    workload_name = checked(_workload_name, data, path, default="")
    title, description = data.get("title", name), data.get("description", "")
    for key, value in (("title", title), ("description", description)):
        if not isinstance(value, str):
            errors.append(ScenarioError(path, key, f"must be a string; got {type(value).__name__}"))
    params, presets = _params_and_presets(data, workload_name, path, checked)
    claim = checked(_claim, data["claim"], path) if "claim" in data else None
    tags = data.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        errors.append(ScenarioError(path, "tags", "must be a list of strings"))
    if errors:
        first, rest = errors[0], errors[1:]
        more = "".join(f"; {e.field + ': ' if e.field else ''}{e.detail}" for e in rest)
        raise ScenarioError(path, first.field, first.detail + more)
    return Scenario(name, title, workload_name, description, params, presets, claim, path, tuple(tags))


class _Collect:
    """Calls a check, keeping its ScenarioError and going on (a default in its place)."""

    def __init__(self, errors: list[ScenarioError]) -> None:
        self.errors = errors

    def __call__(self, f: Any, *args: Any, default: Any = None) -> Any:
        try:
            return f(*args)
        except ScenarioError as exc:
            self.errors.append(exc)
            return default


def _params_and_presets(
    data: Mapping[str, Any], workload_name: str, path: Path, checked: _Collect
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The scenario's params and presets, each checked against its workload (when it has one)."""
    params = data.get("params", {})
    if not isinstance(params, dict):
        checked.errors.append(ScenarioError(path, "params", "must be a table"))
        params = {}
    if not workload_name:  # unknown: said already, and nothing to check the values against
        return params, {}
    workload = get_workload(workload_name)
    checked(_check_params, workload, params, path, "params")
    presets = checked(_presets, workload, params, data.get("presets", {}), path, default={})
    return params, presets


def _name(data: Mapping[str, Any], path: Path) -> str:
    name: str = _require(data, "name", str, path)
    if not name or not all(c.isalnum() or c in "-_" for c in name):
        raise ScenarioError(path, "name", f"use letters, digits, '-' and '_' only; got {name!r}")
    return name


def _workload_name(data: Mapping[str, Any], path: Path) -> str:
    """A registered workload's name; never code (a scenario file is data)."""
    workload_name: str = _require(data, "workload", str, path)
    if workload_name.startswith("code:") or workload_name.endswith(".py"):
        raise ScenarioError(
            path,
            "workload",
            f"{workload_name!r} names code to run; a scenario file is data and can never run code. "
            "Run a code file yourself with `gpuplay run FILE.py` or `gpuplay --code FILE.py`, "
            "or list it under code_files in your config.toml",
        )
    if workload_name not in registry():
        raise ScenarioError(
            path, "workload", f"unknown workload {workload_name!r} (known: {', '.join(registry())})"
        )
    return workload_name


def _presets(workload: Any, params: Mapping[str, Any], raw: Any, path: Path) -> dict[str, dict[str, Any]]:
    """Each preset's own values, checked merged over the scenario's params."""
    if not isinstance(raw, dict):
        raise ScenarioError(path, "presets", "must be a table of tables")
    presets: dict[str, dict[str, Any]] = {}
    for preset, values in raw.items():
        if not isinstance(values, dict):
            raise ScenarioError(path, f"presets.{preset}", "must be a table")
        merged = {**params, **values}
        _check_params(workload, merged, path, f"presets.{preset}")
        presets[preset] = dict(values)
    return presets


def _claim(c: Any, path: Path) -> Claim:
    """The public claim the scenario tests: its source and text required, figures optional."""
    if not isinstance(c, dict):
        raise ScenarioError(path, "claim", "must be a table")
    flaws = c.get("flaws", [])
    if not isinstance(flaws, list) or not all(isinstance(f, str) for f in flaws):
        raise ScenarioError(path, "claim.flaws", "must be a list of strings")
    hardware = c.get("hardware", "")
    if not isinstance(hardware, str):
        raise ScenarioError(path, "claim.hardware", "must be a string")
    return Claim(
        source=_require(c, "source", str, path, "claim."),
        text=_require(c, "text", str, path, "claim."),
        numpy_ms=_optional_number(c, "numpy_ms", path),
        gpu_ms=_optional_number(c, "gpu_ms", path),
        speedup=_optional_number(c, "speedup", path),
        hardware=hardware,
        flaws=tuple(flaws),
    )


def _check_params(workload: Any, params: Mapping[str, Any], path: Path, where: str) -> None:
    try:
        workload.resolve(params)
    except ValueError as exc:
        raise ScenarioError(path, where, str(exc)) from None


def builtin_dir() -> Path:
    """Scenarios shipped with gpuplay: inside the wheel, or the repo's scenarios/ when editable."""
    packaged = Path(str(resources.files("gpuplay"))) / "scenarios"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[4] / "scenarios"


@dataclass
class ScenarioSet:
    scenarios: dict[str, Scenario]
    errors: list[ScenarioError]
    # Two files of one name: said, naming both (the later one is used). A user's file that
    # replaces a shipped scenario hides that scenario's published claim: `replaced` maps the
    # name to the shipped file, so `list` and the app can say so.
    warnings: list[str] = field(default_factory=list)
    replaced: dict[str, Path] = field(default_factory=dict)

    def replacement_notes(self) -> list[str]:
        """One line per shipped scenario a user's file replaces, naming both files."""
        return [
            f"{self.scenarios[name].path} replaces the shipped scenario {name!r} ({old}): its "
            "published claim and presets are not shown while this file is there"
            for name, old in self.replaced.items()
            if name in self.scenarios
        ]

    def get(self, name: str) -> Scenario:
        try:
            return self.scenarios[name]
        except KeyError:
            if Path(name).expanduser().is_file():  # scenario_from_argument left a bare file name here
                raise KeyError(f"{name}: {NOT_RUNNABLE}") from None
            raise KeyError(self.unknown(name)) from None

    def unknown(self, name: str) -> str:
        """Why `name` is no scenario here, in words: the file of that name that failed to load
        (its reason again: the warning may have scrolled away), the closest known name, the list."""
        from gpuplay.core.storage.argcheck import did_you_mean

        failed = [e for e in self.errors if e.path.stem == name or e.path.name == name]
        if failed:
            e = failed[0]
            return (
                f"unknown scenario {name!r}: {e.path} defines it but did not load "
                f"({e.field + ': ' if e.field else ''}{e.detail}); fix the file and run again"
            )
        broken = [e.path.name for e in self.errors if e.path.suffix == ".toml"]
        note = (
            f" ({len(broken)} scenario file(s) did not load: {', '.join(broken[:3])}"
            f"{', …' if len(broken) > 3 else ''}; see the warnings above)"
            if broken
            else ""
        )
        hint = did_you_mean(name, self.scenarios) or ";"
        return f"unknown scenario {name!r}{hint} known: {', '.join(self.scenarios)}{note}"


def load_scenarios(extra_dirs: Iterable[Path | str] = ()) -> ScenarioSet:
    """Built-in scenarios, then each extra folder's (a later file of the same name wins, and the
    set's `warnings` say so, naming both files)."""
    found: dict[str, Scenario] = {}
    errors: list[ScenarioError] = []
    sset = ScenarioSet({}, errors)
    shipped = builtin_dir()
    for folder in [shipped, *(Path(d).expanduser() for d in extra_dirs)]:
        if not folder.is_dir():
            errors.append(ScenarioError(folder, "", "scenario folder not found"))
            continue
        for path in sorted(folder.glob("*.toml")):
            try:
                scenario = scenario_file(path)
            except ScenarioError as exc:
                errors.append(exc)
                continue
            if scenario.name in found:
                _same_name(sset, found[scenario.name], scenario, shipped)
            found[scenario.name] = scenario
    order = list(registry())
    ranked = sorted(found.values(), key=lambda s: (order.index(s.workload), s.name))
    sset.scenarios = {s.name: s for s in ranked}
    return sset


def _same_name(sset: ScenarioSet, before: Scenario, after: Scenario, shipped: Path) -> None:
    """`after` replaces `before` (same name): said, naming both files."""
    name, old, new = after.name, before.path, after.path
    if old is not None and Path(old).parent == shipped:
        sset.replaced[name] = Path(old)  # said by `replacement_notes`
    else:  # two of the user's own (a shipped one they replaced stays marked replaced)
        sset.warnings.append(f"two scenarios named {name!r}: {old} and {new}; the later one ({new}) is used")


def scenario_file(path: Path | str) -> Scenario:
    """One scenario .toml file, read as data; a ScenarioError naming the file and why otherwise."""
    path = Path(path).expanduser()
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise ScenarioError(path, "", f"larger than {MAX_FILE_BYTES // 1024} KiB; not a scenario")
        return parse_scenario(read_text_file(path), path)
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(path, "", f"cannot read ({getattr(exc, 'strerror', None) or exc})") from None
    except RecursionError:  # parsed, but too deep for what reads the values
        raise ScenarioError(path, "", "nested too deeply") from None


def scenario_from_argument(arg: str) -> Scenario | None:
    """What a SCENARIO argument that names a file means, by its suffix alone; None for a name.

    Only a `.py` path is code (run with the user's rights, as they asked); a `.toml` path is a
    scenario file, parsed as data and never run; any other path is refused with the reason,
    whatever its text (a `.toml` holding Python was once run as code because it was a file).
    """
    if arg.endswith(".py"):
        return scenario_for(arg)
    if arg.endswith(".toml"):
        return scenario_file(arg)
    # A bare word is a scenario's name even when a file of that name sits in the current folder
    # (`gpuplay run matmul` beside a binary called matmul); ScenarioSet.get names the file when the
    # word is no scenario. Only a path (with a /) is refused here.
    if "/" in arg:
        raise ScenarioError(
            arg,
            "",
            NOT_RUNNABLE,
        )
    return None


def scenario_for(path: Path | str) -> Scenario:
    """A Scenario for a user's code file (for `gpuplay run FILE.py` and the app's list)."""
    from gpuplay.core.workloads.usercode import load

    w = load(path)
    return Scenario(
        name=w.path.stem,
        title=w.title,
        workload=w.name,
        description=w.description,
        params={p.name: p.default for p in w.params},
        presets=w.info.presets,
        claim=None,
        path=w.path,
        tags=("your code",),
    )


def code_scenario(arg: str) -> Scenario | None:
    """A file named by its path (FILE.py: code; FILE.toml: a scenario file, data; any other path is
    refused: scenario_from_argument), or a code file by its stem from code_files in config.toml;
    None for a scenario's name. Shared by `gpuplay run`/`sweep` and the Python API (gpuplay.api)."""
    from gpuplay.core.storage.config import load_config

    named = scenario_from_argument(arg)
    if named is not None:
        return named
    for path in load_config().code_files:
        if path.stem == arg:
            return scenario_for(path)
    return None


def spec_for(sc: Scenario, preset: str | None, params: Mapping[str, Any] | None = None, **fields: Any) -> Any:
    """(RunSpec, size label) of a scenario at a preset, with `params` set over it: what `gpuplay
    run` and gpuplay.run measure. Bad names and values raise KeyError, ValueError or SpecError."""
    from gpuplay.core.spec import RunSpec

    workload = get_workload(sc.workload)
    resolved = workload.resolve({**sc.preset_params(preset), **dict(params or {})})
    return RunSpec.make(sc.workload, resolved, scenario=sc.name, **fields), workload.size_label(resolved)


def on_needed_backend(spec: Any) -> tuple[Any, str | None]:
    """`spec` on the backend its parameters need (an exported torch model, torch's DataLoader),
    and the sentence that says so; (spec, None) when it needs none or is on it already. For a
    caller whose user named no backend (`gpuplay run` without -b, gpuplay.run without backend=):
    one named explicitly stays, and the planner says why it cannot run."""
    needed = get_workload(spec.workload).needs_backend(spec.params)
    if needed is None or spec.backend == needed:
        return spec, None
    return spec.replace(backend=needed), f"backend {needed}: these parameters run on {needed}"
