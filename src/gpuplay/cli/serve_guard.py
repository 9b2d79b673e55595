"""Who may talk to `gpuplay serve`: a token, a signed cookie, and Host and Origin checks.

Jupyter's model: a random token per server start, printed in the URL; a browser that presents it
once gets an HttpOnly, SameSite=Strict cookie and does not need it again. A request without either
gets 403: every page, static file and websocket. The Host header must name this server (a web page
that rebinds its own DNS name to 127.0.0.1 sends its own name, and is refused), and a websocket
opened by a page must come from the page's own origin (or one the user allowed), because browsers
let any page open a websocket to loopback and send the cookie along.

The cookie is signed with a secret kept in the state folder, so a browser stays signed in across a
server restart (and the page can reconnect by itself) while the token in the URL changes each time.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import re
import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

TOKEN_ENV = "GPUPLAY_TOKEN"
TOKEN_MIN_CHARS = 16
# What a token may contain: it travels in a URL query and a header, unescaped.
TOKEN_RE = re.compile(rf"[A-Za-z0-9._~-]{{{TOKEN_MIN_CHARS},256}}")
COOKIE_MAX_AGE_S = 7 * 24 * 3600  # a week of talks and rehearsals; then the token again
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


class TokenError(ValueError):
    """A token given with --token or GPUPLAY_TOKEN that cannot be used."""


def new_token() -> str:
    return secrets.token_urlsafe(32)


def check_token(token: str, source: str) -> str:
    if not TOKEN_RE.fullmatch(token):
        raise TokenError(
            f"{source} must be {TOKEN_MIN_CHARS} to 256 characters from A-Z a-z 0-9 . _ ~ - "
            f"(got {len(token)} characters); leave it out for a random one"
        )
    return token


def same_secret(given: str, expected: str) -> bool:
    """Constant-time comparison: a wrong guess takes as long whichever character differs."""
    return hmac.compare_digest(given.encode("utf-8", "replace"), expected.encode("utf-8"))


def cookie_secret(folder: Path) -> tuple[bytes, str]:
    """The key that signs cookies, kept 0600 in `folder`; a fresh one in memory if it cannot be.

    Returns (secret, problem): problem is '' or why the secret will not outlive this server.
    """
    path = folder / "serve-cookie-secret"
    try:
        data = path.read_bytes()
        if len(data) >= 32:
            return data, ""
    except FileNotFoundError:
        pass
    except OSError as exc:
        return secrets.token_bytes(32), f"cannot read {path} ({exc.strerror or exc})"
    data = secrets.token_bytes(32)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError as exc:
        return data, f"cannot write {path} ({exc.strerror or exc})"
    return data, ""


@dataclass(frozen=True)
class CookieSigner:
    """Cookie values `v1.<issued>.<nonce>.<mac>`: valid for this port, for COOKIE_MAX_AGE_S."""

    secret: bytes
    port: int

    @property
    def name(self) -> str:
        # Browsers share cookies between the ports of one host: one name per port (as Jupyter does).
        return f"gpuplay-{self.port}"

    def _mac(self, issued: int, nonce: str) -> str:
        msg = f"gpuplay-serve|{self.port}|{issued}|{nonce}".encode()
        return hmac.new(self.secret, msg, hashlib.sha256).hexdigest()

    def issue(self, now: float | None = None) -> str:
        issued = int(time.time() if now is None else now)
        nonce = secrets.token_hex(8)
        return f"v1.{issued}.{nonce}.{self._mac(issued, nonce)}"

    def valid(self, value: str | None, now: float | None = None) -> bool:
        if not value or len(value) > 200:
            return False
        parts = value.split(".")
        if len(parts) != 4 or parts[0] != "v1" or not parts[1].isdigit():
            return False
        issued = int(parts[1])
        if not same_secret(parts[3], self._mac(issued, parts[2])):
            return False
        age = (time.time() if now is None else now) - issued
        return -300 <= age <= COOKIE_MAX_AGE_S


def host_name(header: str) -> str:
    """The host name in a Host header or an origin's netloc: no port, no brackets, lower case."""
    h = header.strip().lower()
    if h.startswith("["):
        return h[1 : h.find("]")] if "]" in h else ""
    if h.count(":") == 1:
        h = h.split(":", 1)[0]
    return h.rstrip(".")


def is_loopback(host: str) -> bool:
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def allowed_host_names(bind_host: str, public: bool, extra: Iterable[str] = ()) -> frozenset[str]:
    """The names a browser may use to reach this server (the Host check, against DNS rebinding).

    Loopback: only the loopback names. With --public: also the bound address, or with 0.0.0.0/:: every
    address of this machine's interfaces, and the machine's own names. The port is not checked:
    an `ssh -L` tunnel may use another local port, and rebinding is about the name.
    """
    names = set(LOOPBACK_NAMES)
    names.update(host_name(e) for e in extra if e.strip())
    if not public:
        return frozenset(names)
    if bind_host in ("0.0.0.0", "::", ""):
        import socket

        import psutil

        for addrs in psutil.net_if_addrs().values():
            for a in addrs:
                if a.family in (socket.AF_INET, socket.AF_INET6):
                    names.add(a.address.split("%", 1)[0].lower())
        hostname = socket.gethostname().lower()
        names.update({hostname, socket.getfqdn().lower()})
    else:
        names.add(host_name(bind_host))
    return frozenset(n for n in names if n)


def normalize_origin(origin: str) -> str:
    """'http://Example.org:80/' → 'http://example.org'; '' when not an http(s) origin."""
    try:
        parts = urlsplit(origin.strip())
        port = parts.port
    except ValueError:
        return ""
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return ""
    default = 80 if parts.scheme == "http" else 443
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{parts.scheme}://{host}" + (f":{port}" if port not in (None, default) else "")


def origin_allowed(origin: str | None, host_header: str, scheme: str, allowed: frozenset[str]) -> bool:
    """A request's Origin is this page's own (scheme and Host header) or one the user allowed.

    No Origin header: not a browser page (curl, a script holding the token): allowed; the token or
    cookie is still required. 'null' (a sandboxed frame, a file:// page) is refused.
    """
    if origin is None:
        return True
    got = normalize_origin(origin)
    if not got:
        return False
    own = normalize_origin(f"{scheme}://{host_header}")
    return (bool(own) and hmac.compare_digest(got, own)) or got in allowed


@dataclass
class Guard:
    """The checks every request passes, in order: Host, Origin, then token or cookie."""

    token: str | None  # None: --no-token (loopback only)
    signer: CookieSigner
    host_names: frozenset[str]
    origins: frozenset[str] = field(default_factory=frozenset)

    def token_in(self, query_token: str | None, auth_header: str | None) -> bool:
        if self.token is None:
            return True
        given = query_token
        if given is None and auth_header:
            scheme, _, value = auth_header.partition(" ")
            if scheme.lower() in ("token", "bearer"):
                given = value.strip()
        return given is not None and same_secret(given, self.token)

    def refusal(
        self, host_header: str, origin: str | None, scheme: str, query_token: str | None,
        auth_header: str | None, cookie: str | None,
    ) -> tuple[str, bool] | None:  # fmt: skip
        """None if the request may go on, else (why, token_given) for the 403 page."""
        if host_name(host_header) not in self.host_names:
            return f"the Host header {host_header[:80]!r} does not name this server", False
        if not origin_allowed(origin, host_header, scheme, self.origins):
            return f"requests from origin {origin[:80]!r} are not allowed" if origin else "bad origin", False
        if self.token is None or self.signer.valid(cookie):
            return None
        if self.token_in(query_token, auth_header):
            return None
        if query_token is not None:
            return "wrong token", True
        return "no token", False
