"""The host allocator's two modes: detected, the headline chosen between them, the other said.

glibc serves a large allocation either from its heap (the pages stay mapped after a free and
the next step reuses them: warm, "pages reused") or by mmap and munmap, or from a heap whose top
it trims (every step faults its output in page by page: cold, "pages returned"). Which one a
process is in depends on what it allocated and freed before: glibc raises its mmap threshold
after the first large free, trims the heap's top when enough of it is free, and a live block
above the step's memory pins the top. gpuplay's engine after warm-up usually reads warm; a fresh
script often reads cold, several times slower for an element-wise step.

`alloc=auto` (the default): where the cold probe faults enough more than the timed loop for the
mode to matter, or the timed steps fault enough themselves, a fresh process's plain loop times
the steps as a user's own script does (runner/plainloop.py). Where its median step faults like
the engine's, the engine's loop is the headline; where not, the fresh loop's times are, and the
engine's are kept beside them by name (`alloc_other`). `warm` and `cold` time that mode alone in
the engine. Cold mode returns the freed pages to the OS between steps (malloc_trim(0), outside
the timed interval).
"""

from __future__ import annotations

import ctypes
import functools
import time
from collections.abc import Callable
from typing import Any

from gpuplay.core.backends.base import StepTimer

ALLOC_MODES = ("auto", "warm", "cold")
# What the two modes are called beside a figure.
MODE_NAMES = {"warm": "pages reused", "cold": "pages returned"}
# What a first-touch page fault costs at least (the fault and zeroing 4 KiB): the elementwise 4M
# NumPy step read 13 ms slower for 1,499 more faults per step (8.7 µs each on the loaded 2-core
# machine); 2 µs keeps a 1024² matmul (~1,000 faults, ~1 % of its step) out.
FAULT_COST_S = 2e-6
# ~4 MiB of 4 KiB pages faulted in per step: worth a word beside the figure.
FAULTS_NOTE_THRESHOLD = 1000
# 1 MiB of pages per step between two loops (or faulted by the steps themselves), costing a twentieth
# of the step: worth asking a fresh process. Heat NumPy 512² × 100 faulted 992 pages a step in the
# engine and none in fresh plain loops, and read 1.06-1.10× their median in six rounds under the
# note's 1,000.
FAULTS_DIFFER_PAGES = 256
FLIP_RATIO = 1.2  # a cold mode this much slower is worth saying
# Two fresh processes' plain loops whose medians are farther apart than this are not one figure:
# the headline is then the middle of FRESH_VOTES loops, their range beside it. Heat torch 512² ×
# 100 read 19.5-74 ms in 32 fresh processes of the same script on the 2-core machine (0 to 37,000
# pages faulted per step: glibc's heap state, seeded by the hash seed, ASLR and the thread pool's
# timing, drifts within a process too); elementwise torch 4M, 4.6-5.9 ms with no faults at all.
SPREAD_RATIO = 1.10
# Fresh loops asked at most before a fresh loop replaces the engine's as the headline: two that
# agree, or a third to decide (runner/measure.py).
FRESH_VOTES = 3
# The probe's figure is the median of this many steps, each on memory just handed back to the OS
# (malloc_trim before it), so each faults its output in as a fresh process's step does. Three
# steps give a median robust to one outlier (as five do): the figure is a
# ratio read against FLIP_RATIO, and two fewer steps are ~25 ms of a 1024² matmul run.
PROBE_STEPS = 3
PROBE_BUDGET_S = 1.0

try:  # page faults, a diagnostic of allocator behaviour (Unix only)
    import resource

    def minor_faults() -> int | None:
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
except ImportError:  # pragma: no cover - Windows

    def minor_faults() -> int | None:
        return None


@functools.lru_cache(maxsize=1)
def page_returner() -> Callable[[], Any] | None:
    """glibc's malloc_trim(0): free heap pages go back to the OS. None off glibc.

    Looked up in the symbols the process already has (dlopen(NULL), as threadpoolctl does), not
    through ctypes.util.find_library, which runs `ldconfig -p` in a child process: ~8 ms in the
    middle of a run on the 2-core machine."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError, TypeError):  # TypeError: no dlopen(NULL) (Windows)
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return lambda: trim(0)


def between_steps(mode: str) -> Callable[[], Any] | None:
    """What the timed loop calls between steps (outside the interval) for `mode`."""
    return page_returner() if mode == "cold" else None


def cold_probe(
    step: Callable[[], Any],
    timer: StepTimer,
    warm_median: float,
    keep_last: Callable[[Any], object] | None = None,
) -> dict[str, Any] | None:
    """A few steps in the cold mode after a warm run: their median and faults per step.

    Bounded by PROBE_STEPS and PROBE_BUDGET_S; None where pages cannot be returned. `keep_last`
    is handed the last step's output (the run's check reads it instead of calling the step once
    more); every earlier output is dropped at once, as the timed loop drops its own, so each
    probe step but the last starts with its predecessor's memory returned to the OS.
    """
    trim = page_returner()
    if trim is None or warm_median <= 0:
        return None
    count = max(2, min(PROBE_STEPS, int(PROBE_BUDGET_S / warm_median)))
    times = []
    faults = 0
    deadline = time.perf_counter() + 2 * PROBE_BUDGET_S
    out: Any = None
    for i in range(count):
        trim()
        f0 = minor_faults()
        dt, out = timer(step)
        times.append(dt)
        f1 = minor_faults()
        faults += (f1 - f0) if f0 is not None and f1 is not None else 0
        last = i == count - 1 or time.perf_counter() > deadline
        if last:
            break
        out = None  # dropped before the next trim, as the timed loop drops each output
    if keep_last is not None:
        keep_last(out)
    del out
    times.sort()
    cold = times[len(times) // 2]
    return {"cold_median_s": cold, "ratio": cold / warm_median, "cold_faults_per_step": faults / len(times),
            "steps": len(times)}  # fmt: skip


def allocation_note(mode: str, faults_per_step: float, probe: dict[str, Any] | None) -> str | None:
    """The words beside the figure: which mode was timed and how far the other one is."""
    if mode == "cold":
        return (
            f"cold allocation: pages returned to the OS between steps, {faults_per_step:,.0f} page faults "
            "per step (a fresh process's worst case; --alloc warm times reused pages)"
        )
    ratio = probe.get("ratio") if probe else None
    if faults_per_step >= FAULTS_NOTE_THRESHOLD:
        far = f"; a fresh process may read up to {ratio:.1f}× slower" if ratio and ratio >= FLIP_RATIO else ""
        return (
            f"allocation-bound: {faults_per_step:,.0f} page faults per step (the allocator gave memory back "
            f"and the step faulted it in again){far}"
        )
    if ratio is not None and ratio >= FLIP_RATIO:
        return (
            f"allocation mode could flip: this run reused freed pages ({faults_per_step:,.0f} faults per step); "
            f"with pages returned each step, as a fresh process can run, it read {ratio:.1f}× slower "
            "(--alloc cold times that mode)"
        )
    return None


def faults_differ(faults_a: float, faults_b: float, median_s: float) -> bool:
    """Whether two loops' page faults per step differ enough to matter: FAULTS_DIFFER_PAGES
    pages or more, costing a twentieth of the step at FAULT_COST_S each."""
    extra = abs(faults_a - faults_b)
    return extra >= FAULTS_DIFFER_PAGES and extra * FAULT_COST_S >= 0.05 * median_s


def modes_differ(probe: dict[str, Any], faults_per_step: float, median_s: float) -> bool:
    """Whether the mode matters: the cold probe faulted FAULTS_DIFFER_PAGES more pages per step
    than the timed loop, enough to cost a twentieth of the step at FAULT_COST_S each. Read from the
    fault counts, not the probe's time ratio: on the 2-core machine shared with 8 other processes
    the ratio of three probe steps read 1.03 for elementwise torch 4M (11,718 more faults per
    step) and 1.4 for a 1024² torch matmul (~1,000 more, 1 % of its step)."""
    cold = float(probe.get("cold_faults_per_step") or 0.0)
    return cold > faults_per_step and faults_differ(cold, faults_per_step, median_s)


def modes_far_apart(probe: dict[str, Any] | None) -> bool:
    """Whether the cold probe read FLIP_RATIO or more slower than the timed loop: the two modes are
    then two figures, and which one a fresh process settles in is a draw. fft2d torch 1024² read
    1.9-2.1 ms or 6.1-6.9 ms a step in fresh processes of one 14-line script (numpy and torch
    imported, nothing else): 22 of 38 of them in the slower mode; gpuplay's own child met it in 5
    of 16 interleaved with them."""
    return probe is not None and float(probe.get("ratio") or 0.0) >= FLIP_RATIO


def met_both_modes(plain: dict[str, Any] | None, probe: dict[str, Any], faults_per_step: float) -> bool:
    """Whether a fresh loop whose median step met the engine's mode spent a step in the other: its
    steps faulted, in all, at least half a cold step's extra pages. Such a process could have
    settled either way (fft2d torch 1024²: 8,190-12,267 pages over ~470 steps, 2-3 of them cold,
    4,064 a cold step; elementwise NumPy 4M: 333 pages over 128 steps, matmul NumPy 1024²: none)."""
    if plain is None or not plain.get("steps"):
        return False
    extra = float(probe.get("cold_faults_per_step") or 0.0) - faults_per_step
    total = float(plain.get("mean_faults_per_step") or 0.0) * int(plain["steps"])
    return extra > 0 and total >= extra / 2


def allocation_bound(faults_per_step: float, median_s: float) -> bool:
    """Whether the timed steps themselves fault enough pages to matter: a step that allocates
    inside itself (heat: 100 stencil iterations, each with its temporaries) meets the process's
    trim and mmap thresholds on every iteration, which no page return between steps reproduces."""
    return faults_differ(faults_per_step, 0.0, median_s)


def fresh_mode(plain: dict[str, Any] | None, faults_per_step: float, median_s: float) -> str | None:
    """How a fresh process's plain loop allocates beside this process's timed loop, read from its
    median step's page faults: 'same', 'cold' (it faults more: pages returned and faulted in
    again), 'warm' (fewer); None where it could not be asked."""
    if plain is None:
        return None
    theirs = float(plain["faults_per_step"])
    if not faults_differ(theirs, faults_per_step, median_s):
        return "same"
    return "cold" if theirs > faults_per_step else "warm"


def other_mode(
    mode: str, samples: list[float] | None, faults_per_step: float,
    median_s: float | None = None, steps: int | None = None,
) -> dict[str, Any]:  # fmt: skip
    """The mode that is not the headline: its name, median and faults per step."""
    if samples:
        ordered = sorted(samples)
        median_s, steps = ordered[len(ordered) // 2] if len(ordered) % 2 else (
            (ordered[len(ordered) // 2 - 1] + ordered[len(ordered) // 2]) / 2), len(ordered)  # fmt: skip
    headline = MODE_NAMES["cold" if mode == "warm" else "warm"]
    return {"mode": mode, "name": MODE_NAMES[mode], "median_s": median_s, "steps": steps,
            "faults_per_step": round(float(faults_per_step), 1), "headline": headline}  # fmt: skip


def fresh_majority(
    loops: list[tuple[dict[str, Any] | None, str | None]],
) -> tuple[str | None, dict[str, Any] | None, int]:
    """The mode most fresh loops met, the first loop in it, and how many met it. Loops that could
    not be run do not vote; with no majority (three modes), the loop of the median fault count."""
    voted = [(p, m) for p, m in loops if p is not None and m is not None]
    if not voted:
        return None, None, 0
    modes = [m for _, m in voted]
    best = max(modes, key=modes.count)  # the earliest of the most frequent
    if modes.count(best) == 1 and len(voted) > 2:
        ranked = sorted(voted, key=lambda pm: float(pm[0]["faults_per_step"]))
        best = ranked[len(ranked) // 2][1]
    plain = next(p for p, m in voted if m == best)
    return best, plain, modes.count(best)


def loop_median(plain: dict[str, Any]) -> float:
    """A fresh loop's median step (the mean of the middle two for an even count)."""
    ordered = sorted(plain["samples_s"])
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def fresh_spread(loops: list[tuple[dict[str, Any] | None, str | None]]) -> dict[str, Any] | None:
    """Where the fresh loops that ran read medians more than SPREAD_RATIO apart and faulted unlike
    each other (their heaps differ): their range and their page faults' range (the
    `alloc_fresh_spread` condition); None where they agree. Loops alike in page faults that differ
    only in time met the machine's noise, not another heap: the engine's own loop is as good a
    figure, and under load two real children of an 8 MB element-wise step read 10-20 % apart."""
    ran = [p for p, _ in loops if p is not None and p.get("samples_s")]
    if len(ran) < 2:
        return None
    medians = [loop_median(p) for p in ran]
    faults = [float(p["faults_per_step"]) for p in ran]
    if max(medians) <= SPREAD_RATIO * min(medians) or not faults_differ(
        min(faults), max(faults), min(medians)
    ):
        return None
    return {"loops": len(ran), "min_s": min(medians), "max_s": max(medians),
            "faults_min": min(faults), "faults_max": max(faults)}  # fmt: skip


def unsettled(plain: dict[str, Any] | None) -> bool:
    """Whether a fresh loop's page faults moved from step to step: its mean and median step differ
    by as much as two modes must (faults_differ)."""
    if plain is None or not plain.get("samples_s"):
        return False
    mean = float(plain.get("mean_faults_per_step") or 0.0)
    return faults_differ(mean, float(plain["faults_per_step"]), loop_median(plain))


def middle_loop(
    loops: list[tuple[dict[str, Any] | None, str | None]],
) -> tuple[dict[str, Any], str | None]:
    """The fresh loop whose median is the middle one (of two, the first asked): the headline
    where the loops do not agree on one figure."""
    ran = [(p, m) for p, m in loops if p is not None and p.get("samples_s")]
    ranked = sorted(ran, key=lambda pm: loop_median(pm[0]))
    return ranked[(len(ranked) - 1) // 2] if len(ranked) != 2 else ran[0]


def spread_words(spread: dict[str, Any]) -> str:
    """The fresh processes' range, in words beside the headline."""
    faults = f"{spread['faults_min']:,.0f}–{spread['faults_max']:,.0f} pages faulted per step"
    return (
        f"{spread['loops']} fresh processes of the same loop read {_ms(spread['min_s'])}–"
        f"{_ms(spread['max_s'])} a step ({faults}: the heap's state differs from one process to the next)"
    )


def headline_words(
    fresh: str | None,
    plain: dict[str, Any] | None,
    faults_per_step: float,
    switched: bool,
    votes: tuple[int, int] = (1, 1),
    spread: dict[str, Any] | None = None,
) -> str:
    """Why the headline is the figure it is, in words (the `alloc_headline` condition); `votes`:
    how many of the fresh loops asked met that mode; `spread`: the fresh loops' range where they
    disagree, the headline then the middle one."""
    if fresh is None or plain is None:
        return "pages reused: a fresh process's plain loop could not be run to say which mode it gets"
    if spread is not None and switched:
        mode = f"{MODE_NAMES[fresh]}, " if fresh in MODE_NAMES else ""
        return (
            f"{mode}timed in a fresh process's plain loop, the middle of {spread['loops']} ({plain['steps']} steps, "
            f"its median step faulted {plain['faults_per_step']:,.0f} pages; the engine's loop "
            f"{faults_per_step:,.0f}); {spread_words(spread)}"
        )
    theirs = f"{plain['faults_per_step']:,.0f} pages per step"
    of = f"; {votes[0]} of {votes[1]} fresh processes met this mode" if votes[1] > 1 else ""
    if fresh == "same":
        return f"pages reused: a plain loop in a fresh process faulted {theirs}, as this mode does{of}"
    name = MODE_NAMES[fresh]
    if switched:
        return (
            f"{name}, timed in a fresh process's plain loop ({plain['steps']} steps, its median step "
            f"faulted {theirs}; the engine's loop {faults_per_step:,.0f}{of})"
        )
    return f"the pairs' own samples; a plain loop in a fresh process faulted {theirs} ({name})"


def headline_note(conditions: dict[str, Any]) -> str:
    """The note beside a figure whose time depends on the allocation mode."""
    other = conditions.get("alloc_other") or {}
    far = ""
    if other.get("median_s"):
        far = f"; {_ms(other['median_s'])} with {other['name']} (--alloc {other['mode']} times that mode)"
    return f"allocation mode: the figure is {conditions.get('alloc_headline', '')}{far}"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.3g} µs"
