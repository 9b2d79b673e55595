"""Cold-cache steps: a buffer larger than the last-level cache, written between steps.

A memory-bound step whose data fits in the L2 (50 MB on an H100) or a CPU's L3 is
otherwise timed cache-resident, faster than the same step in a real program whose
data was evicted meanwhile. triton's `do_bench` zeroes a 256 MB buffer before each
timed call for this reason; gpuplay does the same, outside the timed interval
(before the start event is recorded, or before the host timer starts).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gpuplay.core.process.lazynumpy import lazy_numpy

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_numpy(globals())


MIB = 2**20
GPU_FLUSH_BYTES = 256 * MIB  # triton.testing.do_bench's buffer
HOST_FLUSH_MIN_BYTES = 64 * MIB


@dataclass(frozen=True)
class CacheFlusher:
    flush: Callable[[], object]
    nbytes: int
    cache: str  # the cache being flushed, in words: "L2 50 MiB", "L3 32 MiB"
    how: str = "written"  # what is done to the buffer: "read", "zeroed"

    def __call__(self) -> None:
        self.flush()

    def describe(self) -> str:
        return f"a {self.nbytes / MIB:.0f} MiB buffer {self.how} (larger than the {self.cache})"


def _size_bytes(text: str) -> int | None:
    text = text.strip().upper()
    scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
    digits = text[:-1] if text[-1:] in "KMG" else text
    return int(digits) * scale if digits.isdigit() else None


def last_level_cache(root: Path = Path("/sys/devices/system/cpu/cpu0/cache")) -> tuple[int, int] | None:
    """(level, bytes) of the CPU's last-level data/unified cache, from sysfs; None if unknown."""
    best: tuple[int, int] | None = None
    try:
        entries = sorted(root.glob("index*"))
    except OSError:
        return None
    for entry in entries:
        try:
            if (entry / "type").read_text().strip() == "Instruction":
                continue
            level = int((entry / "level").read_text().strip())
            size = _size_bytes((entry / "size").read_text())
        except (OSError, ValueError):
            continue
        if size and (best is None or level > best[0]):
            best = (level, size)
    return best


def host_flusher() -> CacheFlusher:
    """Read every line of a buffer twice the LLC (at least 64 MiB): the step's data is evicted.

    A read, not a write: a fill may use non-temporal stores that bypass the cache and evict
    nothing, and a read-modify-write leaves the cache full of dirty lines whose write-back
    the next step would pay for (measured: a 128 MiB copy read 26 % slower after one).
    Clean lines are evicted for free.
    """
    llc = last_level_cache()
    nbytes = max(HOST_FLUSH_MIN_BYTES, 2 * llc[1]) if llc else 4 * HOST_FLUSH_MIN_BYTES
    words = np.ones(nbytes // 8, dtype=np.int64)  # written once here, so its pages are real
    cache = f"L{llc[0]} {llc[1] / MIB:.0f} MiB" if llc else "last-level cache (size unknown)"
    return CacheFlusher(words.sum, nbytes, cache, "read")


def device_flush_bytes(l2_bytes: int | None) -> int:
    """triton's 256 MiB, or four L2s where a GPU's L2 is larger."""
    return max(GPU_FLUSH_BYTES, 4 * (l2_bytes or 0))
