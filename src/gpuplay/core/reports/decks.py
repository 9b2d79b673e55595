"""Demo decks: TOML data files listing the steps a speaker walks through, and rehearsal recordings.

A deck is data only (tomllib): each step names a scenario, any RunSpec fields, a title, a
caption, optional speaker notes and an optional recorded figure to fall back on. Loading
validates everything a typo could break and names the file, the step and the field; nothing
is measured or imported beyond the workload registry. A rehearsal recording is the JSON that
`report.to_json` writes, with the deck's steps and where it was recorded beside the results.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuplay.core.catalogue import levers
from gpuplay.core.catalogue.scenarios import MAX_FILE_BYTES, ScenarioError, ScenarioSet
from gpuplay.core.result import RunResult
from gpuplay.core.spec import RunSpec, SpecError
from gpuplay.core.storage.safeload import json_loads, read_text_file, toml_loads
from gpuplay.core.studies.compare import Row, attach_baselines, baseline_spec, is_baseline

RECORDING_FORMAT = "gpuplay-deck-recording/1"

# RunSpec fields a step (or the deck's [defaults]) may set, with the TOML types they accept:
# generated from the levers table (workload parameters go in a step's `params`).
SPEC_FIELD_TYPES: dict[str, tuple[type, ...]] = {lv.name: lv.deck_types() for lv in levers.spec_levers()}
STEP_FIELDS = {"scenario", "title", "caption", "notes", "preset", "params", "recorded", *SPEC_FIELD_TYPES}
STEP_FIELDS |= {"sweep"}  # a step may draw a crossover sweep (core.sweep.parse_sweep_step)
DECK_FIELDS = {"title", "description", "preset", "defaults", "steps"}
RECORDED_FIELDS = {"median_ms", "speedup", "device", "source", "statistic", "date", "size"}
# What a recorded figure may be: a blog's "mean of 10 runs" is a mean, never shown as a median.
STATISTICS = ("median", "mean", "min", "best")


class DeckError(ScenarioError):
    """A deck that cannot be presented: the file, the step (1-based) and the field are named."""

    def __init__(self, path: Path | str, step: int | None, field_name: str, message: str) -> None:
        self.step = step
        where = f"step {step}: {field_name}" if step is not None else field_name
        super().__init__(path, where.rstrip(": "), message)


@dataclass(frozen=True)
class RecordedFigure:
    """A figure measured elsewhere (a GPU box, a public post), shown when the step cannot run here."""

    median_s: float  # the figure, in seconds, whatever `statistic` it is
    device: str
    source: str = ""
    speedup: float | None = None
    statistic: str = "median"
    date: str = ""
    size: str = ""  # when the figure was taken at another size than the step's


@dataclass(frozen=True)
class DeckStep:
    title: str
    caption: str
    spec: RunSpec
    scenario_title: str
    notes: str = ""
    recorded: RecordedFigure | None = None
    sweep: Any = None  # a core.sweep.SweepStep: the step draws a crossover sweep instead of one figure

    @property
    def size_label(self) -> str:
        """The step's size as the tables write it ("4096×4096", "64² = 4,096 components")."""
        from gpuplay.core.workloads import get_workload

        try:
            return get_workload(self.spec.workload).size_label(dict(self.spec.params_items))
        except Exception:  # a workload without a size label: the raw parameters
            return ", ".join(f"{k}={v}" for k, v in self.spec.params_items)

    @property
    def section(self) -> tuple[str, tuple[tuple[str, Any], ...]]:
        """Steps of one section share a workload and size; the staircase restarts between sections."""
        return (self.spec.workload, baseline_spec(self.spec).params_items)


@dataclass(frozen=True)
class Deck:
    title: str
    description: str
    steps: tuple[DeckStep, ...]
    path: Path | None = None
    preset: str | None = None  # the preset that overrode every step's (a quick rehearsal), if any


def _check_type(value: Any, kinds: tuple[type, ...], path: Path, step: int | None, name: str) -> Any:
    ok = isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)
    if not ok:
        want = " or ".join("boolean" if k is bool else k.__name__ for k in kinds)
        raise DeckError(path, step, name, f"must be a {want}; got {type(value).__name__} {value!r}")
    return value


def _spec_fields(data: Mapping[str, Any], path: Path, step: int | None, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, kinds in SPEC_FIELD_TYPES.items():
        if key in data:
            out[key] = _check_type(data[key], kinds, path, step, prefix + key)
            if float in kinds:
                out[key] = float(out[key])
    return out


def _recorded(data: Any, path: Path, step: int) -> RecordedFigure:
    if not isinstance(data, dict):
        raise DeckError(path, step, "recorded", "must be a table (median_ms, device, source, speedup)")
    unknown = set(data) - RECORDED_FIELDS
    if unknown:
        raise DeckError(
            path,
            step,
            f"recorded.{sorted(unknown)[0]}",
            f"unknown field (known: {', '.join(sorted(RECORDED_FIELDS))})",
        )
    for key in ("median_ms", "device"):
        if key not in data:
            raise DeckError(path, step, f"recorded.{key}", "missing (required in a recorded figure)")
    median = _check_type(data["median_ms"], (int, float), path, step, "recorded.median_ms")
    if not math.isfinite(median) or median <= 0:
        raise DeckError(path, step, "recorded.median_ms", f"must be a positive number; got {median!r}")
    speedup = data.get("speedup")
    if speedup is not None:
        _check_type(speedup, (int, float), path, step, "recorded.speedup")
        if not math.isfinite(speedup) or speedup <= 0:
            raise DeckError(path, step, "recorded.speedup", f"must be a positive number; got {speedup!r}")
    statistic = _check_type(data.get("statistic", "median"), (str,), path, step, "recorded.statistic")
    if statistic not in STATISTICS:
        raise DeckError(
            path, step, "recorded.statistic", f"must be one of {', '.join(STATISTICS)}; got {statistic!r}"
        )
    return RecordedFigure(
        median_s=float(median) / 1e3,
        device=_check_type(data["device"], (str,), path, step, "recorded.device"),
        source=_check_type(data.get("source", ""), (str,), path, step, "recorded.source"),
        speedup=float(speedup) if speedup is not None else None,
        statistic=statistic,
        date=str(_check_type(data.get("date", ""), (str, _dt.date), path, step, "recorded.date")),
        size=_check_type(data.get("size", ""), (str,), path, step, "recorded.size"),
    )


def _paragraphs(text: str) -> str:
    """TOML multi-line strings reflowed: line breaks inside a paragraph become spaces."""
    paras = [" ".join(p.split()) for p in text.strip().split("\n\n")]
    return "\n".join(p for p in paras if p)


def _parse_step(
    raw: Any,
    n: int,
    path: Path,
    scenarios: ScenarioSet,
    defaults: Mapping[str, Any],
    deck_preset: str | None,
    preset_override: str | None,
) -> DeckStep:
    _check_step_fields(raw, n, path)
    sc = _step_scenario(raw["scenario"], n, path, scenarios)
    own_preset = raw.get("preset", deck_preset)
    params = _step_params(raw, n, path, sc, preset_override or own_preset)
    fields = {**defaults, **_spec_fields(raw, path, n)}
    for key, value in fields.items():  # each field alone first, so the error names it
        try:
            RunSpec.make(sc.workload, params, **{key: value})
        except (SpecError, TypeError) as exc:
            raise DeckError(path, n, key, str(exc)) from None
    spec = RunSpec.make(sc.workload, params, scenario=sc.name, **fields)
    recorded = _recorded(raw["recorded"], path, n) if "recorded" in raw else None
    if preset_override and preset_override != own_preset and recorded is not None and not recorded.size:
        recorded = None  # measured at the deck's own size, unnamed: not comparable at another
    return DeckStep(
        title=raw["title"],
        caption=_paragraphs(raw["caption"]),
        spec=spec,
        scenario_title=sc.title,
        notes=_paragraphs(raw.get("notes", "")),
        recorded=recorded,
        sweep=_step_sweep(raw, n, path, sc),
    )


def _check_step_fields(raw: Any, n: int, path: Path) -> None:
    """A step is a table of known fields, with its required strings."""
    if not isinstance(raw, dict):
        raise DeckError(path, n, "", f"must be a table ([[steps]]); got {type(raw).__name__}")
    unknown = set(raw) - STEP_FIELDS
    if unknown:
        raise DeckError(
            path, n, sorted(unknown)[0], f"unknown field (known: {', '.join(sorted(STEP_FIELDS))})"
        )
    for key in ("scenario", "title", "caption"):
        if key not in raw:
            raise DeckError(path, n, key, "missing (required)")
        _check_type(raw[key], (str,), path, n, key)
    for key in ("notes", "preset"):
        if key in raw:
            _check_type(raw[key], (str,), path, n, key)


def _step_scenario(name: str, n: int, path: Path, scenarios: ScenarioSet) -> Any:
    if name not in scenarios.scenarios:
        raise DeckError(
            path, n, "scenario", f"unknown scenario {name!r} (known: {', '.join(scenarios.scenarios)})"
        )
    return scenarios.scenarios[name]


def _step_params(raw: Mapping[str, Any], n: int, path: Path, sc: Any, preset: str | None) -> dict[str, Any]:
    """The scenario's preset, with the step's own `params` on top, resolved by its workload."""
    try:
        params = sc.preset_params(preset)
    except ValueError as exc:
        raise DeckError(path, n, "preset", str(exc)) from None
    extra = raw.get("params", {})
    if not isinstance(extra, dict):
        raise DeckError(path, n, "params", "must be a table")
    from gpuplay.core.workloads import get_workload

    try:
        return dict(get_workload(sc.workload).resolve({**params, **extra}))
    except ValueError as exc:
        raise DeckError(path, n, "params", str(exc)) from None


def _step_sweep(raw: Mapping[str, Any], n: int, path: Path, sc: Any) -> Any:
    if "sweep" not in raw:
        return None
    from gpuplay.core.studies.sweep import SweepError, parse_sweep_step

    try:
        return parse_sweep_step(raw["sweep"], sc)
    except SweepError as exc:
        raise DeckError(path, n, "sweep", str(exc)) from None


def parse_deck(
    text: str, scenarios: ScenarioSet, path: Path | str = "<string>", preset: str | None = None
) -> Deck:
    """Validate one deck document; `preset` overrides every step's preset (e.g. quick rehearsals)."""
    path = Path(path)
    try:
        data = toml_loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise DeckError(path, None, "", f"not valid TOML ({exc})") from None
    unknown = set(data) - DECK_FIELDS
    if unknown:
        raise DeckError(
            path, None, sorted(unknown)[0], f"unknown field (known: {', '.join(sorted(DECK_FIELDS))})"
        )
    title = _check_type(data.get("title", path.stem), (str,), path, None, "title")
    description = _check_type(data.get("description", ""), (str,), path, None, "description")
    deck_preset = data.get("preset")
    if deck_preset is not None:
        _check_type(deck_preset, (str,), path, None, "preset")
    defaults_raw = data.get("defaults", {})
    if not isinstance(defaults_raw, dict):
        raise DeckError(path, None, "defaults", "must be a table of RunSpec fields")
    unknown = set(defaults_raw) - set(SPEC_FIELD_TYPES)
    if unknown:
        raise DeckError(
            path,
            None,
            f"defaults.{sorted(unknown)[0]}",
            f"unknown field (known: {', '.join(SPEC_FIELD_TYPES)})",
        )
    defaults = _spec_fields(defaults_raw, path, None, "defaults.")
    steps_raw = data.get("steps")
    if not isinstance(steps_raw, list) or not steps_raw:
        raise DeckError(path, None, "steps", "missing: a deck needs at least one [[steps]] table")
    steps = tuple(
        _parse_step(raw, i, path, scenarios, defaults, deck_preset, preset)
        for i, raw in enumerate(steps_raw, 1)
    )
    return Deck(title, description, steps, path, preset)


def load_deck(path: Path | str, scenarios: ScenarioSet, preset: str | None = None) -> Deck:
    path = Path(path).expanduser()
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise DeckError(path, None, "", f"larger than {MAX_FILE_BYTES // 1024} KiB; not a deck")
        text = read_text_file(path)  # a FIFO or a folder is refused, never waited on
    except FileNotFoundError:
        shipped = ", ".join(sorted(p.stem for p in builtin_decks_dir().glob("*.toml")))
        raise DeckError(path, None, "", f"no such deck file (shipped decks: {shipped})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DeckError(path, None, "", f"cannot read ({getattr(exc, 'strerror', None) or exc})") from None
    return parse_deck(text, scenarios, path, preset)


def builtin_decks_dir() -> Path:
    from gpuplay.core.catalogue.scenarios import builtin_dir

    return builtin_dir() / "decks"


def resolve_deck_path(name: str) -> Path:
    """A path as given, or the name of a shipped deck ('numpy-to-gpu')."""
    given = Path(name).expanduser()
    if given.exists() or given.suffix == ".toml" or "/" in name:
        return given
    return builtin_decks_dir() / f"{name}.toml"


def needed_specs(deck: Deck) -> list[RunSpec]:
    """Every step's spec, each preceded by its NumPy-CPU baseline once (the speedups need them)."""
    ordered: list[RunSpec] = []
    for step in deck.steps:
        if step.sweep is not None:
            continue  # a sweep step measures live only (gpuplay sweep --format json records one)
        for spec in (baseline_spec(step.spec), step.spec):
            if spec not in ordered:
                ordered.append(spec)
    return ordered


def caption_text(step: DeckStep, threads: int | None, cores: int) -> str:
    """The caption with the conditions it names filled in from the run, never asserted in advance.

    {threads}: the threads the step runs with; {cores}: the host's cores; {size}: the step's size.
    Only these names are replaced (no str.format: a stray brace in a caption stays a brace).
    """
    if threads is None:
        threads_word = "the libraries' default threads"
    else:
        threads_word = f"{threads} thread" + ("s" if threads != 1 else "")
    size = step.size_label
    return (
        step.caption.replace("{threads}", threads_word)
        .replace("{cores}", f"{cores} core" + ("s" if cores != 1 else ""))
        .replace("{size}", size)
    )


# -- where a talk was: resume after a restart ----------------------------------------
# Set by `gpuplay serve` for a talk in a browser tab: that tab's own id (32 hex digits, kept in the
# tab's sessionStorage). Its saved step is its own: a new tab or browser starts at the first step
# instead of wherever another session last was; a reload or reconnect of the same tab goes on.
TALK_SESSION_ENV = "GPUPLAY_TALK_SESSION"


def _talk_session() -> str:
    value = os.environ.get(TALK_SESSION_ENV, "")
    return value if len(value) == 32 and all(c in "0123456789abcdef" for c in value) else ""


def _position_file(deck: Deck) -> Path:
    import hashlib

    from gpuplay.core.storage.config import state_dir

    where = str(deck.path.resolve()) if deck.path is not None else deck.title
    digest = hashlib.sha256(where.encode()).hexdigest()[:12]
    stem = "".join(c if c.isalnum() or c in "-_" else "-" for c in (deck.path.stem if deck.path else "deck"))
    tab = _talk_session()
    return (
        state_dir() / "talks" / (f"{stem[:40]}-{digest}-{tab}.json" if tab else f"{stem[:40]}-{digest}.json")
    )


def save_position(deck: Deck, index: int) -> None:
    """Remember the step a talk is on (best effort: a read-only state folder never stops a talk)."""
    path = _position_file(deck)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"step": index + 1, "title": deck.steps[index].title}), encoding="utf-8")
        tmp.replace(path)
    except OSError:
        pass


def saved_position(deck: Deck) -> int:
    """The 0-based step saved for `deck`, clamped to its steps; 0 when nothing usable is saved."""
    try:
        data = json.loads(read_text_file(_position_file(deck)))
        step = int(data["step"]) - 1
    except (OSError, ValueError, KeyError, TypeError):
        return 0
    return min(max(step, 0), len(deck.steps) - 1)


# -- recordings -------------------------------------------------------------------
@dataclass
class Recording:
    """Results of a rehearsal, and where and when they were measured."""

    device: str
    date: str
    results: dict[RunSpec, RunResult]
    environment: dict[str, Any] = field(default_factory=dict)
    deck_title: str = ""
    path: Path | None = None
    preset: str | None = None  # the rehearsal's --preset (None: the deck's own presets)
    step_specs: tuple[RunSpec | None, ...] = ()  # the spec each step was rehearsed with, in order
    missing: tuple[str, ...] = ()  # what an older recording does not carry

    @property
    def label(self) -> str:
        return f"recorded on {self.device}, {self.date}"

    def get(self, spec: RunSpec) -> RunResult | None:
        return self.results.get(spec)

    def spec_for(self, index: int, spec: RunSpec) -> RunSpec:
        """The spec step `index` was rehearsed with: its recorded spec, else the deck's own.

        A rehearsal at another preset (or an edited deck) measured other sizes than the deck
        names today; the recording's own step list says which, so replay finds its figures.
        """
        if spec in self.results or index >= len(self.step_specs):
            return spec
        recorded = self.step_specs[index]
        return recorded if recorded is not None and recorded.workload == spec.workload else spec

    def baseline_for(self, index: int, spec: RunSpec) -> RunSpec:
        return baseline_spec(self.spec_for(index, spec))


class RecordingError(ValueError):
    def __init__(self, path: Path | str, message: str) -> None:
        self.path = Path(path)
        super().__init__(f"{self.path}: {message}")


def recording_device(results: Sequence[RunResult], cpu: str) -> str:
    """The GPU the deck's GPU steps ran on, or the host's CPU when none did."""
    for r in results:
        name = r.conditions.get("device_name")
        if r.status == "ok" and r.spec.device.startswith("cuda") and name:
            return str(name)
    return cpu


def recording_json(deck: Deck, results: Sequence[RunResult], now: _dt.datetime | None = None) -> str:
    """The rehearsal as JSON: results, where and when, the preset and each step's exact spec."""
    from gpuplay.core.reports import report

    env = report.environment()
    stamp = (now or _dt.datetime.now().astimezone()).strftime("%Y-%m-%d %H:%M %Z").strip()
    rows: list[Row] = attach_baselines(list(results))
    steps = [
        {
            "title": s.title,
            "label": s.spec.label(),
            "params": dict(s.spec.params_items),
            "spec": s.spec.to_dict(),
        }
        for s in deck.steps
    ]
    return report.to_json(
        rows,
        format=RECORDING_FORMAT,
        source="gpuplay demo --rehearse",
        deck=deck.title,
        deck_file=deck.path.name if deck.path else "",
        recorded={"device": recording_device(results, str(env.get("cpu", "?"))), "date": stamp},
        preset=deck.preset,
        steps=steps,
    )


def load_recording(path: Path | str) -> Recording:
    path = Path(path).expanduser()
    try:
        doc = json_loads(read_text_file(path))
    except FileNotFoundError:
        raise RecordingError(
            path, "no such file (record one with `gpuplay demo DECK --rehearse --out FILE`)"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RecordingError(path, f"cannot read ({getattr(exc, 'strerror', None) or exc})") from None
    except json.JSONDecodeError as exc:
        raise RecordingError(path, f"not JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != RECORDING_FORMAT:
        raise RecordingError(path, f"not a gpuplay deck recording (expected format {RECORDING_FORMAT!r})")
    rec = doc.get("recorded") or {}
    results: dict[RunSpec, RunResult] = {}
    for i, item in enumerate(doc.get("results") or [], 1):
        try:
            r = RunResult.from_dict(item)
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise RecordingError(path, f"result {i} is malformed ({type(exc).__name__}: {exc})") from None
        results[r.spec] = r
    step_specs, missing = _recorded_steps(doc)
    preset = doc.get("preset")
    return Recording(
        device=str(rec.get("device") or "an unknown machine"),
        date=str(rec.get("date") or "an unknown date"),
        results=results,
        environment=dict(doc.get("environment") or {}),
        deck_title=str(doc.get("deck") or ""),
        path=path,
        preset=preset if isinstance(preset, str) and preset else None,
        step_specs=step_specs,
        missing=missing,
    )


def _recorded_steps(doc: Mapping[str, Any]) -> tuple[tuple[RunSpec | None, ...], tuple[str, ...]]:
    """Each step's recorded spec, and what an older recording lacks (said, never guessed at)."""
    missing = []
    if "preset" not in doc:
        missing.append("its preset (recorded before recordings carried one)")
    steps = doc.get("steps")
    specs: list[RunSpec | None] = []
    if not isinstance(steps, list):
        missing.append("its steps' parameters (figures are looked up at the deck's sizes)")
        return (), tuple(missing)
    for item in steps:
        try:
            specs.append(RunSpec.from_dict(item["spec"]))
        except (KeyError, TypeError, ValueError, SpecError):
            specs.append(None)
    if None in specs:
        missing.append("some steps' parameters")
    return tuple(specs), tuple(missing)


def speedup_of(result: RunResult | None, baseline: RunResult | None) -> float | None:
    if result is not None and isinstance(result.speedup, dict):  # measured in pairs: its own figure
        point = result.speedup.get("point")
        if isinstance(point, int | float) and 0 < point < float("inf"):
            return float(point)
    if result is None or baseline is None or not result.median or not baseline.median:
        return None
    if is_baseline(result.spec):
        return 1.0
    return baseline.median / result.median
