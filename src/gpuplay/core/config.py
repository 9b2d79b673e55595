"""User settings and where gpuplay keeps its files (platformdirs: XDG on Linux)."""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import platformdirs

from gpuplay.core.bounds import SAMPLE_INTERVAL_S, BoundsError, check_number
from gpuplay.core.safeload import toml_loads

APP = "gpuplay"


def config_dir() -> Path:
    return Path(os.environ.get("GPUPLAY_CONFIG_DIR") or platformdirs.user_config_dir(APP))


def state_dir() -> Path:
    return Path(os.environ.get("GPUPLAY_STATE_DIR") or platformdirs.user_state_dir(APP))


@dataclass
class Config:
    scenario_dirs: list[Path] = field(default_factory=list)
    code_files: list[Path] = field(default_factory=list)  # the user's own code files: trusted to run
    sample_interval: float = 0.5
    problems: list[str] = field(default_factory=list)  # what was wrong with the file, if anything


def load_config(path: Path | None = None) -> Config:
    """Read config.toml; a broken file gives defaults and a problem line, never an exception."""
    path = path or config_dir() / "config.toml"
    cfg = Config()
    if not path.exists():
        return cfg
    try:
        data = toml_loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        cfg.problems.append(f"{path}: not read ({exc}); using defaults")
        return cfg
    dirs = data.get("scenario_dirs", [])
    if isinstance(dirs, str):
        dirs = [dirs]
    if isinstance(dirs, list) and all(isinstance(d, str) for d in dirs):
        cfg.scenario_dirs = [Path(d).expanduser() for d in dirs]
    else:
        cfg.problems.append(f"{path}: scenario_dirs must be a list of paths; ignored")
    codes = data.get("code_files", [])
    if isinstance(codes, str):
        codes = [codes]
    if isinstance(codes, list) and all(isinstance(c, str) for c in codes):
        # A relative path is relative to config.toml's folder, not to wherever gpuplay starts.
        cfg.code_files = [path.parent / Path(c).expanduser() for c in codes]
    else:
        cfg.problems.append(f"{path}: code_files must be a list of paths to .py files; ignored")
    interval = data.get("sample_interval", cfg.sample_interval)
    try:
        # inf would freeze telemetry and 1e-300 spin a core: finite and bounded, like every number.
        cfg.sample_interval = float(check_number("sample_interval", interval, SAMPLE_INTERVAL_S))
    except BoundsError as exc:
        cfg.problems.append(f"{path}: {exc} (seconds); ignored")
    return cfg
