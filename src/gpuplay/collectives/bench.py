"""One rank of a collectives sweep: join, check, time, and (rank 0) gather the figures.

Timing follows nccl-tests' BenchTime (src/common.cu): one barrier, then a loop of N
operations issued back to back, timed on the host from the loop's start until the last
one has completed on the device (a stream synchronisation), divided by N. nccl-tests
times one such loop; gpuplay times `SAMPLES` of them (the iterations split evenly) for a
median and a spread. Per loop, the figure kept is the slowest rank's (a MAX all-reduce
after the timed loops, outside them); nccl-tests' default (-a 1) averages the ranks
instead, and that mean is kept beside it.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import socket
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuplay.collectives.bandwidth import algbw, bus_factor
from gpuplay.collectives.ops import ELEMENT_BYTES, make_case
from gpuplay.collectives.sizes import format_size
from gpuplay.core.measure.stats import summarize

# Testing hook: GPUPLAY_COLLECTIVES_INJECT="exit@1" makes rank 1 exit (code 17) after its first
# timed collective; "nojoin@1" makes rank 1 sleep instead of joining; "hang@1" makes it sleep after
# joining, before its first collective. Used by the failure tests.
INJECT_ENV = "GPUPLAY_COLLECTIVES_INJECT"
# Set by `gpuplay collectives` so ranks report progress as machine-readable lines on stderr.
EVENTS_ENV = "GPUPLAY_COLLECTIVES_EVENTS"
EVENT_PREFIX = "@gpuplay-collectives "
STORE_FD_ENV = "GPUPLAY_COLLECTIVES_STORE_FD"  # rank 0: the listening socket the launcher bound for the store
INJECTED_EXIT_CODE = 17
SAMPLES = 5  # timed loops per (op, size); the iterations are split evenly among them


def loop_plan(iters: int, samples: int = SAMPLES) -> tuple[int, int]:
    """(loops, ops per loop) for `iters` timed operations: at most `samples` loops, at least one op each."""
    loops = max(1, min(samples, iters))
    return loops, max(1, iters // loops)


def time_loops(
    run_op: Callable[[], object],
    barrier: Callable[[], object],
    complete: Callable[[], object],
    loops: int,
    ops: int,
    clock: Callable[[], float] = time.perf_counter,
) -> list[float]:
    """Seconds per operation of each loop, as nccl-tests' BenchTime: barrier, start the clock,
    issue `ops` operations back to back, wait until the last has completed, divide by `ops`.

    No reset and no barrier between the operations of a loop: what is timed is the
    collective's throughput in a stream of them, not a barrier's latency each time.
    """
    out = []
    for _ in range(loops):
        barrier()
        t0 = clock()
        for _ in range(ops):
            run_op()
        complete()
        out.append((clock() - t0) / ops)
    return out


class RankError(Exception):
    """A failure of this rank, in words; `secondary` when the cause is another rank."""

    def __init__(self, message: str, secondary: bool = False, kind: str = "error") -> None:
        super().__init__(message)
        self.secondary = secondary
        self.kind = kind


@dataclass
class SweepOptions:
    ops: Sequence[str]
    sizes: Sequence[int]
    backend: str = "gloo"
    iters: int = 20
    warmup: int = 5
    timeout_s: float = 60.0
    threads: int | None = None


@dataclass
class RankEnv:
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    master_addr: str
    master_port: int

    @classmethod
    def from_environ(cls, environ: dict[str, str] | None = None) -> RankEnv:
        """torchrun's variables; without them, a single rank on this host (a real world-size-1 run)."""
        env = os.environ if environ is None else environ
        try:
            world = int(env.get("WORLD_SIZE", "1"))
            rank = int(env.get("RANK", "0"))
            port = int(env.get("MASTER_PORT", "0"))
            local_rank = int(env.get("LOCAL_RANK", str(rank)))
            local_world = int(env.get("LOCAL_WORLD_SIZE", str(world)))
        except ValueError as exc:
            raise RankError(f"bad torch.distributed environment variable: {exc}") from None
        if not 0 <= rank < world:
            raise RankError(f"RANK={rank} is outside WORLD_SIZE={world}")
        addr = env.get("MASTER_ADDR", "127.0.0.1")
        if port == 0:
            if world > 1:
                raise RankError("MASTER_PORT is not set: run under torchrun or `gpuplay collectives`")
            port = free_port(addr)
        return cls(rank, world, local_rank, local_world, addr, port)


def free_port(host: str = "127.0.0.1") -> int:
    """A port the OS says is free now (bind to port 0 on `host` only, read it, release it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def emit_event(event: str, **data: Any) -> None:
    if os.environ.get(EVENTS_ENV):
        sys.stderr.write(EVENT_PREFIX + json.dumps({"event": event, **data}) + "\n")
        sys.stderr.flush()


def _injected(what: str, rank: int) -> bool:
    spec = os.environ.get(INJECT_ENV, "")
    return any(part.strip() == f"{what}@{rank}" for part in spec.split(","))


def _first_sentence(text: str) -> str:
    """The gist of a c10d/gloo message: no source location, no advice paragraph."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    line = re.sub(r"\[[^\]]*\.(?:cc|cpp|h):\d+\]\s*", "", line)
    return line.split(". ")[0].rstrip(".")


def _classify(exc: BaseException, renv: RankEnv, where: str, timeout_s: float) -> RankError:
    """A torch.distributed exception as what happened, in words."""
    text = f"{type(exc).__name__}: {_first_sentence(str(exc))}"
    low = str(exc).lower()
    addr = f"{renv.master_addr}:{renv.master_port}"
    if "address already in use" in low or "eaddrinuse" in low:
        return RankError(
            f"cannot listen on {addr}: the port is in use (choose another MASTER_PORT)", kind="port"
        )
    if where == "join":
        if "timed out" in low or "timeout" in low:
            return RankError(
                f"timed out after {timeout_s:g} s waiting for all {renv.world_size} ranks to join at {addr} "
                f"({text}); check that every rank started and can reach {addr}",
                secondary=renv.rank == 0,
                kind="join-timeout",
            )
        if "connection refused" in low or "connect" in low:
            return RankError(f"cannot reach rank 0 at {addr} ({text})", kind="connect")
        return RankError(f"could not join the process group at {addr} ({text})", kind="join")
    if any(k in low for k in ("closed", "reset by peer", "broken pipe", "connection", "peer")):
        return RankError(
            f"lost a peer during {where}: another rank died ({text})", secondary=True, kind="peer"
        )
    if "timed out" in low or "timeout" in low:
        return RankError(
            f"{where} did not complete within {timeout_s:g} s: a rank is stuck or gone ({text})",
            secondary=True,
            kind="op-timeout",
        )
    return RankError(f"{where} failed ({text})")


@dataclass
class Sweep:
    """What rank 0 hands back: the conditions and one entry per (op, size)."""

    meta: dict[str, Any]
    results: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {**self.meta, "results": self.results}


def run_rank(
    opts: SweepOptions,
    renv: RankEnv,
    on_row: Callable[[dict[str, Any]], None] | None = None,
) -> Sweep | None:
    """Run the sweep as this rank; rank 0 returns the results, the others None. Raises RankError."""
    if _injected("nojoin", renv.rank):
        emit_event("injected", rank=renv.rank, what="nojoin")
        time.sleep(10 * opts.timeout_s + 3600)  # never joins; the launcher must notice and end it
    import torch
    import torch.distributed as dist

    if opts.backend == "nccl":
        from gpuplay.collectives.backend import nccl_unavailable

        why = nccl_unavailable(renv.local_world_size, torch)
        if why:
            raise RankError(why, kind="backend")
        device = torch.device("cuda", renv.local_rank)
        torch.cuda.set_device(device)
    elif opts.backend == "gloo":
        device = torch.device("cpu")
    else:
        raise RankError(f"unknown backend {opts.backend!r}; choose gloo or nccl", kind="backend")
    threads = opts.threads or max(1, (os.cpu_count() or 1) // max(1, renv.local_world_size))
    if device.type == "cpu":
        torch.set_num_threads(threads)

    timeout = _dt.timedelta(seconds=opts.timeout_s)
    emit_event("joining", rank=renv.rank)
    try:
        # env:// is torch's own rendezvous: under torchrun it joins the agent's store
        # (TORCHELASTIC_USE_AGENT_STORE) instead of opening one of its own.
        os.environ.update(MASTER_ADDR=renv.master_addr, MASTER_PORT=str(renv.master_port))
        kw: dict[str, Any] = {"device_id": device} if device.type == "cuda" else {}
        store_fd = os.environ.pop(STORE_FD_ENV, "") if renv.rank == 0 else ""
        if store_fd.isdigit():
            # The launcher bound the store's socket to loopback (TCPStore alone binds every interface).
            master = dist.TCPStore(
                renv.master_addr, renv.master_port, renv.world_size, True, timeout,
                master_listen_fd=int(store_fd),
            )  # fmt: skip
            # the prefix init_process_group gives an env:// store, which the other ranks use
            kw["store"] = dist.PrefixStore("default_pg", master)
        else:
            kw["init_method"] = "env://"
        dist.init_process_group(
            opts.backend,
            rank=renv.rank,
            world_size=renv.world_size,
            timeout=timeout,
            **kw,
        )
    except RankError:
        raise
    except Exception as exc:
        raise _classify(exc, renv, "join", opts.timeout_s) from None
    emit_event("joined", rank=renv.rank)
    try:
        return _sweep(opts, renv, device, threads, on_row)
    finally:
        try:
            dist.destroy_process_group()
        except Exception:
            pass


def _sweep(
    opts: SweepOptions,
    renv: RankEnv,
    device: Any,
    threads: int,
    on_row: Callable[[dict[str, Any]], None] | None,
) -> Sweep | None:
    import psutil
    import torch
    import torch.distributed as dist

    n = renv.world_size
    cuda = device.type == "cuda"

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize(device)

    def barrier() -> None:
        if cuda:
            dist.barrier(device_ids=[device.index])
        else:
            dist.barrier()
        sync()

    where = "the start-up exchange"
    emit_event("case", rank=renv.rank, where=where)
    try:
        me = {
            "rank": renv.rank,
            "host": socket.gethostname(),
            "device": str(device),
            "device_name": torch.cuda.get_device_name(device) if cuda else _cpu_name(),
        }
        ranks: list[Any] = [None] * n
        dist.all_gather_object(ranks, me)
        meta = _meta(opts, renv, ranks, threads, torch)
        emit_event("ready", rank=renv.rank, where=where)
        sweep = Sweep(meta) if renv.rank == 0 else None
        done_timed = 0
        if _injected("hang", renv.rank):
            emit_event("injected", rank=renv.rank, what="hang")
            time.sleep(10 * opts.timeout_s + 3600)
        for op in opts.ops:
            factor = bus_factor(op, n)
            for size in opts.sizes:
                where = f"{op} {format_size(size)}"
                emit_event("case", rank=renv.rank, where=where)
                # Skip a size together on every rank when any rank lacks memory for it.
                short = _memory_short(size, renv, device, psutil, torch)
                flag = torch.tensor([1.0 if short else 0.0], device=device)
                dist.all_reduce(flag, op=dist.ReduceOp.MAX)
                if flag.item() > 0:
                    row = {"op": op, "size_bytes": size, "status": "skipped",
                           "message": short or "another rank has not enough memory for this size"}  # fmt: skip
                    if sweep is not None:
                        sweep.results.append(row)
                        if on_row:
                            on_row(row)
                    continue
                case = make_case(op, size, renv.rank, n, device)
                # Checked run: fresh inputs, result compared with the exact expected values.
                case.reset()
                barrier()
                case.run()
                sync()
                err = case.error()
                for _ in range(max(opts.warmup - 1, 0)):
                    case.reset()
                    barrier()
                    case.run()
                    sync()
                loops, per_loop = loop_plan(opts.iters)

                def timed_op(run: Callable[[], Any] = case.run) -> None:
                    nonlocal done_timed
                    run()
                    done_timed += 1
                    if done_timed == 1 and _injected("exit", renv.rank):
                        sync()
                        emit_event("injected", rank=renv.rank, what="exit")
                        sys.stderr.flush()
                        os._exit(INJECTED_EXIT_CODE)

                case.reset()
                times = time_loops(timed_op, barrier, sync, loops, per_loop)
                slowest = torch.tensor(times, dtype=torch.float64, device=device)
                mean = slowest.clone()
                dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
                dist.all_reduce(mean, op=dist.ReduceOp.SUM)
                errt = torch.tensor([err], dtype=torch.float64, device=device)
                dist.all_reduce(errt, op=dist.ReduceOp.MAX)
                emit_event("progress", rank=renv.rank, where=where)
                del case
                if sweep is None:
                    continue
                samples = [float(t) for t in slowest.cpu().tolist()]
                rank_mean = [float(t) / n for t in mean.cpu().tolist()]
                s = summarize(samples)
                assert s is not None
                alg = algbw(size_eff := _eff_bytes(op, size, n), s.median)
                row = {
                    "op": op,
                    "size_bytes": size_eff,
                    "size_asked": size,
                    "count": size_eff // ELEMENT_BYTES,
                    "status": "ok",
                    "message": "",
                    "samples_s": samples,
                    "rank_mean_s": rank_mean,
                    "ops_per_sample": per_loop,
                    "summary": s.to_dict(),
                    "algbw_gbs": alg / 1e9,
                    "busbw_gbs": alg * factor / 1e9,
                    "bus_factor": factor,
                    "max_error": float(errt.item()),
                    "check_ok": float(errt.item()) == 0.0,
                }
                sweep.results.append(row)
                if on_row:
                    on_row(row)
        return sweep
    except RankError:
        raise
    except Exception as exc:
        raise _classify(exc, renv, where, opts.timeout_s) from None


def _eff_bytes(op: str, size: int, n: int) -> int:
    from gpuplay.collectives.ops import element_count

    return element_count(size, n) * ELEMENT_BYTES


def _memory_short(size: int, renv: RankEnv, device: Any, psutil: Any, torch: Any) -> str:
    """Why this rank cannot hold a case of `size` bytes (input, output, expected: ~3 S), or ''."""
    need = 3 * size + (1 << 20)
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        if need > 0.9 * free:
            return f"needs ~{format_size(need)} on {device}, {format_size(free)} free"
        return ""
    avail = psutil.virtual_memory().available
    share = avail / max(1, renv.local_world_size)
    if need > 0.5 * share:
        return (
            f"needs ~{format_size(need)} per rank; {format_size(avail)} available for "
            f"{renv.local_world_size} local rank(s)"
        )
    return ""


def _cpu_name() -> str:
    from gpuplay.core.hw.system import cpu_count, cpu_name

    return f"{cpu_name()} ({cpu_count()} cores)"


def _meta(opts: SweepOptions, renv: RankEnv, ranks: list[Any], threads: int, torch: Any) -> dict[str, Any]:
    from gpuplay.core.reports.report import environment

    env = environment()
    if opts.backend == "nccl":
        try:
            v = torch.cuda.nccl.version()
            env["nccl"] = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
        except Exception:
            pass
        env["cuda"] = torch.version.cuda
    hosts = sorted({r["host"] for r in ranks})
    return {
        "kind": "gpuplay-collectives",
        "environment": env,
        "backend": opts.backend,
        "world_size": renv.world_size,
        "nodes": len(hosts),
        "hosts": hosts,
        "ranks": ranks,
        "dtype": "float32",
        "iters": opts.iters,
        "warmup": opts.warmup,
        "timeout_s": opts.timeout_s,
        "threads_per_rank": threads if opts.backend == "gloo" else None,
        "samples": loop_plan(opts.iters)[0],
        "ops_per_sample": loop_plan(opts.iters)[1],
        "timing": "as nccl-tests' BenchTime: one barrier, then a loop of back-to-back ops timed on the "
        "host until the last completed, divided by the op count; per loop the slowest rank's time "
        "(nccl-tests' default averages the ranks: rank_mean_s)",
        "bandwidth": "algbw = S/t (S = whole array, as nccl-tests); busbw = algbw × factor "
        "(all_reduce 2(n-1)/n; all_gather, reduce_scatter, all_to_all (n-1)/n; broadcast 1)",
        "started": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
    }
