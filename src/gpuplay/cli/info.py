"""`gpuplay info`: versions, devices, drivers, and what is missing and why."""

from __future__ import annotations

import json
from typing import Any

import click

from gpuplay.cli.options import FiniteFloat
from gpuplay.cli.output import esc
from gpuplay.core.storage import bounds
from gpuplay.core.storage.safetext import visible


@click.command()
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option(
    "--probe-timeout",
    type=FiniteFloat(bounds.PROBE_TIMEOUT_S),
    default=30.0,
    show_default=True,
    help="Seconds to wait for a slow backend probe (CuPy's can take >10 s).",
)
def info(fmt: str, probe_timeout: float) -> None:
    """Versions, devices, drivers, and what is unavailable and why."""
    from gpuplay.core.reports.info import gather

    data = gather(probe_timeout)
    if fmt == "json":
        click.echo(json.dumps(data, indent=2, default=str))
        return
    from rich.markup import escape
    from rich.table import Table

    from gpuplay.cli.output import stdout_console

    con = stdout_console()
    env = data["environment"]
    con.print(
        f"[bold]gpuplay {env['gpuplay']}[/]  Python {env['python']}  {env['platform']}", highlight=False
    )
    con.print(f"CPU: {env['cpu']} ({env['cores']} cores usable)", highlight=False)
    t = Table("backend", "version", "status", "devices", header_style="bold")
    for b in data["backends"]:
        status = "[green]available[/]" if b["available"] else f"[red]unavailable[/]: {escape(b['reason'])}"
        if b["name"] == "torch" and b["available"]:
            status += f"\nCUDA: {b['cuda']}" + (
                f" (built for CUDA {b['cuda_version']})" if b.get("cuda_version") else ""
            )
            status += f"\nthreads: {b.get('threads')}"
        if b["name"] == "numpy":
            status += f"\nBLAS threads: {b.get('blas_threads')}"
        devs = "\n".join(f"{d['id']}: {d['name']}" for d in b["devices"]) or "—"
        t.add_row(b["title"], b["version"] or "—", status, devs)
    con.print(t)
    nv = data["nvml"]
    if nv["status"] == "ok":
        con.print(f"NVML: driver {nv['driver']}, {len(nv['gpus'])} GPU(s)", highlight=False)
        for g in nv["gpus"]:
            mem = (
                f"{g['mem_used'] / 2**30:.1f}/{g['mem_total'] / 2**30:.1f} GiB"
                if g.get("mem_total")
                else "n/a"
            )
            con.print(
                f"  GPU {g['index']}: {g['name']}  util {g['util_gpu']}%  mem {mem}  "
                f"{g['power_w']} W  {g['temp_c']} °C  {g['pstate']}",
                highlight=False,
            )
            # GPM: SM, tensor-core and DRAM activity (`gpuplay monitor`, the Telemetry tab, results)
            gpm = str(g.get("gpm", "GPM n/a"))  # "available", or the reason ("GPM n/a: …")
            con.print(
                visible(f"    {gpm if gpm.startswith('GPM') else 'GPM: ' + gpm}"),
                highlight=False,
                markup=False,
            )
    else:
        con.print(visible(f"NVML: {nv['status']}"), highlight=False, markup=False)
    _accelerators(con, data)
    for roof in data.get("roofline", []):
        if roof["calibrated"]:
            peaks = ", ".join(f"{d} {v:,.0f}" for d, v in roof["gflops"].items())
            con.print(
                f"roofline {roof['device']}: {roof['bandwidth_gbs']:.1f} GB/s; GFLOP/s {peaks} "
                f"(measured {roof['measured_at']})",
                highlight=False,
            )
            if roof.get("stale"):  # measured on another board, driver, power limit or MIG profile
                stale = f"  stale since: {roof['stale']}: run gpuplay calibrate {roof['device']}"
                con.print(visible(stale), style="yellow", highlight=False, markup=False)
        else:
            con.print(visible(f"roofline {roof['device']}: {roof['problem']}"), highlight=False, markup=False)
    con.print(f"config: {data['paths']['config']}\nstate:  {data['paths']['state']}", highlight=False)
    for w in data.get("warnings", []):
        con.print(f"[yellow]warning:[/] {escape(w)}", highlight=False)
    for p in data["config_problems"]:
        con.print(f"[yellow]warning:[/] {esc(p)}", highlight=False)


def _accelerators(con: Any, data: dict[str, Any]) -> None:
    """Every accelerator torch reports, by vendor; then why a vendor's library gives nothing.
    A plain CPU machine gets one line."""
    accs, notes = data.get("accelerators") or [], data.get("vendor_notes") or []
    if not accs and not notes:
        con.print("accelerators: none (CPU only)", highlight=False, markup=False)
        return
    con.print(f"accelerators: {len(accs)}", highlight=False, markup=False)
    for a in accs:
        smi = a.get("amdsmi") or {}
        tele = (
            f"  amdsmi GPU {smi['index']} ({smi.get('pci')}): util {smi.get('util_gpu')}%, {smi.get('power_w')} W"
            if smi
            else ""
        )
        name = a["name"] if str(a["name"]).startswith(a["vendor"]) else f"{a['vendor']} {a['name']}"
        con.print(visible(f"  {a['device']}: {name}{tele}"), highlight=False, markup=False)
    for note in notes:
        con.print(visible(f"  {note}"), highlight=False, markup=False)


command = info
