"""Message sizes: `1K,1M,16M` and `1K:64M` parsed, swept in powers of two, printed back."""

from __future__ import annotations

import re

_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMG]?)(?:I?B)?\s*$", re.IGNORECASE)

DEFAULT_CPU = "1K:64M"  # bounded for the CPU: gloo moves data through host memory and TCP
DEFAULT_CUDA = "1K:1G"


class SizeError(ValueError):
    """A --sizes value that names no size."""


def parse_size(text: str) -> int:
    """'16M' → 16 MiB in bytes. K, M, G are binary (KiB, MiB, GiB), as in nccl-tests' -b/-e."""
    m = _SIZE.match(text)
    if not m:
        raise SizeError(f"{text.strip()!r} is not a size: write a number of bytes with K, M or G (e.g. 16M)")
    value = float(m.group(1)) * _UNITS[m.group(2).upper()]
    if value < 1 or value != int(value):
        raise SizeError(f"{text.strip()!r} is not a whole number of bytes (≥ 1)")
    return int(value)


def parse_sizes(text: str) -> list[int]:
    """'1K,1M,16M' → those sizes; 'A:B' → every power of two from A to B; mixed lists allowed.

    Returned sorted with duplicates removed.
    """
    out: set[int] = set()
    parts = [p for p in text.split(",") if p.strip()]
    if not parts:
        raise SizeError("no sizes given: write e.g. 1K,1M,16M or 1K:64M")
    for part in parts:
        if ":" in part:
            lo_s, _, hi_s = part.partition(":")
            lo, hi = parse_size(lo_s), parse_size(hi_s)
            if lo > hi:
                raise SizeError(f"{part.strip()!r}: the range runs from the smaller size to the larger")
            s = lo
            while s <= hi:
                out.add(s)
                s *= 2
        else:
            out.add(parse_size(part))
    return sorted(out)


def format_size(n: float) -> str:
    """Bytes as the shortest exact binary unit: 1024 → '1K', 16 MiB → '16M', 1000 → '1000'."""
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{int(n // scale)}{unit}"
    if n >= 1 << 20:
        return f"{n / (1 << 20):.3g}M"
    if n >= 1 << 10:
        return f"{n / (1 << 10):.3g}K"
    return str(int(n))
