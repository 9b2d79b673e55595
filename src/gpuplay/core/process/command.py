"""Whether this process is the `gpuplay` command: read before anything else is imported.

The command's entry (cli/__init__.py) asks first thing, to take Ctrl+C and closed streams in
hand before its ~0.3 s of imports; so this module imports nothing but `os`.
"""

from __future__ import annotations

import os


def is_gpuplay_command(argv: list[str]) -> bool:
    """This process is the `gpuplay` command (its script, or `python -m gpuplay`), not a program
    that imports the CLI (a notebook's magics, a test)."""
    if not argv:
        return False
    head, name = os.path.split(argv[0])
    return name in ("gpuplay", "gpuplay.exe", "gpuplay-script.py") or (
        name == "__main__.py" and os.path.basename(head) == "gpuplay"
    )
