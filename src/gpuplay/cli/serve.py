"""`gpuplay serve`: the playground (or a demo deck) in a browser, through textual-serve.

Each browser tab gets its own gpuplay process. textual-serve starts those through a shell
and, when the server stops, leaves them running; here each one leads its own process group,
dies with the server (PR_SET_PDEATHSIG where Linux has it), and is terminated, then killed,
with everything it started when the server shuts down.
"""

from __future__ import annotations

import ipaddress
import os
import shlex
import sys
from typing import Any

import click

GRACE_S = 2.0  # SIGTERM first; whatever still runs after this gets SIGKILL


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def app_command(scenario_dirs: tuple[str, ...], deck: str | None, theme: str | None) -> str:
    """The shell command each browser session runs (exec: no shell left between us and the app)."""
    argv = [sys.executable, "-m", "gpuplay"]
    for d in scenario_dirs:
        argv += ["--scenarios", d]
    if deck:
        argv += ["demo", deck]
        if theme:
            argv += ["--theme", theme]
    return "exec " + shlex.join(argv)


def _die_with_parent() -> None:
    """In the child, before exec: get SIGTERM when the server process dies, even by SIGKILL."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def stop_process_groups(pids: list[int], grace_s: float = GRACE_S) -> None:
    """Terminate each process group led by `pids` and every descendant; kill what outlives `grace_s`."""
    import signal

    import psutil

    procs: list[psutil.Process] = []
    for pid in pids:
        try:
            leader = psutil.Process(pid)
            procs += [leader, *leader.children(recursive=True)]
        except psutil.NoSuchProcess:
            pass
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.killpg(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        for p in procs:  # descendants that left the group (their own session) too
            try:
                p.send_signal(sig)
            except psutil.NoSuchProcess:
                pass
        _gone, procs = psutil.wait_procs(procs, timeout=grace_s if sig == signal.SIGTERM else 5.0)
        if not procs:
            return


def make_server(command: str, host: str, port: int, title: str) -> Any:
    import asyncio

    from aiohttp import WSCloseCode, web
    from textual_serve.app_service import AppService
    from textual_serve.server import Server, to_int

    class TrackedAppService(AppService):
        """AppService whose app process leads its own process group, known to the server."""

        def __init__(self, *args: Any, server: GpuplayServer, **kw: Any) -> None:
            super().__init__(*args, **kw)
            self.server = server

        async def _open_app_process(self, width: int = 80, height: int = 24) -> Any:
            env = self._build_environment(width=width, height=height)
            self._process = process = await asyncio.create_subprocess_shell(
                self.command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=env,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
            assert process.stdin is not None
            self._stdin = process.stdin
            self.server.children.add(process.pid)
            return process

    class GpuplayServer(Server):
        def __init__(self) -> None:
            super().__init__(command, host=host, port=port, title=title)
            self.children: set[int] = set()
            self.sockets: set[web.WebSocketResponse] = set()

        def initialize_logging(self) -> None:
            import logging

            super().initialize_logging()
            logging.getLogger("aiohttp.access").setLevel(logging.WARNING)

        async def handle_index(self, request: web.Request) -> Any:
            # Links and the websocket follow the address the browser used (an ssh -L tunnel,
            # another port), not the address the server bound.
            self.public_url = f"{request.scheme}://{request.host}"
            return await super().handle_index(request)

        async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
            websocket = web.WebSocketResponse(heartbeat=15)
            width = to_int(request.query.get("width", "80"), 80)
            height = to_int(request.query.get("height", "24"), 24)
            service: TrackedAppService | None = None
            self.sockets.add(websocket)
            try:
                await websocket.prepare(request)
                service = TrackedAppService(
                    self.command,
                    write_bytes=websocket.send_bytes,
                    write_str=websocket.send_str,
                    close=websocket.close,
                    download_manager=self.download_manager,
                    debug=self.debug,
                    server=self,
                )
                await service.start(width, height)
                await self._process_messages(websocket, service)
            except asyncio.CancelledError:
                await websocket.close()
            finally:
                self.sockets.discard(websocket)
                if service is not None:
                    await service.stop()
                    proc = service._process
                    if proc is not None:
                        if proc.returncode is None:
                            await asyncio.to_thread(stop_process_groups, [proc.pid])
                        self.children.discard(proc.pid)
            return websocket

        async def on_startup(self, app: web.Application) -> None:
            pass  # our own banner is printed before serving

        async def on_shutdown(self, app: web.Application) -> None:
            stop_process_groups(sorted(self.children))
            self.children.clear()
            for ws in list(self.sockets):
                await ws.close(code=WSCloseCode.GOING_AWAY, message=b"server shutting down")

    return GpuplayServer()


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (loopback by default).")
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True)
@click.option(
    "--public",
    is_flag=True,
    help="Allow a non-loopback --host (default 0.0.0.0 with this flag): anyone who reaches it runs gpuplay here.",
)
@click.option(
    "--demo", "deck", default=None, metavar="DECK", help="Serve the presenter of a demo deck instead."
)
@click.option("--theme", default=None, metavar="NAME", help="Theme for --demo (e.g. projector).")
@click.pass_context
def serve(
    ctx: click.Context, host: str, port: int, public: bool, deck: str | None, theme: str | None
) -> None:
    """The gpuplay playground in a web browser (one gpuplay process per browser tab).

    Reach a remote GPU box from a laptop through SSH: the server stays on loopback and the
    printed `ssh -L` line forwards it.
    """
    import getpass
    import socket

    from gpuplay.cli import options

    if public and host == "127.0.0.1":
        host = "0.0.0.0"
    if not is_loopback(host) and not public:
        raise click.UsageError(
            f"--host {host} is not a loopback address: anyone who reaches it could run gpuplay on this "
            "machine. Pass --public to confirm, or keep the default and use the ssh -L line it prints."
        )
    if theme and not deck:
        raise click.UsageError("--theme applies to --demo DECK")
    try:
        import textual_serve  # noqa: F401
    except ImportError:
        raise click.ClickException("gpuplay serve needs textual-serve: pip install textual-serve") from None
    err = click.echo
    command = app_command(options.scenario_dirs(ctx, ()), deck, theme)
    server = make_server(command, host, port, "gpuplay" + (f" · {deck}" if deck else ""))
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    err(f"gpuplay serve: http://{shown}:{port}  (one gpuplay per browser tab; Ctrl+C stops it and them)")
    if not is_loopback(host):
        err(
            f"warning: listening on {host}:{port} without authentication: anyone who reaches this "
            "address can run gpuplay on this machine.",
            err=True,
        )
    err(
        f"from a laptop: ssh -L {port}:127.0.0.1:{port} {getpass.getuser()}@{socket.gethostname()}  "
        f"then open http://localhost:{port}"
    )
    sys.stdout.flush()
    try:
        server.serve()
    except OSError as exc:
        raise click.ClickException(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}; choose another --port"
        ) from None


command = serve
