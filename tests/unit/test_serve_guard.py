"""serve_guard: the checks behind `gpuplay serve`'s 403s, without a server."""

from __future__ import annotations

import os
import stat

from gpuplay.cli.serve_guard import (
    COOKIE_MAX_AGE_S,
    CookieSigner,
    Guard,
    allowed_host_names,
    cookie_secret,
    host_name,
    normalize_origin,
    origin_allowed,
)


def _guard(token: str | None = "s" * 32, origins: frozenset[str] = frozenset()) -> Guard:
    return Guard(token, CookieSigner(b"k" * 32, 8000), allowed_host_names("127.0.0.1", False), origins)


def test_host_names():
    assert host_name("LocalHost:8000") == "localhost"
    assert host_name("[::1]:8000") == "::1" and host_name("[::1]") == "::1"
    assert host_name("127.0.0.1") == "127.0.0.1"
    assert host_name("localhost.:80") == "localhost"
    names = allowed_host_names("127.0.0.1", False)
    assert names == {"localhost", "127.0.0.1", "::1"}
    assert "gpu.lab.example" in allowed_host_names("127.0.0.1", False, ["GPU.lab.example"])
    assert "10.0.0.5" in allowed_host_names("10.0.0.5", True)


def test_origins():
    assert normalize_origin("HTTP://Example.org:80/") == "http://example.org"
    assert normalize_origin("https://e.org:8443") == "https://e.org:8443"
    assert normalize_origin("null") == "" and normalize_origin("file://x") == ""
    own = "127.0.0.1:8000"
    assert origin_allowed(None, own, "http", frozenset())  # not a browser: the token decides
    assert origin_allowed("http://127.0.0.1:8000", own, "http", frozenset())
    assert not origin_allowed("http://127.0.0.1:8001", own, "http", frozenset())
    assert not origin_allowed("https://127.0.0.1:8000", own, "http", frozenset())
    assert not origin_allowed("http://evil.example", own, "http", frozenset())
    assert origin_allowed("http://evil.example", own, "http", frozenset({"http://evil.example"}))


def test_cookie_signer():
    s = CookieSigner(b"k" * 32, 8000)
    value = s.issue(now=1_000_000)
    assert s.valid(value, now=1_000_000 + 60)
    assert not s.valid(value, now=1_000_000 + COOKIE_MAX_AGE_S + 1), "expired"
    assert not CookieSigner(b"j" * 32, 8000).valid(value, now=1_000_000), "another secret"
    assert not CookieSigner(b"k" * 32, 8001).valid(value, now=1_000_000), "another port"
    v, issued, nonce, mac = value.split(".")
    assert not s.valid(f"{v}.{int(issued) + 1}.{nonce}.{mac}", now=1_000_000), "issued time changed"
    assert not s.valid("", now=0) and not s.valid("v1.x.y.z") and not s.valid("a" * 500)


def test_guard_order_and_reasons():
    g = _guard()
    ok = dict(host_header="127.0.0.1:8000", origin=None, scheme="http", auth_header=None, cookie=None)
    assert g.refusal(**{**ok, "query_token": "s" * 32}) is None
    assert g.refusal(**{**ok, "query_token": None}) == ("no token", False)
    assert g.refusal(**{**ok, "query_token": "s" * 31 + "t"}) == ("wrong token", True)
    assert g.refusal(**{**ok, "query_token": None, "auth_header": "token " + "s" * 32}) is None
    assert g.refusal(**{**ok, "query_token": None, "cookie": g.signer.issue()}) is None
    why = g.refusal(**{**ok, "query_token": "s" * 32, "host_header": "evil.example:8000"})
    assert why is not None and "Host header" in why[0]
    why = g.refusal(**{**ok, "query_token": "s" * 32, "origin": "http://evil.example"})
    assert why is not None and "origin" in why[0]
    assert _guard(token=None).refusal(**{**ok, "query_token": None}) is None  # --no-token


def test_cookie_secret_is_private_and_kept(tmp_path):
    a, problem = cookie_secret(tmp_path / "state")
    assert problem == "" and len(a) == 32
    mode = stat.S_IMODE(os.stat(tmp_path / "state" / "serve-cookie-secret").st_mode)
    assert mode == 0o600
    assert cookie_secret(tmp_path / "state")[0] == a
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        b, problem = cookie_secret(ro)
        if os.geteuid() != 0:
            assert len(b) == 32 and "cannot write" in problem
    finally:
        ro.chmod(0o700)
