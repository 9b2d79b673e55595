"""An app screenshot (Rich's SVG) as a PNG that looks like the terminal did.

    python scripts/svgpng.py screenshots/compare.svg screenshots/compare.png

Rich's SVG names Fira Code; without it cairosvg falls back to a proportional font and ignores
each run's textLength, so block and braille runs came out wider than their cells: bars and a
roofline's dotted roof appeared to run past the chart's frame (they did not, in a terminal).
Here every character is placed in its own cell, in DejaVu Sans Mono (braille, which it lacks,
in DejaVu Sans).
"""

from __future__ import annotations

import html
import re
import sys

TEXT = re.compile(r'<text ([^>]*?)x="([\d.]+)"([^>]*?)textLength="([\d.]+)"([^>]*)>([^<]*)</text>')


def _cells(m: re.Match[str]) -> str:
    before, x, middle, length, after, content = m.groups()
    plain = html.unescape(content)
    if len(plain) <= 1:
        return m.group(0)
    w = float(length) / len(plain)
    xs = " ".join(f"{float(x) + i * w:.1f}" for i in range(len(plain)))
    font = ' style="font-family: DejaVu Sans"' if any("\u2800" <= ch <= "\u28ff" for ch in plain) else ""
    return f'<text {before}x="{xs}"{middle}{after}{font}>{content}</text>'


def svg_to_png(svg: str, out: str, width: int = 1600) -> None:
    import cairosvg

    svg = svg.replace("font-family: Fira Code, monospace;", "font-family: DejaVu Sans Mono, monospace;")
    cairosvg.svg2png(bytestring=TEXT.sub(_cells, svg).encode(), write_to=out, output_width=width)


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as f:
        svg_to_png(f.read(), sys.argv[2])
