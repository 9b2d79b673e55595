"""`gpuplay monitor`: stream GPU and host telemetry."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from gpuplay.cli.options import FiniteFloat
from gpuplay.cli.output import stderr_console
from gpuplay.core.storage import bounds


@click.command()
@click.option(
    "--interval", type=FiniteFloat(bounds.MONITOR_INTERVAL_S), default=0.5, show_default=True, help="Seconds."
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json"]),
    default="json",
    show_default=True,
    help="json: one JSON object per line; table: one line of text per sample.",
)
@click.option("--count", type=click.IntRange(min=1), default=None, help="Stop after N samples.")
def monitor(interval: float, fmt: str, count: int | None) -> None:
    """Stream GPU and host telemetry (JSON lines for scripts). Ctrl+C stops."""
    import time

    from gpuplay.core.measure.telemetry import nvml_status, paced_snapshots

    status = nvml_status()
    if status:
        stderr_console().print(
            f"{status}: host telemetry only", style="yellow", highlight=False, markup=False
        )
    try:
        for snap in paced_snapshots(interval, count):
            if fmt == "json":
                click.echo(json.dumps(snap.to_dict()))
            else:
                h = snap.host
                gpus = "  ".join(
                    f"{'' if g.vendor == 'NVIDIA' else g.vendor + ' '}GPU{g.index} {_na(g.util_gpu, '%')} {_na(g.power_w, ' W')} "
                    f"{_na(g.mem_used and g.mem_used / 2**30, ' GiB', 1)}{_activity(g.activity)}"
                    for g in snap.gpus
                )
                click.echo(
                    f"{time.strftime('%H:%M:%S')}  CPU {h.cpu_mean:5.1f}%  "
                    f"mem {h.mem_used / 2**30:.1f}/{h.mem_total / 2**30:.1f} GiB  "
                    f"rss {h.process_rss / 2**20:.0f} MiB  {gpus}"
                )
            sys.stdout.flush()
    except KeyboardInterrupt:
        pass
    except BrokenPipeError:
        sys.stderr.close()


def _activity(activity: dict[str, Any] | None) -> str:
    """GPM's figures since the last line (tensor cores, SM, DRAM), or why there are none."""
    from gpuplay.core.hw import nvidia as gpm
    from gpuplay.core.storage.safetext import visible

    if not activity:
        return ""
    text = gpm.summary(activity)
    return f" [{text}]" if text else f" [{visible(activity.get('reason') or 'GPM n/a', one_line=True)}]"


def _na(v: Any, unit: str, digits: int = 0) -> str:
    return "n/a" if v is None else f"{v:.{digits}f}{unit}"


command = monitor
