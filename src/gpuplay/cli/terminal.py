"""The playground and the presenter draw on a terminal; without one they would spin unseen.

`gpuplay </dev/null | cat` once drew a frame and then used most of a core for ten minutes with
no output. A front end that needs a terminal checks for one first, and says what to type instead.
"""

from __future__ import annotations

import os
import sys

import click

# The commands that print, write files or serve without a terminal of their own.
HEADLESS = (
    "gpuplay run SCENARIO|FILE.py",
    "gpuplay compare",
    "gpuplay sweep",
    "gpuplay list",
    "gpuplay info",
    "gpuplay history",
    "gpuplay demo DECK --rehearse --out FILE",
    "gpuplay serve (the playground in a browser)",
)


def _is_terminal(stream: object) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if callable(isatty) else False
    except (OSError, ValueError):  # a closed stream
        return False


def require_terminal(what: str) -> None:
    """Exit 2 at once with the headless commands named, unless stdin and stdout are terminals.

    `gpuplay serve` starts the app under Textual's web driver (TEXTUAL_DRIVER), which talks over
    pipes by design: that is a terminal in a browser, so it passes.
    """
    if os.environ.get("TEXTUAL_DRIVER"):
        return
    missing = [
        name for name, stream in (("stdin", sys.stdin), ("stdout", sys.stdout)) if not _is_terminal(stream)
    ]
    if not missing:
        return
    click.echo(
        f"gpuplay: {what} needs a terminal, and {' and '.join(missing)} "
        f"{'is' if len(missing) == 1 else 'are'} not one.\n"
        "Without a terminal, use a headless command:\n" + "".join(f"  {line}\n" for line in HEADLESS),
        err=True,
        nl=False,
    )
    raise SystemExit(2)
