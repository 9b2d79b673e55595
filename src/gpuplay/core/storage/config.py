"""User settings and where gpuplay keeps its files (platformdirs: XDG on Linux)."""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

try:
    import platformdirs
except ImportError:  # without it: the XDG locations, spelled out (right on Linux, usable elsewhere)
    platformdirs = None  # type: ignore[assignment]

from gpuplay.core.storage.bounds import SAMPLE_INTERVAL_S, BoundsError, check_number
from gpuplay.core.storage.safeload import read_text_file, toml_loads

APP = "gpuplay"


def _xdg(variable: str, default: str) -> str:
    return os.path.join(os.environ.get(variable) or os.path.expanduser(default), APP)


def config_dir() -> Path:
    if os.environ.get("GPUPLAY_CONFIG_DIR"):
        return Path(os.environ["GPUPLAY_CONFIG_DIR"])
    if platformdirs is None:
        return Path(_xdg("XDG_CONFIG_HOME", "~/.config"))
    return Path(platformdirs.user_config_dir(APP))


def state_dir() -> Path:
    if os.environ.get("GPUPLAY_STATE_DIR"):
        return Path(os.environ["GPUPLAY_STATE_DIR"])
    if platformdirs is None:
        return Path(_xdg("XDG_STATE_HOME", "~/.local/state"))
    return Path(platformdirs.user_state_dir(APP))


def export_dir() -> Path:
    """Where the playground's exports and screenshots go: GPUPLAY_EXPORT_DIR, else a gpuplay
    folder in the user's documents (not the current directory, often a repository)."""
    return Path(os.environ.get("GPUPLAY_EXPORT_DIR") or Path(platformdirs.user_documents_dir()) / APP)


@dataclass
class Config:
    scenario_dirs: list[Path] = field(default_factory=list)
    code_files: list[Path] = field(default_factory=list)  # the user's own code files: trusted to run
    sample_interval: float = 0.5
    problems: list[str] = field(default_factory=list)  # what was wrong with the file, if anything
    keymap: dict[str, str] = field(default_factory=dict)  # binding id -> keys ("ctrl+b" or "b,B")


def load_config(path: Path | None = None) -> Config:
    """Read config.toml; a broken file gives defaults and a problem line, never an exception."""
    path = path or config_dir() / "config.toml"
    cfg = Config()
    if not path.exists():
        return cfg
    try:
        data = toml_loads(read_text_file(path))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        cfg.problems.append(f"{path}: not read ({getattr(exc, 'strerror', None) or exc}); using defaults")
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
    cfg.keymap = _keymap(data.get("keymap", {}), path, cfg.problems)
    return cfg


# A key as Textual names it: one printable character, or a name with modifiers (ctrl+shift+f1).
_KEY = re.compile(r"(?:(?:ctrl|shift|alt|super|meta|hyper)\+)*(?:[a-z0-9_]+|[^\s,+])", re.IGNORECASE)


def _keymap(table: object, path: Path, problems: list[str]) -> dict[str, str]:
    """[keymap]: binding id = "keys" (comma-separated). A bad entry is named and skipped;
    whether an id exists is for the app to say (it knows its bindings)."""
    if not isinstance(table, dict):
        problems.append(f'{path}: [keymap] must be a table of binding id = "key"; ignored')
        return {}
    good: dict[str, str] = {}
    bad: list[str] = []
    for name, keys in table.items():
        parts = [k.strip() for k in keys.split(",")] if isinstance(keys, str) else []
        if not parts or not all(_KEY.fullmatch(k) for k in parts):
            bad.append(f"{str(name)[:40]} = {repr(keys)[:40]}")
            continue
        good[str(name)] = ",".join(parts)
    if len(bad) == 1:
        problems.append(f'{path}: [keymap] {bad[0]} is not a key such as "b" or "ctrl+b"; ignored')
    elif bad:  # one line however many (a flood of bad entries must not be a flood of warnings)
        more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
        problems.append(f'{path}: [keymap] {len(bad)} entries are not a key such as "b" or "ctrl+b" '
                        f"({'; '.join(bad[:5])}{more}); ignored")  # fmt: skip
    return good
