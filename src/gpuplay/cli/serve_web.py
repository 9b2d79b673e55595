"""The web side of `gpuplay serve`: textual-serve's app sessions behind a guard, with limits.

What textual-serve gives: a page with xterm.js and a websocket per tab, each driving a Textual app
process (AppService). What this module adds:
- every request passes the Guard (serve_guard: Host, Origin, token or cookie), else 403;
- our own page: no Google Fonts (the fonts are served from here), a Content-Security-Policy that
  lets nothing load from another host, a script for focus, clicker keys, font size and reconnect;
- static files from a fixed list (no directory listing, no path to walk);
- at most `max_sessions` sessions (a clear page and a websocket notice beyond), each closed after
  `idle_timeout_s` without input;
- a session whose app fails shows the app's error in the page instead of a splash that never ends.
"""

from __future__ import annotations

import asyncio
import html
import json
import re
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import WSCloseCode, WSMsgType, web
from textual_serve.app_service import AppService
from textual_serve.server import Server, to_int

from gpuplay.cli.serve_guard import COOKIE_MAX_AGE_S, Guard
from gpuplay.cli.serve_procs import die_with_parent, stop_process_groups
from gpuplay.core.reports.decks import TALK_SESSION_ENV

WEB_DIR = Path(__file__).with_name("web")

# Websocket close codes the page knows (gpuplay.js): none of them is followed by a reconnect.
CLOSE_IDLE = 4000
CLOSE_BUSY = 4001
CLOSE_APP_ERROR = 4002

STOP_WAIT_S = 5.0  # an app asked to quit gets this long before its process group is ended
STDERR_KEEP = 16 * 1024  # the tail of an app's stderr kept to show in the page when it fails
SHOWN_ERROR_CHARS = 4000

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; font-src 'self'; "
    "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,  # nothing is fetched from, or sent to, another host
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}

# textual.js keeps its terminal class private and starts it from window.onload. The copy served
# here exposes the class and renames the onload, so gpuplay.js starts it (and restarts it).
TEXTUAL_JS_MARKER = "window.onload=e=>{"
TEXTUAL_JS_PATCH = "window.TextualTerminal=w;window.textualServeOnload=e=>{"

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def printable(text: str) -> str:
    """An app's stderr as plain text: no terminal escapes, no other control characters."""
    return _CONTROL.sub("", _ANSI.sub("", text))


def patch_textual_js(source: str) -> str:
    if source.count(TEXTUAL_JS_MARKER) != 1 or "class w{constructor(e,t){this.element=e" not in source:
        raise RuntimeError(
            "this textual-serve's textual.js is not the one gpuplay serve knows how to start "
            "(install textual-serve 1.1.x)"
        )
    return source.replace(TEXTUAL_JS_MARKER, TEXTUAL_JS_PATCH)


def static_files() -> dict[str, tuple[bytes, str]]:
    """Every file the page may load, by the path under /static/: nothing else is served there."""
    import textual_serve

    ts = Path(textual_serve.__file__).parent / "static"
    files = {
        "css/xterm.css": ((ts / "css/xterm.css").read_bytes(), "text/css"),
        "js/textual.js": (
            patch_textual_js((ts / "js/textual.js").read_text(encoding="utf-8")).encode(),
            "text/javascript",
        ),
        "gpuplay.js": ((WEB_DIR / "gpuplay.js").read_bytes(), "text/javascript"),
        "gpuplay.css": ((WEB_DIR / "gpuplay.css").read_bytes(), "text/css"),
    }
    for font in ("RobotoMono-VariableFont_wght.ttf", "RobotoMono-Italic-VariableFont_wght.ttf"):
        files[f"fonts/{font}"] = ((ts / "fonts" / font).read_bytes(), "font/ttf")
    return files


def message_page(status: int, title: str, detail: str, refresh_s: int | None = None) -> web.Response:
    """A small self-contained page (no script, no external resource) for 403 and 503."""
    refresh = f'<meta http-equiv="refresh" content="{refresh_s}">' if refresh_s else ""
    body = (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>gpuplay: {html.escape(title)}</title>{refresh}"
        "<style>body{background:#0c181f;color:#eee;font:18px ui-monospace,Menlo,Consolas,monospace;"
        "margin:10vh 10vw}p{opacity:.8;white-space:pre-wrap}</style></head><body>"
        f"<h1>{html.escape(title)}</h1><p>{html.escape(detail)}</p></body></html>"
    )
    return web.Response(status=status, text=body, content_type="text/html", headers=SECURITY_HEADERS)


@dataclass
class ServeConfig:
    command: str
    host: str
    port: int
    title: str
    guard: Guard
    max_sessions: int = 4
    idle_timeout_s: float = 3600.0
    talk: bool = False
    font_size: int = 16


@dataclass
class Session:
    websocket: web.WebSocketResponse
    last_input: float
    service: AppService | None = None
    closing: str = ""  # why the server closes it, once it does
    tasks: list[asyncio.Task[Any]] = field(default_factory=list)


def notice(title: str, detail: str = "", restart: bool = True) -> str:
    return json.dumps(["gpuplay_notice", {"title": title, "detail": detail, "restart": restart}])


class SessionAppService(AppService):
    """AppService whose app leads its own process group, and whose end is reported to the page."""

    def __init__(
        self, *args: Any, server: GpuplayServer, session: Session, talk_id: str = "", **kw: Any
    ) -> None:
        super().__init__(*args, **kw)
        self.server = server
        self.session = session
        self.stderr_tail = b""
        self.talk_id = talk_id
        self.started = False  # the app said it is a Textual app (its first line)
        self.exit_requested = False

    async def _open_app_process(self, width: int = 80, height: int = 24) -> Any:
        env = self._build_environment(width=width, height=height)
        if self.talk_id:  # this tab's own saved step (core/reports/decks.py), never another session's
            env[TALK_SESSION_ENV] = self.talk_id
        else:
            env.pop(TALK_SESSION_ENV, None)
        self._process = process = await asyncio.create_subprocess_shell(
            self.command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
        assert process.stdin is not None
        self._stdin = process.stdin
        self.server.children.add(process.pid)
        return process

    async def on_meta(self, data: bytes) -> None:
        try:
            kind = json.loads(data).get("type")
        except (ValueError, AttributeError):
            return
        if kind == "exit":  # the app is ending: its exit status decides what the page shows
            self.exit_requested = True
            return
        await super().on_meta(data)

    async def run(self) -> None:
        """textual-serve's reader, keeping the tail of stderr and telling the page how the app ended."""
        process = self._process
        assert process is not None and process.stdout is not None and process.stderr is not None
        stdout, stderr = process.stdout, process.stderr

        async def read_stderr() -> None:
            while data := await stderr.read(4096):
                self.stderr_tail = (self.stderr_tail + data)[-STDERR_KEEP:]

        stderr_task = asyncio.create_task(read_stderr())
        try:
            for _ in range(10):  # the prelude: a Textual app under the web driver says so first
                line = await stdout.readline()
                if not line:
                    break
                if line == b"__GANGLION__\n":
                    self.started = True
                    break
            while self.started:
                kind = await stdout.readexactly(1)
                size = int.from_bytes(await stdout.readexactly(4), "big")
                payload = await stdout.readexactly(size)
                if kind == b"D":
                    await self.on_data(payload)
                elif kind == b"M":
                    await self.on_meta(payload)
                elif kind == b"P":
                    await self.on_packed(payload)
        except (asyncio.IncompleteReadError, ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            try:
                await asyncio.wait_for(process.wait(), STOP_WAIT_S)
            except (TimeoutError, asyncio.CancelledError):
                pass
            try:
                await asyncio.wait_for(stderr_task, 1.0)
            except (TimeoutError, asyncio.CancelledError):
                stderr_task.cancel()
        await self.server.app_ended(self)


class GpuplayServer(Server):
    def __init__(self, config: ServeConfig) -> None:
        super().__init__(config.command, host=config.host, port=config.port, title=config.title)
        self.config = config
        self.guard = config.guard
        self.children: set[int] = set()
        self.sessions: dict[web.WebSocketResponse, Session] = {}
        self.files = static_files()
        self.template = string.Template((WEB_DIR / "index.html").read_text(encoding="utf-8"))

    def bind(self) -> int:
        """Bind and listen on the configured host and port now, before any URL is printed: a port
        in use (or an address not on this machine) is an error before the tokened URL and the
        `ssh -L` line, not after them. Returns the port (the one chosen, for --port 0)."""
        import socket

        socks: list[socket.socket] = []
        try:
            infos = socket.getaddrinfo(
                self.host or None, self.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
            )
            port = self.port
            for family, kind, proto, _, address in dict.fromkeys((i[0], i[1], i[2], "", i[4]) for i in infos):
                sock = socket.socket(family, kind, proto)
                socks.append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as aiohttp does on Unix
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                if port == 0 and socks[:-1]:  # --port 0: every address on the port the first got
                    address = (address[0], socks[0].getsockname()[1], *address[2:])
                sock.bind(address)
                sock.listen(128)
                sock.setblocking(False)
            port = socks[0].getsockname()[1] if socks else port
        except OSError:
            for sock in socks:
                sock.close()
            raise
        self._socks = socks
        self.port = port
        return port

    def serve(self, debug: bool = False) -> None:
        """textual-serve's serve, on the sockets bind() opened (aiohttp binds them itself otherwise)."""
        import asyncio
        import signal

        socks = getattr(self, "_socks", None)
        if not socks:
            return super().serve(debug)
        self.debug = debug
        self.initialize_logging()
        try:
            loop = asyncio.get_event_loop()
        except Exception:
            loop = asyncio.new_event_loop()
        try:
            loop.add_signal_handler(signal.SIGINT, self.request_exit)
            loop.add_signal_handler(signal.SIGTERM, self.request_exit)
        except NotImplementedError:
            pass
        web.run_app(self._make_app(), sock=socks, handle_signals=False, loop=loop, print=lambda *args: None)

    def initialize_logging(self) -> None:
        import logging

        super().initialize_logging()
        logging.getLogger("aiohttp.access").setLevel(logging.WARNING)

    async def _make_app(self) -> web.Application:
        app = web.Application(middlewares=[self.guard_middleware])
        app.add_routes(
            [
                web.get("/", self.handle_index),
                web.get("/alive", self.handle_alive),
                web.get("/ws", self.handle_websocket),
                web.get("/ws/{talk:[0-9a-f]{32}}", self.handle_websocket),  # a talk's tab (gpuplay.js)
                web.get("/download/{key}", self.handle_download),
                web.get("/static/{name:.+}", self.handle_static),
            ]
        )
        app.on_shutdown.append(self.on_shutdown)
        return app

    @web.middleware
    async def guard_middleware(self, request: web.Request, handler: Any) -> web.StreamResponse:
        refused = self.guard.refusal(
            request.headers.get("Host", ""),
            request.headers.get("Origin"),
            request.scheme,
            request.query.get("token"),
            request.headers.get("Authorization"),
            request.cookies.get(self.guard.signer.name),
        )
        if refused is not None:
            why, _ = refused
            return message_page(
                403,
                f"403 Forbidden: {why}",
                "Open the URL that `gpuplay serve` printed (http://…/?token=…) in this browser.",
            )
        response = await handler(request)
        if not response.prepared:
            for k, v in SECURITY_HEADERS.items():
                response.headers.setdefault(k, v)
        return response

    def busy(self) -> bool:
        return len(self.sessions) >= self.config.max_sessions

    def busy_text(self) -> str:
        n = self.config.max_sessions
        which = (
            "The only session of this gpuplay server is"
            if n == 1
            else f"All {n} sessions of this gpuplay server are"
        )
        return (
            f"{which} in use (each browser tab "
            "is one gpuplay process). Close another tab and this one will start; or restart "
            "`gpuplay serve` with a larger --max-sessions."
        )

    async def handle_index(self, request: web.Request) -> web.StreamResponse:
        if self.busy():
            return message_page(503, "All sessions are in use", self.busy_text(), refresh_s=5)
        page = self.template.substitute(
            title=html.escape(self.title),
            talk="1" if self.config.talk else "0",
            font_size=str(self.config.font_size),
        )
        response = web.Response(text=page, content_type="text/html")
        token = request.query.get("token")
        if token is not None and self.guard.token_in(token, None):
            # Signed in once with the token: the cookie carries on (the page strips the token).
            response.set_cookie(
                self.guard.signer.name,
                self.guard.signer.issue(),
                max_age=COOKIE_MAX_AGE_S,
                path="/",
                httponly=True,
                samesite="Strict",
                secure=request.secure,
            )
        return response

    async def handle_alive(self, request: web.Request) -> web.Response:
        """What the page asks before reconnecting: signed in (204), or every session in use (503)."""
        return web.Response(status=503 if self.busy() else 204)

    async def handle_static(self, request: web.Request) -> web.Response:
        found = self.files.get(request.match_info["name"])
        if found is None:
            raise web.HTTPNotFound()
        body, content_type = found
        return web.Response(body=body, content_type=content_type, headers={"Cache-Control": "no-cache"})

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        loop = asyncio.get_running_loop()
        websocket = web.WebSocketResponse(heartbeat=15, max_msg_size=1 << 20)
        if self.busy():
            await websocket.prepare(request)
            await websocket.send_str(notice("All sessions are in use", self.busy_text()))
            await websocket.close(code=CLOSE_BUSY, message=b"every session is in use")
            return websocket
        session = Session(websocket, last_input=loop.time())
        self.sessions[websocket] = session  # counted before the first await: the cap holds
        width = max(10, min(1000, to_int(request.query.get("width", "80"), 80)))
        height = max(5, min(500, to_int(request.query.get("height", "24"), 24)))
        try:
            await websocket.prepare(request)
            service = SessionAppService(
                self.command,
                write_bytes=websocket.send_bytes,
                write_str=websocket.send_str,
                close=websocket.close,
                download_manager=self.download_manager,
                debug=self.debug,
                server=self,
                session=session,
                talk_id=request.match_info.get("talk", ""),
            )
            session.service = service
            await service.start(width, height)
            session.tasks.append(asyncio.create_task(self.close_when_idle(session)))
            await self.process_messages(session)
        except asyncio.CancelledError:
            await websocket.close()
        finally:
            self.sessions.pop(websocket, None)
            for task in session.tasks:
                task.cancel()
            await self.end_service(session.service)
        return websocket

    async def process_messages(self, session: Session) -> None:
        """The browser's messages to the app; input and resizing count as activity."""
        service = session.service
        assert service is not None
        loop = asyncio.get_running_loop()
        async for message in session.websocket:
            if message.type != WSMsgType.TEXT:
                continue
            try:
                kind, *rest = json.loads(message.data)
            except (ValueError, TypeError):
                continue
            if kind == "stdin" and rest and isinstance(rest[0], str):
                session.last_input = loop.time()
                await service.send_bytes(rest[0].encode("utf-8"))
            elif kind == "resize" and rest and isinstance(rest[0], dict):
                session.last_input = loop.time()
                w, h = to_int(str(rest[0].get("width")), 80), to_int(str(rest[0].get("height")), 24)
                await service.set_terminal_size(max(10, min(1000, w)), max(5, min(500, h)))
            elif kind == "ping" and rest:
                await session.websocket.send_json(["pong", str(rest[0])[:64]])
            elif kind == "blur":
                await service.blur()
            elif kind == "focus":
                await service.focus()

    async def close_when_idle(self, session: Session) -> None:
        loop = asyncio.get_running_loop()
        limit = self.config.idle_timeout_s
        while not session.websocket.closed:
            left = session.last_input + limit - loop.time()
            if left <= 0:
                session.closing = "idle"
                minutes = limit / 60
                shown = f"{minutes:.0f} min" if minutes >= 1 else f"{limit:g} s"
                await session.websocket.send_str(
                    notice(
                        "Session closed: no input for " + shown,
                        "Its gpuplay process has ended to free the machine (--idle-timeout).",
                    )
                )
                await session.websocket.close(code=CLOSE_IDLE, message=b"idle")
                return
            await asyncio.sleep(min(left, 30.0) + 0.05)

    async def app_ended(self, service: SessionAppService) -> None:
        """The app's process is gone: say how in the page, then close its websocket."""
        ws = service.session.websocket
        if ws.closed or service.session.closing:
            return
        code = service._process.returncode if service._process is not None else None
        if service.started and code == 0:
            await ws.close(code=WSCloseCode.OK, message=b"gpuplay quit in this tab")
            return
        tail = printable(service.stderr_tail.decode("utf-8", "replace")).strip()
        if len(tail) > SHOWN_ERROR_CHARS:
            tail = "…" + tail[-SHOWN_ERROR_CHARS:]
        status = f"exit status {code}" if code is not None and code >= 0 else f"signal {-(code or 0)}"
        title = "gpuplay stopped in this session" if service.started else "gpuplay could not start"
        try:
            await ws.send_str(notice(f"{title} ({status})", tail or "(it wrote no error message)"))
            await ws.close(code=CLOSE_APP_ERROR, message=b"the app ended with an error")
        except ConnectionError:
            pass

    async def end_service(self, service: AppService | None) -> None:
        if service is None:
            return
        try:
            await asyncio.wait_for(service.stop(), STOP_WAIT_S)
        except Exception:  # a timeout, or an app already gone
            pass
        proc = service._process
        if proc is not None:
            if proc.returncode is None:
                await asyncio.to_thread(stop_process_groups, [proc.pid])
            self.children.discard(proc.pid)

    async def on_shutdown(self, app: web.Application) -> None:
        stop_process_groups(sorted(self.children))
        self.children.clear()
        for ws in list(self.sessions):
            ws_session = self.sessions.get(ws)
            if ws_session is not None:
                ws_session.closing = "shutdown"
            await ws.close(code=WSCloseCode.GOING_AWAY, message=b"server shutting down")


def make_server(config: ServeConfig) -> GpuplayServer:
    return GpuplayServer(config)
