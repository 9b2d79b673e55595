"""What a `gpuplay` command's exit status means, so a script or CI can tell the outcomes apart.

0 every measurement finished and every checked result agreed with the float64 reference
1 an error: a configuration failed or was refused, a file could not be written
2 a usage error: an unknown option, scenario or file, a bad value (click's own code)
3 a failed correctness check: everything measured and printed, but a result was off by more than
  its tolerance (a fast wrong answer must not pass a CI step)
130, 143 stopped by Ctrl+C (SIGINT) or SIGTERM, after printing what had finished
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

CHECK_FAILED = 3

HELP = (
    "Exit status: 0 ok; 1 an error (a run failed or was refused); 2 a usage error; 3 a result "
    "failed its correctness check; 130/143 stopped by Ctrl+C/SIGTERM."
)


def failed_checks(results: Iterable[Any]) -> list[Any]:
    """Finished results whose check against the float64 reference failed (None: not checked)."""
    return [r for r in results if r is not None and r.check_ok is False]


def exit_if_runs_failed(results: Iterable[Any]) -> None:
    """After everything is printed (each failure and refusal already named on stderr as it came):
    exit 1 when a measurement failed or was refused, as `run` does and `--help` says, so a
    compare whose configurations all crashed cannot pass a CI step with status 0."""
    if any(r is not None and r.status in ("failed", "refused") for r in results):
        sys.exit(1)


def exit_if_checks_failed(results: Iterable[Any], err: Any) -> None:
    """After everything is printed: name each failed check on stderr and exit 3."""
    from gpuplay.core.storage.safetext import visible

    bad = failed_checks(results)
    for r in bad:
        err.print(
            visible(f"check failed: {r.spec.scenario} {r.spec.label()}: relative error {r.error:.3g} "
                    f"> tolerance {r.tolerance:.3g}"),
            style="red", highlight=False, markup=False,
        )  # fmt: skip
    if bad:
        sys.exit(CHECK_FAILED)
