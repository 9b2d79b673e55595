"""`gpuplay serve`: loopback by default, and no gpuplay process outlives the server."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

import aiohttp
import psutil
import pytest
from click.testing import CliRunner

from gpuplay.cli import main
from gpuplay.cli.serve import app_command, is_loopback, ssh_hint, stop_process_groups
from tests.e2e.serve_helpers import alive, app_processes, free_port, start_server, wait_gone


def test_non_loopback_host_needs_public_flag():
    result = CliRunner().invoke(main, ["serve", "--host", "0.0.0.0"])
    assert result.exit_code == 2
    assert "not a loopback address" in result.output and "--public" in result.output


def test_loopback_detection_and_command():
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.0.0.5") and not is_loopback("gpu-box")
    cmd = app_command(("my scenarios",), "numpy-to-gpu", "projector")
    assert cmd.startswith("exec ") and "'my scenarios'" in cmd
    assert cmd.endswith("demo numpy-to-gpu --theme projector")
    cmd = app_command((), "d.toml", None, preset="quick", replay="/r r.json", resume=True)
    assert cmd.endswith("demo d.toml --preset quick --replay '/r r.json' --resume")


def test_ssh_hint_forwards_to_where_the_server_listens():
    assert ssh_hint("127.0.0.1", 8000, "ann", "box") == "ssh -L 8000:127.0.0.1:8000 ann@box"
    assert ssh_hint("0.0.0.0", 8000, "ann", "box") == "ssh -L 8000:127.0.0.1:8000 ann@box"
    # bound to one address only: forwarding to 127.0.0.1 would reach nothing there
    assert ssh_hint("10.0.0.5", 8001, "ann", "box") == "ssh -L 8001:10.0.0.5:8001 ann@box"
    assert ssh_hint("::1", 8000, "ann", "box") == "ssh -L 8000:[::1]:8000 ann@box"
    assert ssh_hint("fd00::5", 8000, "ann", "box") == "ssh -L 8000:[fd00::5]:8000 ann@box"


def test_stop_process_groups_reaches_the_whole_tree():
    # A leader that ignores SIGTERM, a child in its group, and a grandchild in a session of its own.
    code = (
        "import os, signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "subprocess.Popen(['sleep', '60'])\n"
        "subprocess.Popen([sys.executable, '-c', 'import os, time; os.setsid(); time.sleep(60)'])\n"
        "print('ready', flush=True); time.sleep(60)\n"
    )
    leader = subprocess.Popen(
        [sys.executable, "-c", code], start_new_session=True, stdout=subprocess.PIPE, text=True
    )
    assert leader.stdout is not None and leader.stdout.readline().strip() == "ready"
    tree = [leader.pid, *(c.pid for c in psutil.Process(leader.pid).children(recursive=True))]
    assert len(tree) == 3
    t0 = time.monotonic()
    stop_process_groups([leader.pid], grace_s=0.5)
    leader.wait(timeout=5)
    assert not wait_gone(tree, 5)
    assert time.monotonic() - t0 < 5


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_app_processes_stop_with_the_server(sig):
    """Two browser sessions start two gpuplay apps; stopping the server leaves none running."""
    port = free_port()
    server = start_server(port)
    sessions: list[subprocess.Popen] = []
    try:
        # Keep two websocket sessions open in helper processes (as two browser tabs would).
        client = (
            "import asyncio, aiohttp, sys\n"
            "async def main():\n"
            "    async with aiohttp.ClientSession() as s, s.ws_connect(sys.argv[1]) as ws:\n"
            "        async for _ in ws:\n"
            "            print('frame', flush=True)\n"
            "            async for _ in ws: pass\n"
            "asyncio.run(main())\n"
        )
        url = f"http://127.0.0.1:{port}/ws?width=100&height=30&token={server.token}"
        sessions = [
            subprocess.Popen([sys.executable, "-c", client, url], stdout=subprocess.PIPE, text=True)
            for _ in range(2)
        ]
        for s in sessions:  # each app has drawn its first frame
            assert s.stdout is not None and s.stdout.readline().strip() == "frame"
        time.sleep(4)  # torch imported, a measurement running: the case a bare textual-serve orphans
        apps = app_processes(server.pid)
        assert len(apps) == 2, "two sessions should have started two gpuplay apps"
        for p in apps:
            assert os.getpgid(p.pid) == p.pid  # each leads its own process group
        pids = [p.pid for p in apps]
        children = [c for p in apps for c in p.children(recursive=True)]
        assert any("gpuplay.core.engine.server" in " ".join(c.cmdline()) for c in children)
        pids += [c.pid for c in children]  # the apps' engine processes must go too
        t0 = time.monotonic()
        server.send_signal(sig)
        server.wait(timeout=20)
        assert time.monotonic() - t0 < 10, "the server took more than 10 s to stop"
        assert not wait_gone(pids, 15), f"gpuplay processes left running after {sig.name}: {alive(pids)}"
    finally:
        for s in sessions:
            s.kill()
        if server.poll() is None:
            server.kill()


# --- who may talk to the server -------------------------------------------------------


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], str]:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, dict(r.headers), r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode("utf-8", "replace")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """One server for the request-level checks (no browser session started by them)."""
    state = tmp_path_factory.mktemp("serve-state")
    port = free_port()
    server = start_server(port, env={"GPUPLAY_STATE_DIR": str(state)})
    yield server, port
    server.terminate()
    server.wait(timeout=20)


def test_token_then_cookie(served):
    server, port = served
    base = f"http://127.0.0.1:{port}"
    assert len(server.token) >= 40  # secrets.token_urlsafe(32)
    assert _get(base + "/")[0] == 403, "no token"
    assert _get(base + "/?token=" + "x" * len(server.token))[0] == 403, "wrong token"
    status, headers, _page = _get(base + "/?token=" + server.token)
    assert status == 200
    cookie = headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    pair = cookie.split(";", 1)[0]
    assert _get(base + "/", {"Cookie": pair})[0] == 200, "the cookie alone"
    assert _get(base + "/static/gpuplay.js", {"Cookie": pair})[0] == 200
    status, icon_headers, icon = _get(base + "/favicon.ico", {"Cookie": pair})  # no 404 in the console
    assert status == 200 and icon_headers["Content-Type"] == "image/svg+xml" and "<svg" in icon
    tampered = pair[:-1] + ("0" if pair[-1] != "0" else "1")
    assert _get(base + "/", {"Cookie": tampered})[0] == 403, "a forged cookie"
    assert _get(base + "/static/gpuplay.js")[0] == 403, "a static file without the token"
    assert _get(base + "/alive", {"Authorization": "token " + server.token})[0] == 204


def test_bad_host_refused(served):
    server, port = served
    url = f"http://127.0.0.1:{port}/?token={server.token}"
    assert _get(url, {"Host": f"evil.example:{port}"})[0] == 403  # DNS rebinding
    assert _get(url, {"Host": f"localhost:{port}"})[0] == 200
    assert _get(url, {"Host": f"[::1]:{port}"})[0] == 200


def test_page_loads_nothing_from_another_host(served):
    server, port = served
    base = f"http://127.0.0.1:{port}"
    status, headers, page = _get(f"{base}/?token={server.token}")
    assert status == 200
    assert "default-src 'none'" in headers["Content-Security-Policy"]
    assert "fonts.googleapis" not in page
    loaded = re.findall(r'(?:href|src)="([^"]+)"', page)
    assert loaded and all(u.startswith("/static/") for u in loaded), loaded
    auth = {"Authorization": "token " + server.token}
    for url in loaded:
        status, _h, body = _get(base + url, auth)
        assert status == 200, url
        if url.endswith(".css"):
            code = re.sub(r"/\*.*?\*/", "", body, flags=re.S)  # license comments name web sites
            assert not re.search(r"https?://", code), f"{url} refers to another host"
            for ref in re.findall(r"url\(\s*['\"]?([^'\")]+)", code):
                assert _get(f"{base}/static/{ref}", auth)[0] == 200, ref  # the fonts are served here
    assert not re.search(r"https?://", re.sub(r"<!--.*?-->", "", page, flags=re.S))
    for listing in ("/static/", "/static/css/", "/static/fonts", "/static/../"):
        assert _get(base + listing, auth)[0] == 404, listing


async def _ws_outcome(url: str, origin: str | None) -> str:
    headers = {"Origin": origin} if origin else {}
    async with aiohttp.ClientSession() as s:
        try:
            async with s.ws_connect(url, headers=headers, timeout=aiohttp.ClientWSTimeout(ws_close=5)) as ws:
                msg = await ws.receive(timeout=60)
                return (
                    "frame"
                    if msg.type in (aiohttp.WSMsgType.BINARY, aiohttp.WSMsgType.TEXT)
                    else str(msg.type)
                )
        except aiohttp.WSServerHandshakeError as exc:
            return f"refused {exc.status}"


@pytest.mark.slow
def test_websocket_origin(served):
    server, port = served
    url = f"http://127.0.0.1:{port}/ws?token={server.token}"
    assert asyncio.run(_ws_outcome(url, "http://evil.example")) == "refused 403"
    assert asyncio.run(_ws_outcome(url, f"http://127.0.0.1:{port}.evil.example")) == "refused 403"
    assert asyncio.run(_ws_outcome(url, "null")) == "refused 403"
    assert asyncio.run(_ws_outcome(url, f"http://127.0.0.1:{port}")) == "frame"  # the page's own


async def _fill_sessions(url: str, n: int) -> tuple[list[int | None], str]:
    async with aiohttp.ClientSession() as s:
        sockets = [await s.ws_connect(url) for _ in range(n)]
        try:
            extra = await s.ws_connect(url)
            notice = await extra.receive(timeout=10)
            closed = await extra.receive(timeout=10)
            codes = [extra.close_code]
            text = notice.data if notice.type == aiohttp.WSMsgType.TEXT else ""
            assert closed.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
            async with s.get(url.replace("/ws", "/")) as page:
                text += f"\n{page.status}\n" + await page.text()
        finally:
            for ws in sockets:
                await ws.close()
        return codes, text


@pytest.mark.slow
def test_fifth_session_gets_a_clear_refusal(tmp_path):
    port = free_port()
    server = start_server(port)
    try:
        url = f"http://127.0.0.1:{port}/ws?token={server.token}"
        codes, text = asyncio.run(_fill_sessions(url, 4))
        assert codes == [4001], codes
        assert "All 4 sessions" in text and "--max-sessions" in text
        assert "\n503\n" in text  # the page itself says so, and refreshes itself
    finally:
        server.terminate()
        server.wait(timeout=30)


async def _until_closed(url: str) -> tuple[int | None, str]:
    notices = ""
    async with aiohttp.ClientSession() as s, s.ws_connect(url) as ws:
        async for msg in ws:
            if msg.type == aiohttp.WSMsgType.TEXT and "gpuplay_notice" in msg.data:
                notices += msg.data
        return ws.close_code, notices


@pytest.mark.slow
def test_idle_session_is_closed(tmp_path):
    port = free_port()
    server = start_server(port, "--idle-timeout", "3")
    try:
        t0 = time.monotonic()
        code, notices = asyncio.run(
            asyncio.wait_for(_until_closed(f"http://127.0.0.1:{port}/ws?token={server.token}"), 60)
        )
        assert code == 4000 and "no input for 3 s" in notices
        assert time.monotonic() - t0 < 30
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.mark.slow
def test_an_error_in_a_session_shows_in_the_page(tmp_path):
    """The deck was valid when the server started and is gone when a tab opens: the tab says why."""
    deck = tmp_path / "tiny.toml"
    deck.write_text(
        'title = "t"\n[[steps]]\ntitle = "a"\nscenario = "matmul"\nparams = { n = 64 }\ncaption = "c"\n'
    )
    port = free_port()
    server = start_server(port, "--demo", str(deck))
    try:
        deck.unlink()
        code, notices = asyncio.run(
            asyncio.wait_for(_until_closed(f"http://127.0.0.1:{port}/ws?token={server.token}"), 60)
        )
        assert code == 4002
        assert "could not start" in notices and "no such deck file" in notices
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_cookie_survives_a_restart(tmp_path):
    """A new token per start, but a browser signed in before stays signed in (it reconnects)."""
    env = {"GPUPLAY_STATE_DIR": str(tmp_path / "st")}
    port = free_port()
    first = start_server(port, env=env)
    try:
        status, headers, _ = _get(f"http://127.0.0.1:{port}/?token={first.token}")
        pair = headers["Set-Cookie"].split(";", 1)[0]
    finally:
        first.terminate()
        first.wait(timeout=20)
    second = start_server(port, env=env)
    try:
        assert second.token != first.token
        assert _get(f"http://127.0.0.1:{port}/?token={first.token}")[0] == 403
        assert _get(f"http://127.0.0.1:{port}/alive", {"Cookie": pair})[0] == 204
    finally:
        second.terminate()
        second.wait(timeout=20)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--no-token", "--public"], "--no-token is only allowed on a loopback"),
        (["--token", "short"], "16 to 256 characters"),
        (["--token", "a" * 20 + "<script>"], "16 to 256 characters"),
        (["--idle-timeout", "nan"], "seconds from 1 to"),
        (["--idle-timeout", "inf"], "seconds from 1 to"),
        (["--idle-timeout", "0"], "seconds from 1 to"),
        (["--max-sessions", "0"], "--max-sessions"),
        (["--allow-origin", "evil.example"], "not an http(s) origin"),
        (["--demo", "no-such-deck"], "no such deck file"),
        (["--preset", "quick"], "--preset applies to --demo"),
        (["--demo", "numpy-to-gpu", "--replay", "/nonexistent/r.json"], "--replay"),
        (["--demo", "numpy-to-gpu", "--theme", "nope"], "unknown theme"),
    ],
)
def test_bad_options_exit_2_before_serving(args, message):
    result = CliRunner().invoke(main, ["serve", "--port", "1", *args])
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_invalid_deck_file_exits_2(tmp_path):
    deck = tmp_path / "bad.toml"
    deck.write_text('title = "t"\n[[steps]]\ntitle = "a"\nscenario = "no-such-scenario"\n')
    result = CliRunner().invoke(main, ["serve", "--port", "1", "--demo", str(deck)])
    assert result.exit_code == 2 and "bad.toml" in result.output


def test_gpuplay_token_from_the_environment(monkeypatch):
    from gpuplay.cli.serve import _resolve_token

    monkeypatch.setenv("GPUPLAY_TOKEN", "t" * 24)
    assert _resolve_token(None, False, "127.0.0.1") == "t" * 24
    assert _resolve_token("u" * 20, False, "127.0.0.1") == "u" * 20  # --token wins
    assert _resolve_token(None, True, "127.0.0.1") is None
    monkeypatch.delenv("GPUPLAY_TOKEN")
    a, b = _resolve_token(None, False, "127.0.0.1"), _resolve_token(None, False, "127.0.0.1")
    assert a != b and len(a) >= 40
