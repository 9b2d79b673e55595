"""A number in block digits as large as the space it has: read from the back row of a room.

Textual's Digits is three rows tall whatever the screen; on a projector that is a thumbnail.
Here each character is a 3×5 pixel glyph drawn with half blocks (two pixels per text row, one
column per pixel, so pixels are about square), scaled by the largest whole factor that fits
both the widget's width and its height. At scale 1 it is as small as Digits; full screen on a
1080p terminal it is tens of rows tall.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.geometry import Size
from textual.widget import Widget

GLYPHS: dict[str, tuple[str, ...]] = {
    "0": ("###", "#.#", "#.#", "#.#", "###"),
    "1": (".#.", "##.", ".#.", ".#.", "###"),
    "2": ("###", "..#", "###", "#..", "###"),
    "3": ("###", "..#", ".##", "..#", "###"),
    "4": ("#.#", "#.#", "###", "..#", "..#"),
    "5": ("###", "#..", "###", "..#", "###"),
    "6": ("###", "#..", "###", "#.#", "###"),
    "7": ("###", "..#", "..#", ".#.", ".#."),
    "8": ("###", "#.#", "###", "#.#", "###"),
    "9": ("###", "#.#", "###", "..#", "###"),
    "x": ("...", "#.#", ".#.", "#.#", "..."),
    ".": (".", ".", ".", ".", "#"),
    ",": (".", ".", ".", "#", "#"),
    "-": ("...", "...", "###", "...", "..."),
    "?": ("###", "..#", ".##", "...", ".#."),
    "~": ("....", ".#..", "#.##", "...#", "...."),  # the '~' of a figure not to read as printed
    " ": ("..", "..", "..", "..", ".."),
}
GLYPH_ROWS = 5
MAX_SCALE = 24


def pixels(text: str) -> list[str]:
    """The text as rows of '#'/'.' pixels, one blank column between characters."""
    glyphs = [GLYPHS.get(ch, GLYPHS["?"]) for ch in text.replace("×", "x")]
    return [".".join(g[row] for g in glyphs) for row in range(GLYPH_ROWS)] if glyphs else [""] * GLYPH_ROWS


def best_scale(text: str, width: int, height: int) -> int:
    """The largest whole scale at which `text` fits `width` columns and `height` rows (at least 1)."""
    cols = len(pixels(text)[0])
    if cols == 0:
        return 1
    scale = 1
    while scale < MAX_SCALE and cols * (scale + 1) <= width and _rows(scale + 1) <= height:
        scale += 1
    return scale


def _rows(scale: int) -> int:
    return -(-GLYPH_ROWS * scale // 2)  # two pixel rows per text row


def render_lines(text: str, scale: int) -> list[str]:
    """The block-character lines of `text` at `scale`."""
    grid = [
        "".join(ch * scale for ch in row) for row in pixels(text) for _ in range(scale)
    ]  # each pixel becomes scale × scale
    if len(grid) % 2:
        grid.append("." * len(grid[0]))
    lines = []
    for top, bottom in zip(grid[::2], grid[1::2]):
        lines.append(
            "".join(
                "█" if a == "#" and b == "#" else "▀" if a == "#" else "▄" if b == "#" else " "
                for a, b in zip(top, bottom)
            )
        )
    return lines


class BigNumber(Widget):
    """`value` in block digits, scaled to fill the widget; the colour is the widget's own."""

    DEFAULT_CSS = "BigNumber { height: 1fr; min-height: 3; width: 1fr; }"

    def __init__(self, value: str = "", **kw: Any) -> None:
        super().__init__(**kw)
        self.value = value

    def update(self, value: str) -> None:
        if value != self.value:
            self.value = value
            self.refresh()

    @property
    def scale(self) -> int:
        return best_scale(self.value, self.content_size.width, self.content_size.height)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return _rows(best_scale(self.value, width, max(3, viewport.height)))

    def render(self) -> Text:
        return Text("\n".join(render_lines(self.value, self.scale)), no_wrap=True, overflow="crop")
