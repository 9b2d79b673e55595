"""The live levers' key bindings, generated from core/catalogue/levers.py (ids = lever names, for [keymap])."""

from __future__ import annotations

from textual.binding import Binding

from gpuplay.core.catalogue import levers


def lever_bindings() -> list[Binding]:
    """One binding per live lever: its key runs `cycle('<lever>')`; the id is the lever's name."""
    return [
        Binding(lv.key, f"cycle('{lv.name}')", lv.label, show=lv.shown, id=lv.name)
        for lv in levers.live_levers()
    ]
