"""What the playground reads before its first frame: config.toml, the scenario folders, the
user's code files; and every problem found there, to show as warnings once it is on screen."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuplay.core.catalogue.scenarios import ScenarioSet, load_scenarios
from gpuplay.core.storage.config import export_dir as config_export_dir
from gpuplay.core.storage.config import load_config
from gpuplay.tui.commands import keymap_problems
from gpuplay.tui.usercode_view import code_scenarios


@dataclass
class Startup:
    keymap: dict[str, str]  # binding id -> key, from config.toml's [keymap]
    scenario_set: ScenarioSet  # the user's code files first
    code_paths: list[Path]  # the user's code files that load
    problems: list[str]
    sample_interval: float  # telemetry while measuring (seconds)
    export_dir: Path


def load_startup(
    scenario_dirs: Sequence[Path],
    code_files: Sequence[Path],
    bindings: Sequence[Any],
    export_dir: Path | None,
) -> Startup:
    cfg = load_config()
    keymap, keymap_warnings = keymap_problems(cfg.keymap, bindings)
    scenario_set = load_scenarios([*cfg.scenario_dirs, *scenario_dirs])
    code_paths, code_warnings = code_scenarios(scenario_set, [*code_files, *cfg.code_files])
    problems = [*cfg.problems, *keymap_warnings, *code_warnings]
    return Startup(
        keymap, scenario_set, code_paths, problems, cfg.sample_interval, export_dir or config_export_dir()
    )
