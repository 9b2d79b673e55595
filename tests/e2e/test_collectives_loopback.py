"""A single-box `gpuplay collectives` run listens on loopback only: the rendezvous store (which
torch's TCPStore alone would bind to every interface) and the gloo process group's sockets."""

from __future__ import annotations

import ipaddress
import os

import psutil
import pytest

from gpuplay.collectives.launch import LaunchError, launch

pytestmark = pytest.mark.slow


def _listening(pids: list[int]) -> list[str]:
    out = []
    for pid in pids:
        try:
            conns = psutil.Process(pid).net_connections("inet")
        except psutil.NoSuchProcess:
            continue
        out += [c.laddr.ip for c in conns if c.status == psutil.CONN_LISTEN]
    return out


def test_ranks_listen_on_loopback_only():
    seen: dict[str, list[str]] = {}
    joined: list[int] = []

    def on_event(ev: dict) -> None:
        if ev.get("event") == "joined":
            joined.append(ev["rank"])
        if len(joined) == 2 and "addrs" not in seen:
            ranks = [
                p.pid
                for p in psutil.Process(os.getpid()).children()
                if "gpuplay.collectives" in " ".join(p.cmdline())
            ]
            seen["addrs"] = _listening(ranks)

    # rank 1 sleeps after joining: both ranks sit in the process group while we look
    with pytest.raises(LaunchError):
        launch(2, ["--op", "all_reduce", "--sizes", "1K", "--timeout", "6"], timeout_s=6,
               env={"GPUPLAY_COLLECTIVES_INJECT": "hang@1", "OMP_NUM_THREADS": "1"}, on_event=on_event)  # fmt: skip
    addrs = seen.get("addrs")
    assert addrs, "no listening socket seen (the store must listen while the ranks are joined)"
    assert all(ipaddress.ip_address(a).is_loopback for a in addrs), addrs


def test_loopback_interface_named():
    from gpuplay.collectives.launch import loopback_interface

    lo = loopback_interface()
    assert lo in psutil.net_if_addrs()


def test_a_full_run_still_works():
    doc = launch(2, ["--op", "all_reduce", "--sizes", "1K", "--iters", "2", "--warmup", "1", "--timeout", "60"],
                 timeout_s=60, env={"OMP_NUM_THREADS": "1"})  # fmt: skip
    assert doc["results"] and all(r.get("max_err", 0) == 0 or r.get("ok", True) for r in doc["results"])
