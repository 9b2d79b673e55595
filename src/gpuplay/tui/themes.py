"""High-contrast themes for projectors, registered on any gpuplay App (presenter or playground).

A washed-out projector turns Textual's default greys into nothing; these use pure black and
white with saturated accents, so every figure reads from the back of a room.
"""

from __future__ import annotations

from typing import Any

from textual.app import App
from textual.theme import Theme

PROJECTOR = Theme(
    name="projector",
    primary="#FFD400",
    secondary="#00E5FF",
    accent="#00E5FF",
    warning="#FFB000",
    error="#FF4040",
    success="#3CFF3C",
    foreground="#FFFFFF",
    background="#000000",
    surface="#000000",
    panel="#202020",
    boost="#FFFFFF10",
    dark=True,
    luminosity_spread=0.0,
    text_alpha=1.0,
    variables={
        "text-muted": "#E0E0E0",
        "footer-key-foreground": "#FFD400",
        "footer-background": "#000000",
        "footer-description-foreground": "#FFFFFF",
        "block-cursor-background": "#FFD400",
        "block-cursor-foreground": "#000000",
    },
)

PROJECTOR_LIGHT = Theme(
    name="projector-light",
    primary="#0030C0",
    secondary="#8000A0",
    accent="#8000A0",
    warning="#A05000",
    error="#C00000",
    success="#006000",
    foreground="#000000",
    background="#FFFFFF",
    surface="#FFFFFF",
    panel="#E8E8E8",
    dark=False,
    luminosity_spread=0.0,
    text_alpha=1.0,
    variables={"text-muted": "#202020", "footer-background": "#FFFFFF"},
)

THEMES = (PROJECTOR, PROJECTOR_LIGHT)


def register_themes(app: App[Any]) -> None:
    for theme in THEMES:
        app.register_theme(theme)


def theme_names() -> list[str]:
    """Every theme a user may pass to --theme: Textual's built-in ones and ours."""
    from textual.theme import BUILTIN_THEMES

    return [t.name for t in THEMES] + sorted(BUILTIN_THEMES)


def apply_theme(app: App[Any], name: str | None) -> None:
    """Register the projector themes and switch to `name` (None keeps the app's default)."""
    register_themes(app)
    if name:
        if name not in app.available_themes:
            raise ValueError(f"unknown theme {name!r} (known: {', '.join(theme_names())})")
        app.theme = name
