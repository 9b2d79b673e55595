"""`gpuplay serve`: the playground (or a demo deck) in a browser, through textual-serve.

Locked down as Jupyter's server is: a token per start (in the printed URL, then an HttpOnly
SameSite=Strict cookie), Host and Origin checks, a cap on sessions and on their idle time, and a
page that loads nothing from another host (serve_guard, serve_web). Each browser tab gets its own
gpuplay process, which leads its own process group and ends with its session or the server
(serve_procs).
"""

from __future__ import annotations

import math
import os
import shlex
import sys
from pathlib import Path

import click

from gpuplay.cli.serve_guard import TOKEN_ENV, TokenError, check_token, is_loopback, new_token
from gpuplay.cli.serve_procs import GRACE_S, die_with_parent, stop_process_groups

__all__ = ["GRACE_S", "app_command", "is_loopback", "serve", "ssh_hint", "stop_process_groups"]
_die_with_parent = die_with_parent  # the name earlier code used

IDLE_MAX_S = 7 * 24 * 3600.0


def app_command(
    scenario_dirs: tuple[str, ...],
    deck: str | None,
    theme: str | None,
    *,
    preset: str | None = None,
    replay: str | None = None,
    fallback: str | None = None,
    resume: bool = False,
) -> str:
    """The shell command each browser session runs (exec: no shell left between us and the app)."""
    argv = [sys.executable, "-m", "gpuplay"]
    for d in scenario_dirs:
        argv += ["--scenarios", d]
    if deck:
        argv += ["demo", deck]
        for flag, value in (
            ("--theme", theme),
            ("--preset", preset),
            ("--replay", replay),
            ("--fallback", fallback),
        ):
            if value:
                argv += [flag, value]
        if resume:
            argv.append("--resume")
    return "exec " + shlex.join(argv)


def ssh_hint(host: str, port: int, user: str, machine: str) -> str:
    """The `ssh -L` line that forwards a laptop's port to this server, wherever it listens.

    The forward's far end must be an address the server listens on: loopback for a loopback or
    wildcard bind, the bound address itself otherwise (127.0.0.1 would reach nothing there).
    """
    if host in ("0.0.0.0", "", "localhost") or (is_loopback(host) and ":" not in host):
        target = "127.0.0.1" if host in ("0.0.0.0", "", "localhost") else host
    elif host in ("::", "::1") or is_loopback(host):
        target = "[::1]"
    else:
        target = f"[{host}]" if ":" in host else host
    return f"ssh -L {port}:{target}:{port} {user}@{machine}"


def _finite_seconds(ctx: click.Context, param: click.Parameter, value: float) -> float:
    if not math.isfinite(value) or not 1.0 <= value <= IDLE_MAX_S:
        raise click.BadParameter(f"must be a number of seconds from 1 to {IDLE_MAX_S:.0f} (got {value})")
    return value


def _resolve_token(token: str | None, no_token: bool, host: str) -> str | None:
    if no_token:
        if token:
            raise click.UsageError("--token and --no-token contradict each other")
        if not is_loopback(host):
            raise click.UsageError(
                f"--no-token is only allowed on a loopback --host; {host} is reachable from other machines"
            )
        return None
    source = "--token"
    if token is None and os.environ.get(TOKEN_ENV):
        token, source = os.environ[TOKEN_ENV], TOKEN_ENV
    if token is None:
        return new_token()
    try:
        return check_token(token, source)
    except TokenError as exc:
        raise click.BadParameter(str(exc), param_hint=source) from None


def _check_deck(
    ctx: click.Context,
    deck: str,
    preset: str | None,
    replay: str | None,
    fallback: str | None,
    theme: str | None,
) -> str:
    """Load the deck, recordings and theme as `gpuplay demo` will: a mistake is an error now, not
    a browser stuck on a splash. Returns the deck's path."""
    from gpuplay.cli import options
    from gpuplay.cli.output import load_scenarios
    from gpuplay.core.reports.decks import (
        DeckError,
        RecordingError,
        load_deck,
        load_recording,
        resolve_deck_path,
    )

    path = resolve_deck_path(deck)
    sset = load_scenarios(options.scenario_dirs(ctx, ()))
    try:
        load_deck(path, sset, preset)
    except (DeckError, RecursionError) as exc:
        raise click.BadParameter(
            str(exc) if isinstance(exc, DeckError) else "nested too deeply", param_hint="--demo"
        ) from None
    for flag, rec in (("--replay", replay), ("--fallback", fallback)):
        if rec:
            try:
                load_recording(rec)
            except (RecordingError, RecursionError) as exc:
                raise click.BadParameter(str(exc), param_hint=flag) from None
    if theme:
        from gpuplay.tui.themes import theme_names

        if theme not in theme_names():
            raise click.BadParameter(
                f"unknown theme {theme!r}; choose one of: {', '.join(theme_names())}", param_hint="--theme"
            )
    return str(path.resolve()) if path.exists() else deck


def _demo_resumes() -> bool:
    """Whether `gpuplay demo` can resume a talk at its saved step (so a reconnect goes on there)."""
    from gpuplay.cli.demo import demo

    return any(p.name == "resume" for p in demo.params)


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (loopback by default).")
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True)
@click.option(
    "--public",
    is_flag=True,
    help="Allow a non-loopback --host (default 0.0.0.0 with this flag): anyone with the token runs gpuplay here.",
)
@click.option(
    "--token",
    default=None,
    metavar="TOKEN",
    help=f"The token browsers must present (default: ${TOKEN_ENV}, else a random one per start).",
)
@click.option(
    "--no-token", is_flag=True, help="No token (loopback only; any local web page could then drive gpuplay)."
)
@click.option(
    "--allow-origin",
    "allow_origins",
    multiple=True,
    metavar="ORIGIN",
    help="Also accept websockets from pages on ORIGIN (e.g. https://proxy.example:8443); repeatable.",
)
@click.option(
    "--allow-host",
    "allow_hosts",
    multiple=True,
    metavar="NAME",
    help="Also accept this host name in the Host header (a DNS name of this machine); repeatable.",
)
@click.option(
    "--max-sessions",
    type=click.IntRange(1, 64),
    default=4,
    show_default=True,
    help="Browser tabs served at once (each is a gpuplay process).",
)
@click.option(
    "--idle-timeout",
    type=float,
    default=3600.0,
    show_default=True,
    callback=_finite_seconds,
    metavar="SECONDS",
    help="End a session after this long without a key, click or resize.",
)
@click.option(
    "--demo", "deck", default=None, metavar="DECK", help="Serve the presenter of a demo deck instead."
)
@click.option("--theme", default=None, metavar="NAME", help="Theme for --demo (e.g. projector).")
@click.option("--preset", "-p", default=None, help="--demo: override every step's preset (e.g. quick).")
@click.option(
    "--replay",
    type=click.Path(dir_okay=False),
    default=None,
    help="--demo: present a rehearsal's recorded results instead of measuring.",
)
@click.option(
    "--fallback",
    type=click.Path(dir_okay=False),
    default=None,
    help="--demo: live, with this rehearsal's figure for any step that cannot run here.",
)
@click.pass_context
def serve(
    ctx: click.Context,
    host: str,
    port: int,
    public: bool,
    token: str | None,
    no_token: bool,
    allow_origins: tuple[str, ...],
    allow_hosts: tuple[str, ...],
    max_sessions: int,
    idle_timeout: float,
    deck: str | None,
    theme: str | None,
    preset: str | None,
    replay: str | None,
    fallback: str | None,
) -> None:
    """The gpuplay playground in a web browser (one gpuplay process per browser tab).

    Open the printed URL (it carries a token; the browser then keeps a cookie). Reach a remote GPU
    box from a laptop through SSH: the server stays on loopback and the printed `ssh -L` line
    forwards it.
    """
    import getpass
    import socket

    from gpuplay.cli import options
    from gpuplay.cli.serve_guard import (
        CookieSigner,
        Guard,
        allowed_host_names,
        cookie_secret,
        normalize_origin,
    )

    if public and host == "127.0.0.1":
        host = "0.0.0.0"
    if not is_loopback(host) and not public:
        raise click.UsageError(
            f"--host {host} is not a loopback address: anyone who reaches it could run gpuplay on this "
            "machine. Pass --public to confirm, or keep the default and use the ssh -L line it prints."
        )
    for flag, given in (
        ("--theme", theme),
        ("--preset", preset),
        ("--replay", replay),
        ("--fallback", fallback),
    ):
        if given and not deck:
            raise click.UsageError(f"{flag} applies to --demo DECK")
    if replay and fallback:
        raise click.UsageError(
            "--replay shows a recording and --fallback fills gaps in a live talk: choose one"
        )
    origins = []
    for o in allow_origins:
        norm = normalize_origin(o)
        if not norm:
            raise click.BadParameter(
                f"{o!r} is not an http(s) origin (scheme://host[:port])", param_hint="--allow-origin"
            )
        origins.append(norm)
    secret_token = _resolve_token(token, no_token, host)
    try:
        import textual_serve  # noqa: F401
    except ImportError:
        raise click.ClickException("gpuplay serve needs textual-serve: pip install textual-serve") from None
    resume = False
    if deck:
        deck = _check_deck(ctx, deck, preset, replay, fallback, theme)
        replay = str(Path(replay).resolve()) if replay else None
        fallback = str(Path(fallback).resolve()) if fallback else None
        resume = _demo_resumes()

    from gpuplay.cli.serve_web import ServeConfig, make_server
    from gpuplay.core.storage.config import state_dir

    secret, secret_problem = cookie_secret(state_dir())
    guard = Guard(
        token=secret_token,
        signer=CookieSigner(secret, port),
        host_names=allowed_host_names(host, public, allow_hosts),
        origins=frozenset(origins),
    )
    command = app_command(
        options.scenario_dirs(ctx, ()),
        deck,
        theme,
        preset=preset,
        replay=replay,
        fallback=fallback,
        resume=resume,
    )
    title = "gpuplay" + (f" · {Path(deck).stem}" if deck else "")
    try:
        server = make_server(
            ServeConfig(
                command=command,
                host=host,
                port=port,
                title=title,
                guard=guard,
                max_sessions=max_sessions,
                idle_timeout_s=idle_timeout,
                talk=bool(deck),
            )
        )
    except RuntimeError as exc:
        raise click.ClickException(str(exc)) from None
    try:  # listening before the URL is printed: a port in use is said alone, not after the URL
        port = server.bind()
    except OSError as exc:
        raise click.ClickException(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}; choose another --port"
        ) from None
    err = click.echo
    shown = "127.0.0.1" if host in ("0.0.0.0", "::", "") else (f"[{host}]" if ":" in host else host)
    query = f"/?token={secret_token}" if secret_token else "/"
    err(f"gpuplay serve: http://{shown}:{port}{query}")
    err(f"  one gpuplay per browser tab, at most {max_sessions}; Ctrl+C stops it and them")
    if not is_loopback(host):
        if host in ("0.0.0.0", "::", ""):
            err(f"  on the network: http://{socket.gethostname()}:{port}{query}")
        err(
            f"warning: listening on {host}:{port}: anyone who reaches this address and has the token "
            "can run gpuplay on this machine.",
            err=True,
        )
    if secret_token is None:
        err(
            "warning: --no-token: any web page open in a browser on this machine can reach this server "
            "(the Origin check still refuses other pages' websockets).",
            err=True,
        )
    if secret_problem:
        err(f"note: {secret_problem}: browsers must use the token again after a restart", err=True)
    err(
        f"from a laptop: {ssh_hint(host, port, getpass.getuser(), socket.gethostname())}  "
        f"then open http://localhost:{port}{query}"
    )
    sys.stdout.flush()
    try:
        server.serve()
    except OSError as exc:
        raise click.ClickException(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}; choose another --port"
        ) from None


command = serve
