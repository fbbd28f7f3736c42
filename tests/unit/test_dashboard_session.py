"""The dashboard's session cookie and the API docs page, on the gateway's app in this process: the cookie holds a
signed, expiring session (never the token), refused once expired, revoked or tampered with, and Secure whenever the
browser came over TLS; the docs page loads nothing from another origin."""

from __future__ import annotations

import base64
import hashlib
import re
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from litestar import Litestar
from litestar.testing import TestClient
from litestar.types import Receive, Scope, Send

from jetcron.auth import jwt
from jetcron.auth.tokens import TokenRecord, issue
from jetcron.bus.memory import MemoryRpc
from jetcron.config import Settings
from jetcron.core.errors import Misconfigured
from jetcron.sdk.client import Client
from jetcron.sdk.errors import api_error
from jetcron.wire.api import ErrorBody
from jetcron_services.gateway import app as gateway_app
from jetcron_services.gateway.app import DOCS_POLICY, REDOC, REDOC_SHA256, build_app
from jetcron_services.gateway.gate import Gate
from jetcron_services.gateway.service import session_key
from jetcron_services.gateway.ui.session import COOKIE, Sessions, cookie_secure, proxies

T0 = datetime(2026, 12, 1, tzinfo=UTC)
STATIC = Path(gateway_app.__file__).parent / "ui" / "static"


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


class NoRuns(Client):
    """An API that knows no run: a page past the session answers 404."""

    def __init__(self, tenant: str | None) -> None:
        super().__init__(rpc=MemoryRpc(), tenant=tenant)

    async def call(self, verb: str, payload: dict[str, Any] | None = None) -> Any:
        raise api_error(ErrorBody(code="not_found", message=f"{verb}: no such run"))


class World:
    """The app with one tenant's token, a clock the test moves, and the token bucket the test revokes from."""

    def __init__(self, **policy: Any) -> None:
        self.token, self.record = issue("acme", "test", T0)
        self.tokens: dict[str, TokenRecord] = {self.record.token_id: self.record}
        self.clock = Clock()
        self.sessions = Sessions(key=b"k" * 32, max_age=3600.0, clock=self.clock, **policy)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.app = build_app(Gate(lookup=self.tokens.get, client=lambda tenant: NoRuns(tenant=tenant),
                                      ready=lambda: None), sessions=self.sessions)


@pytest.fixture
def world() -> Iterator[World]:
    yield World()


def _login(http: TestClient[Litestar], token: str) -> tuple[str, str]:
    """The session cookie's value and its whole Set-Cookie header."""
    answer = http.post("/ui/login", data={"token": token, "next": "/ui/jobs"}, follow_redirects=False)
    assert answer.status_code == 303, answer.text
    header = answer.headers["set-cookie"]
    found = re.match(rf"{COOKIE}=([^;]*)", header)
    assert found, header
    return found.group(1), header


def _signed_in(http: TestClient[Litestar], value: str) -> bool:
    """Whether the app takes `value` as a session: logging out needs one (and changes nothing on the server)."""
    http.cookies.clear()
    http.cookies.set(COOKIE, value, path="/ui")
    page = http.get("/ui/runs/acme.nightly.20261201T000000000Z/state", headers={"hx-request": "true"})
    if page.status_code == 401:
        return False
    assert page.status_code == 404 and "no such run" in page.text, (page.status_code, page.text)
    return True


def test_the_cookie_is_a_signed_expiring_session_and_never_the_token(world: World) -> None:
    with TestClient(world.app) as http:
        value, header = _login(http, world.token)
    secret = world.token.rsplit("_", 1)[1]
    assert value != world.token and secret not in value and world.token not in header
    assert value.startswith(f"v1.{world.record.token_id}.")
    assert "Max-Age=3600" in header and "HttpOnly" in header and "Path=/ui" in header
    assert "samesite=strict" in header.lower()


def test_a_session_is_refused_once_expired_revoked_or_tampered_with(world: World) -> None:
    with TestClient(world.app) as http:
        value, _ = _login(http, world.token)
        assert _signed_in(http, value)
        assert not _signed_in(http, world.token)  # the raw token is no session

        version, token_id, began, mac = value.split(".")
        other_token, other = issue("acme", "other", T0)
        world.tokens[other.token_id] = other
        for forged in (f"{version}.{token_id}.{int(began) + 1000}.{mac}",  # a later start, to outlive the max age
                       f"{version}.{other.token_id}.{began}.{mac}",  # another token's session
                       f"{version}.{token_id}.{began}.{mac[:-2]}AA", f"v2.{token_id}.{began}.{mac}", ""):
            assert not _signed_in(http, forged), forged

        world.clock.now += 3599
        assert _signed_in(http, value)
        world.clock.now += 1  # the max age is checked here, whatever the browser keeps
        assert not _signed_in(http, value)

        world.clock.now -= 3600
        fresh, _ = _login(http, world.token)
        assert _signed_in(http, fresh)
        del world.tokens[world.record.token_id]  # revoked: its sessions end at once
        assert not _signed_in(http, fresh)
        assert _signed_in(http, _login(http, other_token)[0])


class _From:
    """The app as reached from `peer` (an ASGI server gives the client's address in the scope)."""

    def __init__(self, app: Litestar, peer: str) -> None:
        self.app, self.peer = app, peer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope = {**scope, "client": (self.peer, 40000)}  # type: ignore[typeddict-item]
        await self.app(scope, receive, send)


@pytest.mark.parametrize(("peer", "proto", "secure"), [
    ("10.1.2.3", "https", True),  # a trusted proxy that ended TLS
    ("10.1.2.3", "http", False),  # ... and one that says the browser used plain http
    ("127.0.0.1", "https", True),  # a proxy on the gateway's machine (loopback is trusted by default)
    ("127.0.0.1", None, False),  # a browser on the gateway's machine: `jetcron up`
    ("192.0.2.7", "http", True),  # an untrusted peer's word is not taken: plain http from afar is TLS ended
    ("192.0.2.7", None, True),  # elsewhere
])
def test_the_cookie_is_secure_when_the_browser_came_over_tls(peer: str, proto: str | None, secure: bool) -> None:
    world = World(trusted_proxies=(*proxies("10.0.0.0/8"), *proxies("127.0.0.1,::1")))
    headers = {"X-Forwarded-Proto": proto} if proto else {}
    with TestClient(_From(world.app, peer), base_url="http://jetcron.example") as http:  # type: ignore[arg-type]
        answer = http.post("/ui/login", data={"token": world.token}, headers=headers, follow_redirects=False)
    assert answer.status_code == 303
    assert ("; Secure" in answer.headers["set-cookie"]) is secure, answer.headers["set-cookie"]


def test_secure_follows_the_setting_and_tls_to_the_gateway_itself() -> None:
    auto, always, never = Sessions(), Sessions(secure="always"), Sessions(secure="never")
    assert cookie_secure(auto, "https", "127.0.0.1", None)
    assert cookie_secure(always, "http", "127.0.0.1", None) and not cookie_secure(never, "https", "10.0.0.1", "https")
    assert cookie_secure(auto, "http", "::1", "http, https")  # the last hop's word is the trusted proxy's own
    assert not cookie_secure(Sessions(trusted_proxies=()), "http", "127.0.0.1", "https")
    with pytest.raises(Misconfigured, match=r"JETCRON_HTTP_TRUSTED_PROXIES: 'proxy\.example' is not an IP"):
        proxies("10.0.0.0/8, proxy.example")


def test_the_api_docs_page_loads_nothing_from_another_origin(world: World) -> None:
    with TestClient(world.app) as http:
        page = http.get("/api/docs")
        script = http.get(REDOC)
    assert page.status_code == 200 and script.status_code == 200
    assert page.headers["content-security-policy"] == DOCS_POLICY
    policy = dict(part.strip().split(" ", 1) for part in DOCS_POLICY.split(";"))
    assert policy["script-src"] == "'self'" and policy["default-src"] == "'none'"
    assert "http" not in DOCS_POLICY and "*" not in DOCS_POLICY
    # every URL the page names is the gateway's own
    urls = re.findall(r'(?:src|href|spec-url)="([^"]*)"', page.text)
    assert urls and all(url == "data:," or (url.startswith("/") and not url.startswith("//")) for url in urls), urls
    assert "://" not in page.text
    # the script is the vendored file, pinned: its hash is the page's integrity and the one noted in app.py
    digest = hashlib.sha256(script.content).digest()
    assert digest.hex() == REDOC_SHA256 == hashlib.sha256((STATIC / Path(REDOC).name).read_bytes()).hexdigest()
    assert f'integrity="sha256-{base64.b64encode(digest).decode()}"' in page.text
    assert (STATIC / "redoc-LICENSE.txt").read_text().startswith("The MIT License")


def test_the_session_key_comes_from_its_file_else_the_gateways_credential_else_chance(tmp_path: Path) -> None:
    creds = tmp_path / "gateway.creds"
    creds.write_text(jwt.creds("header.payload.signature", jwt.new_key("user")))
    replicas = {session_key(Settings(nats_creds=str(creds))) for _ in range(2)}
    assert len(replicas) == 1 and len(next(iter(replicas))) == 32  # replicas sharing a credential share the key
    key_file = tmp_path / "session.key"
    key_file.write_text("ab" * 32)
    from_file = session_key(Settings(ui_session_key_file=str(key_file), nats_creds=str(creds)))
    assert from_file not in replicas and from_file == session_key(Settings(ui_session_key_file=str(key_file)))
    assert session_key(Settings()) != session_key(Settings())  # no credential: each process its own
    key_file.write_text("short")
    with pytest.raises(Misconfigured, match="holds 5 bytes; at least 32"):
        session_key(Settings(ui_session_key_file=str(key_file)))
    with pytest.raises(Misconfigured, match=r"JETCRON_UI_SESSION_KEY_FILE .*missing: cannot read it"):
        session_key(Settings(ui_session_key_file=str(tmp_path / "missing")))
    creds.write_text("not a credential")
    with pytest.raises(Misconfigured, match="no user seed to sign dashboard sessions with"):
        session_key(Settings(nats_creds=str(creds)))
