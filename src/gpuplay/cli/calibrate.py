"""`gpuplay calibrate`: measure each device's roofline peaks and cache them."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import click

from gpuplay.cli.options import FiniteFloat
from gpuplay.cli.output import esc, spinner, stderr_console
from gpuplay.core.storage import bounds


def _devices(wanted: tuple[str, ...]) -> list[str]:
    """cpu and every GPU torch sees (cuda:N, xpu:N, mps), or the ones asked for; unknown ones are refused."""
    from gpuplay.core.backends import get_backend

    try:
        import torch

        from gpuplay.core.hw import apple, intel

        cuda = [f"cuda:{i}" for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []
        xpu = intel.xpu(torch)
        others = [f"xpu:{i}" for i in range(xpu.device_count())] if xpu is not None else []
        others += ["mps"] if apple.mps(torch) is not None else []
    except ImportError:  # NumPy alone still has a CPU roof
        cuda, others = [], []
    if not wanted or "all" in wanted:
        return ["cpu", *cuda, *others]
    out = []
    for d in wanted:
        d = {"cuda": "cuda:0", "xpu": "xpu:0"}.get(d, d)
        if d.startswith("xpu") or d == "mps":
            if d not in others:
                kind = "Intel GPU (torch.xpu)" if d.startswith("xpu") else "MPS device (torch.mps)"
                seen = ", ".join(x for x in others if x[:3] == d[:3]) or f"no {kind}"
                raise click.UsageError(f"no device {d} to calibrate: PyTorch sees {seen}")
        elif d != "cpu" and d not in cuda:
            why = get_backend("torch").cuda_reason() or f"PyTorch sees {', '.join(cuda) or 'no CUDA device'}"  # type: ignore[attr-defined]
            raise click.UsageError(f"no device {d} to calibrate: {why}")
        out.append(d)
    return list(dict.fromkeys(out))


@click.command()
@click.option(
    "--device",
    "-d",
    "devices",
    multiple=True,
    metavar="DEVICE",
    help="cpu, cuda, cuda:N, xpu, xpu:N, mps or all (default: all). Repeatable.",
)
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option(
    "--budget",
    type=FiniteFloat(bounds.CALIBRATE_BUDGET_S),
    default=None,
    help="Seconds of measuring in all, spread over every device's probes (default 5 per device); "
    "loading torch comes on top. More is steadier.",
)
@click.option("--show", is_flag=True, help="Print the cached peaks; measure nothing.")
@click.option("--forget", is_flag=True, help="Delete the cached peaks of these devices.")
def calibrate(devices: tuple[str, ...], fmt: str, budget: float | None, show: bool, forget: bool) -> None:
    """Measure each device's peaks (STREAM copy/triad, matmul per dtype) for the roofline.

    The peaks are cached per device in the state folder; every result is then placed
    against them (fraction of roof, memory- or compute-bound). Runs never calibrate
    by themselves: a device without a cache reads "not calibrated".

    Only a peak that was measured is stored: a probe whose share of the budget could not
    reach its peak, or during which other processes used the CPU, is refused and said.
    With no peak measured the cache is left as it was and the exit status is 1.
    """
    from gpuplay.core.measure import roofline

    err = stderr_console()
    if show or forget:
        # No torch needed: the cache files name their devices.
        names = [roofline.normalize_device(d) for d in devices if d != "all"] or sorted(
            p.stem.replace("_", ":") for p in roofline.cache_dir().glob("*.json")
        )
        if forget:
            for d in names:
                gone = roofline.invalidate(d)
                err.print(f"{d}: {'forgotten' if gone else 'nothing cached'}", highlight=False)
            return
        if not names:
            err.print(
                f"nothing calibrated yet in {roofline.cache_dir()}: run gpuplay calibrate", highlight=False
            )
            sys.exit(1)
        found = []
        for d in names:
            lookup = roofline.load_peaks(d)
            if lookup.peaks is None:
                err.print(f"[yellow]{esc(d)}:[/] {esc(lookup.problem)}", highlight=False)
            else:
                found.append(lookup.peaks)
        _print(found, fmt)
        sys.exit(0 if found else 1)
    from gpuplay.cli.interrupt import Interrupted, Interruption

    t_start = time.perf_counter()
    wanted = _devices(devices)  # imports torch: start-up, not measuring
    planned = {d: roofline.planned_probes(d) for d in wanted}
    total = budget if budget is not None else roofline.DEFAULT_BUDGET_S * len(wanted)
    measuring = 0.0
    measured = []
    unmeasured: list[str] = []  # devices whose calibration could measure no peak
    refused: list[Any] = []  # their peaks, all refused: in the JSON with "stored": false
    # SIGINT and SIGTERM stop between two probes (a second one at once): what finished is cached
    # and said, and the exit status is 130 or 143, as for `run` and `sweep`.
    with Interruption() as stop:
        for d, n in planned.items():
            probes = roofline.Probes(stop=stop.cancel)
            share = total * n / sum(planned.values())  # the devices share the budget by their probes
            try:
                with spinner(err, f"calibrating {d} (STREAM copy/triad, matmul per dtype) …"):
                    probes.on_probe = lambda m, d=d, p=probes, n=n: err.print(
                        f"{esc(d)}: {'memory' if m.kind == 'memory' else 'matmul'} {esc(m.name)} ({esc(m.library)}) "
                        f"{m.value:,.1f} {m.unit} [{p.finished} of {n} probes]", highlight=False, markup=False,
                    )  # fmt: skip
                    probes.on_refused = lambda r, d=d, p=probes, n=n: err.print(
                        f"{d}: {'memory' if r['kind'] == 'memory' else 'matmul'} {r['name']} ({r['library']}) "
                        f"not stored: {r['why']} [{p.finished} of {n} probes]", style="yellow", highlight=False,
                        markup=False,
                    )  # fmt: skip
                    measured.append(roofline.calibrate(d, share, probes))
            except roofline.NothingMeasured as exc:
                unmeasured.append(d)
                refused.append(exc.peaks)
                _nothing(exc.peaks)
                continue
            except (roofline.CalibrationStopped, Interrupted):
                _stopped(d, probes, n, stop.name)
                break
            except Exception as exc:  # a driver or memory failure: say which device and why
                raise click.ClickException(f"calibrating {d} failed: {type(exc).__name__}: {exc}") from None
            finally:
                measuring += time.perf_counter() - probes.started
            err.print(f"wrote {roofline.cache_path(d)}", highlight=False)
    if fmt == "json" and (measured or refused):
        docs = [{**p.to_dict(), "stored": True} for p in measured] + [
            {**p.to_dict(), "stored": False} for p in refused
        ]
        click.echo(json.dumps(docs, indent=2))
    elif measured:
        _print(measured, fmt)
    took = time.perf_counter() - t_start
    over = measuring > 1.2 * total  # only the least a probe needs runs past its share: say so
    err.print(f"calibration took {took:.1f} s against a budget of {total:g} s: {measuring:.1f} s measuring "
              f"{sum(planned.values())} probes, {took - measuring:.1f} s loading libraries and writing"
              + ("; the least each probe needs (its smallest size, timed twice) took longer than this budget"
                 if over else ""), highlight=False)  # fmt: skip
    if stop.interrupted:
        sys.exit(stop.exit_code)
    if unmeasured:
        sys.exit(1)


def _nothing(peaks: Any) -> None:
    """A device none of whose peaks could be measured: why, by reason, and that nothing changed."""
    from gpuplay.core.measure import roofline

    err = stderr_console()
    reasons = {r["reason"] for r in peaks.refused}
    what = " and ".join(
        {"budget": "the budget was too short", "busy": "the machine was busy"}.get(r, r)
        for r in sorted(reasons)
    )
    err.print(
        f"calibration of {esc(peaks.device)} stored nothing: no peak could be measured ({what}); "
        f"{esc(str(roofline.cache_path(peaks.device)))} is left as it was. "
        "Calibrate on a quiet machine with --budget 30 or more",
        style="red", highlight=False,
    )  # fmt: skip


def _stopped(device: str, probes: Any, planned: int, signame: str) -> None:
    """An interrupted device: say how far it got, and keep what finished."""
    from gpuplay.core.measure import roofline

    err = stderr_console()
    path = roofline.keep_partial(device, probes)
    kept = f"kept in {path}" if path is not None else "no peak measured: nothing to keep"
    err.print(f"calibration of {esc(device)} interrupted ({esc(signame)}): {probes.finished} of {planned} "
              f"probes finished; {esc(kept)}", highlight=False)  # fmt: skip


def _print(peaks: list[Any], fmt: str) -> None:
    from gpuplay.core.measure.noise import host_warnings

    if fmt == "json":
        click.echo(json.dumps([p.to_dict() for p in peaks], indent=2))
        return
    from rich.table import Table

    from gpuplay.cli.output import stdout_console

    con = stdout_console()
    for p in peaks:
        t = Table(
            title=f"{esc(p.device)}: {esc(p.name)}  (measured {p.measured_at}, {p.calibration_s:.1f} s"
            + (", interrupted: only the probes that finished)" if p.partial else ")"),
            header_style="bold",
            box=None,
            padding=(0, 1, 0, 0),
            title_justify="left",
        )
        for col, just in (("peak", "left"), ("library", "left"), ("measured", "right"), ("size", "left")):
            t.add_column(col, justify=just, no_wrap=col != "size")  # type: ignore[arg-type]
        bw = p.bandwidth()
        for m in p.measurements:
            mark = " ◀" if m is bw or (m.kind == "compute" and m is p.compute(m.name)) else ""
            label = f"memory {m.name}" if m.kind == "memory" else f"matmul {m.name}"
            t.add_row(label, m.library, f"{m.value:,.1f} {m.unit}{mark}", f"{m.size}, best of {m.repeats}")
        for r in p.refused:  # never a roof: what could not be measured, and why
            label = f"memory {r['name']}" if r["kind"] == "memory" else f"matmul {r['name']}"
            t.add_row(esc(label), esc(r["library"]), "not stored", esc(r["why"]), style="yellow")
        con.print(t)
        if bw is not None:
            ridges = ", ".join(
                f"{d} {c.value / bw.value:.1f}"
                for d in ("float64", "float32", "tf32", "bfloat16", "float16")
                if (c := p.compute(d)) is not None
            )
            con.print(
                f"◀ the roofs: memory {bw.value:.1f} GB/s ({bw.library} {bw.name}); "
                f"ridge points (FLOP/byte): {ridges}",
                style="dim",
                highlight=False,
            )
        for w in host_warnings(p.noise, during="calibration"):
            con.print(
                f"⚠ {w}: peaks may read low; calibrate on a quiet machine", style="yellow", highlight=False
            )


command = calibrate
