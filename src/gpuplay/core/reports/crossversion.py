"""Two result files of the same configurations, measured with different versions: for each
configuration present in both, faster, slower or within noise, with the ratio's interval.

The levers article's first checklist step is "confirm PyTorch and driver versions and upgrade to a
release with targeted performance fixes": this answers whether an upgrade changed anything, and
says which versions (and which CPU or device) differ between the two files.

Medians are true medians everywhere (the mean of the middle two of an even count), the same ones
printed and divided. Each file may hold several runs of a configuration: a side's figure is the
median of its runs' medians, and the ratio's interval resamples runs and, within each, its samples
(a seeded hierarchical bootstrap), so run-to-run drift (clocks, temperature, what else ran) is in
it. With one run a side the interval is within-run only: thousands of samples make it ±0.1 % while
two runs of the same code differ by 2-5 %, so such a comparison says so, and calls no change under
5 % slower or faster. Samples of different kinds (a paired run's means of up to 64 steps, an
unpaired run's single steps) are never compared with each other; a configuration one file has no
samples for is named, not dropped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

RESAMPLES = 2000
CONFIDENCE = 0.95
# A change smaller than this is called within noise even when its interval excludes 1: a machine
# on another day (clocks, temperature, what else runs) moves medians by about this much.
MIN_CHANGE = 0.02
# ... and this, when the interval holds no run-to-run variation (one run a side): run-to-run
# drift of 2-5 % is outside such an interval, so only a larger change is named.
MIN_CHANGE_WITHIN_RUN = 0.05
MIN_SAMPLES = 3
ACROSS_RUNS = "across runs"
WITHIN_RUN = "within-run only"
# What a sample is (core/runner/paired.py): an unpaired run's samples are single steps; a paired
# run's (conditions["paired_with"]) are elements of its interleaved pairs, each the mean of up to
# 64 steps (less spread, and a different statistic): never compared with single steps.
SINGLE_STEPS = "single steps"
PAIR_MEANS = "means of steps in interleaved pairs"
# A step time a file may claim, in seconds: under a picosecond or over a day is no measurement
# (a subnormal 1e-320 made the ratio inf and the JSON output invalid); such samples are dropped.
STEP_S = (1e-12, 86_400.0)
# What "versions" holds (core/measure/provenance.py), in the order they are said, with their names.
VERSION_NAMES = {
    "gpuplay": "gpuplay",
    "python": "Python",
    "numpy": "NumPy",
    "torch": "PyTorch",
    "torch_cuda": "CUDA runtime (torch)",
    "torch_hip": "HIP runtime (torch)",
    "cupy": "CuPy",
    "cupy-cuda12x": "CuPy",
    "cupy-cuda13x": "CuPy",
    "driver": "driver",
    "cpu": "CPU",
    "cores": "CPU cores",
    "device_name": "device",
    "device_uuid": "device UUID",
}


@dataclass(frozen=True)
class Change:
    """One configuration in both files: new median over old (above 1: slower). Without a ratio
    (None) when the two sides cannot be compared: `verdict` and `note` say why."""

    key: tuple[str, str, str]  # scenario, size, configuration label
    old_median: float | None
    new_median: float | None
    ratio: float | None
    low: float | None  # the ratio's 95% interval; None with too few samples for one
    high: float | None
    verdict: str  # faster | slower | within noise | not compared
    runs: tuple[int, int] = (1, 1)  # runs of this configuration in the old and the new file
    interval: str = WITHIN_RUN  # what the interval resamples: ACROSS_RUNS or WITHIN_RUN
    kind: str = SINGLE_STEPS  # what one sample is, on both sides
    note: str = ""  # why not compared, or what the verdict rests on

    def to_dict(self) -> dict[str, Any]:
        scenario, size, label = self.key
        return {
            "scenario": scenario,
            "size": size,
            "configuration": label,
            "old_median_s": self.old_median,
            "new_median_s": self.new_median,
            "ratio": self.ratio,
            "interval": None if self.low is None or self.high is None else [self.low, self.high],
            "interval_kind": self.interval if self.ratio is not None else None,
            "runs": {"old": self.runs[0], "new": self.runs[1]},
            "samples": self.kind,
            "verdict": self.verdict,
            "note": self.note,
        }

    def text(self) -> str:
        scenario, size, label = self.key
        head = f"{scenario} ({size}) {label}: {self.verdict}"
        if self.ratio is None:
            return f"{head}: {self.note}"
        if self.low is None or self.high is None:
            spread = "(too few samples for an interval)"
        else:
            spread = f"[{self.low:.3f}, {self.high:.3f}] {self.interval}"
        runs = "" if self.runs == (1, 1) else f", {self.runs[0]} → {self.runs[1]} runs"
        medians = f"{_fmt_s(self.old_median)} → {_fmt_s(self.new_median)}"
        return f"{head}, new/old time ×{self.ratio:.3f} {spread} ({medians}{runs})" + (
            f"; {self.note}" if self.note else ""
        )


def _fmt_s(x: float | None) -> str:
    if x is None:
        return "—"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if x >= scale:
            return f"{x / scale:.4g} {unit}"
    return f"{x / 1e-9:.4g} ns"


def _samples(r: Mapping[str, Any]) -> list[float]:
    raw = r.get("samples_s") or []
    out = []
    for x in raw if isinstance(raw, list) else []:
        if isinstance(x, int | float) and not isinstance(x, bool) and STEP_S[0] <= x <= STEP_S[1]:
            out.append(float(x))
    return out


def sample_kind(r: Mapping[str, Any]) -> str:
    cond = r.get("conditions")
    return PAIR_MEANS if isinstance(cond, Mapping) and cond.get("paired_with") else SINGLE_STEPS


def key_of(r: Mapping[str, Any]) -> tuple[str, str, str]:
    return (
        str(r.get("scenario") or r.get("workload") or "?"),
        str(r.get("size") or ""),
        str(r.get("label") or ""),
    )


def median(xs: Sequence[float]) -> float:
    """The true median (the mean of the middle two of an even count): the one figure printed,
    divided and resampled (the upper-middle sample printed [1, 1, 2, 2] as 2 beside a ratio of 1.5);
    the same quantile every result's summary uses (core/measure/stats.py), and np.median's."""
    from gpuplay.core.measure.stats import quantile

    return float(quantile(sorted(xs), 0.5))


def _boot_medians(x: Any, resamples: int, rng: Any) -> Any:
    """`resamples` medians of resamples of `x` (with replacement), in chunks: 2000 resamples of
    10^5 samples at once would be gigabytes."""
    import numpy as np

    out = np.empty(resamples)
    chunk = max(1, min(resamples, 4_000_000 // max(x.size, 1)))
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        out[start:stop] = np.median(x[rng.integers(0, x.size, size=(stop - start, x.size))], axis=1)
    return out


def _side(runs: Sequence[Sequence[float]], resamples: int, rng: Any) -> Any:
    """A side's resampled figure: runs drawn with replacement, each run's median resampled from its
    own samples, and the median of those (one run: its resampled median alone)."""
    import numpy as np

    boots = np.stack([_boot_medians(np.asarray(r, dtype=np.float64), resamples, rng) for r in runs])
    if len(runs) == 1:
        return boots[0]
    pick = rng.integers(0, len(runs), size=(resamples, len(runs)))
    return np.median(boots[pick, np.arange(resamples)[:, None]], axis=1)


def ratio_interval(
    old: Sequence[float] | Sequence[Sequence[float]],
    new: Sequence[float] | Sequence[Sequence[float]],
    *,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> tuple[float, float | None, float | None]:
    """median(new) / median(old) and its 95% interval. Each side is one run's samples or a list of
    runs (each its samples): its figure is then the median of its runs' medians, and the interval
    resamples runs as well as samples within them."""
    import numpy as np

    a_runs, b_runs = _as_runs(old), _as_runs(new)
    point = _figure(b_runs) / _figure(a_runs)
    if min(len(r) for r in (*a_runs, *b_runs)) < MIN_SAMPLES:
        return point, None, None
    rng = np.random.default_rng(seed)
    ratios = _side(b_runs, resamples, rng) / _side(a_runs, resamples, rng)
    tail = (1.0 - CONFIDENCE) / 2
    low, high = np.quantile(ratios, [tail, 1.0 - tail])
    return point, float(low), float(high)


def _as_runs(x: Sequence[float] | Sequence[Sequence[float]]) -> list[list[float]]:
    if x and isinstance(x[0], Sequence):
        return [list(r) for r in x]  # type: ignore[arg-type]
    return [list(x)]  # type: ignore[arg-type]


def _figure(runs: Sequence[Sequence[float]]) -> float:
    """A side's figure: the median of its runs' medians (one run: its median)."""
    return median([median(r) for r in runs])


def verdict(ratio: float, low: float | None, high: float | None, min_change: float = MIN_CHANGE) -> str:
    if low is not None and low > 1.0 and ratio >= 1.0 + min_change:
        return "slower"
    if high is not None and high < 1.0 and ratio <= 1.0 / (1.0 + min_change):
        return "faster"
    return "within noise"


def _runs(results: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str, str], list[Mapping[str, Any]]]:
    """Each configuration's results in a file, in the file's order."""
    out: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
    for r in results:
        if isinstance(r, Mapping):
            out.setdefault(key_of(r), []).append(r)
    return out


def _usable(rs: Sequence[Mapping[str, Any]]) -> list[tuple[str, list[float]]]:
    """(kind, samples) of each finished run with samples a step could take."""
    return [(sample_kind(r), s) for r in rs if r.get("status", "ok") == "ok" and (s := _samples(r))]


def _no_samples(rs: Sequence[Mapping[str, Any]], which: str) -> str:
    last = rs[-1]
    status = str(last.get("status") or "ok")
    if status != "ok":
        why = f" (it {status}: {str(last.get('message') or '')[:120]})"
    elif last.get("samples_s"):
        why = f" (its samples are no step times: each under {STEP_S[0]:g} s or over {STEP_S[1]:g} s)"
    else:
        why = ""
    return f"the {which} file has no timed samples for it{why}"


def compare_one(
    key: tuple[str, str, str], old_rs: Sequence[Mapping[str, Any]], new_rs: Sequence[Mapping[str, Any]]
) -> Change:
    """One configuration present in both files: its verdict, or why it is not compared."""
    old, new = _usable(old_rs), _usable(new_rs)
    if not old or not new:
        empty = [_no_samples(rs, w) for rs, got, w in ((old_rs, old, "old"), (new_rs, new, "new")) if not got]
        return Change(key, None, None, None, None, None, "not compared", (len(old), len(new)),
                      note=" and ".join(empty))  # fmt: skip
    kinds = [
        k for k in (SINGLE_STEPS, PAIR_MEANS) if any(x == k for x, _ in old) and any(x == k for x, _ in new)
    ]
    if not kinds:
        return Change(key, None, None, None, None, None, "not compared", (len(old), len(new)), kind="",
                      note=f"the old file's samples are {old[0][0]}, the new file's {new[0][0]}: samples of "
                      "different kinds are not compared; measure both the same way (both paired with a "
                      "NumPy baseline, or both unpaired)")  # fmt: skip
    kind = kinds[0]
    a = [s for k, s in old if k == kind]
    b = [s for k, s in new if k == kind]
    point, low, high = ratio_interval(a, b)
    across = len(a) >= 2 and len(b) >= 2
    min_change = MIN_CHANGE if across else MIN_CHANGE_WITHIN_RUN
    said = verdict(point, low, high, min_change)
    note = ""
    if not across and said == "within noise" and verdict(point, low, high) != "within noise":
        note = (
            f"a {abs(point - 1) * 100:.1f}% change with one run a side is within run-to-run noise "
            f"(under {MIN_CHANGE_WITHIN_RUN:.0%})"
        )
    return Change(key, _figure(a), _figure(b), point, low, high, said, (len(a), len(b)),
                  ACROSS_RUNS if across else WITHIN_RUN, kind, note)  # fmt: skip


def compare_results(old: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]]) -> list[Change]:
    """Each configuration in both files, in the new file's order: compared where both have samples
    of one kind, else named with the reason (an empty side, samples of different kinds)."""
    before, after = _runs(old), _runs(new)
    return [compare_one(k, before[k], rs) for k, rs in after.items() if k in before]


def within_run_only(changes: Sequence[Change]) -> bool:
    """Whether some verdict rests on an interval that holds no run-to-run variation."""
    return any(c.ratio is not None and c.interval == WITHIN_RUN for c in changes)


WITHIN_RUN_NOTE = (
    "intervals marked within-run only resample one run a side: they hold none of the 2-5% a run "
    f"drifts from another, so a change under {MIN_CHANGE_WITHIN_RUN:.0%} is called within noise there; "
    "several runs of a configuration in each file give an interval across runs"
)


def _known(pairs: Any) -> dict[str, str]:
    """The version-like entries of a mapping, as text (anything else a file holds is ignored)."""
    if not isinstance(pairs, Mapping):
        return {}
    return {
        str(k): str(v)
        for k, v in pairs.items()
        if k in VERSION_NAMES and isinstance(v, str | int | float) and v != ""
    }


def versions_of(environment: Mapping[str, Any], results: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """A file's versions: its environment's, then what its results recorded (driver, runtime, UUID)."""
    out = _known(environment)
    for r in results:
        cond = r.get("conditions")
        if not isinstance(cond, Mapping):
            continue
        for k, v in _known(cond.get("versions")).items():
            out.setdefault(k, v)
        name = cond.get("device_name")
        if isinstance(name, str) and name:
            # The CPU's model is a difference as much as a version: a 2x change beside "the
            # same versions" hid a new machine.
            out.setdefault("device_name" if (cond.get("device") or "cpu") != "cpu" else "cpu", name)
    # CuPy's distribution name differs between CUDA majors: one name for comparing.
    for k in ("cupy-cuda12x", "cupy-cuda13x"):
        if k in out:
            out.setdefault("cupy", out.pop(k))
    return out


def differing_versions(old: Mapping[str, str], new: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """(name, old, new) for every version that differs or is known on one side only."""
    out = []
    for k in VERSION_NAMES:
        a, b = old.get(k), new.get(k)
        if (a or b) and a != b:
            out.append((VERSION_NAMES[k], a or "—", b or "—"))
    return out
