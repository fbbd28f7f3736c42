"""A webhook try as the notifier's Targets makes it, against receivers on loopback addresses (no NATS server): the
host is resolved once, every address is judged, the connection goes to the address that was checked (the host
name kept for Host and for TLS), and the tenant is told no address or port.

Name resolution is the process's own `socket.getaddrinfo`, replaced by a stub that answers what each test says:
the notifier and httpx both resolve through it, so a second resolution is seen and answered differently. Where a
loopback address must stand for a public one, the notifier's address check is replaced by one that allows
127.0.0.2 alone (the rest of the judgment is tested by table in tests/unit/test_notify.py)."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import socket
import ssl
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from jetcron.auth.certs import issue, make_ca
from jetcron.bus.memory import MemoryPublisher, MemoryStreams
from jetcron.config import Settings
from jetcron.core.lifecycle.notify import DeliveryAttempt, Notice
from jetcron.core.models import NotifyEvent, NotifyRule
from jetcron_services.notifier import targets as targets_module
from jetcron_services.notifier.targets import Targets
from jetcron_services.runtime import SystemClock

STAND_IN = "127.0.0.2"
"""A loopback address that stands for a public one where a test replaces the address check."""
NOTICE = Notice(id="acme.nightly.20261203T100000000Z.dead-0", event=NotifyEvent.DEAD, tenant="acme",
                job="nightly", run_id="acme.nightly.20261203T100000000Z", attempt=1, state="dead",
                scheduled_at=datetime(2026, 12, 3, 10, 0, tzinfo=UTC))


@dataclass
class Hook:
    """An HTTP receiver on one loopback address: records each request's path and headers, answers 200."""

    host: str
    port: int = 0
    tls: ssl.SSLContext | None = None
    received: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    server: asyncio.Server | None = None

    async def start(self) -> Hook:
        self.server = await asyncio.start_server(self._serve, self.host, self.port, ssl=self.tls)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await reader.readline()
            _method, path, _ = line.decode().split(" ", 2)
            headers: dict[str, str] = {}
            while (h := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = h.decode().partition(":")
                headers[name.strip().lower()] = value.strip()
            await reader.readexactly(int(headers.get("content-length", "0")))
            self.received.append((path, headers))
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, ValueError, ssl.SSLError):
            return
        finally:
            writer.close()


@contextlib.asynccontextmanager
async def hooks(*made: Hook) -> AsyncIterator[None]:
    try:
        yield
    finally:
        for hook in made:
            await hook.close()


async def _beside(first: Hook, host: str) -> Hook:
    """A receiver on `host` at the same port as `first` (a name's two answers differ in the address alone)."""
    for _ in range(20):
        try:
            return await Hook(host, first.port).start()
        except OSError:  # the port is taken on that address: move both
            await first.close()
            first.port = 0
            await first.start()
    raise AssertionError(f"no port free on both {first.host} and {host}")


@dataclass
class Resolver:
    """Stands in for the system's resolver for the names it is given: each call for a name takes the next of its
    answers (the last one repeats), each answer a list of addresses."""

    answers: dict[str, list[list[str]]] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)


@pytest.fixture
def resolver(monkeypatch: pytest.MonkeyPatch) -> Iterator[Resolver]:
    stub = Resolver()
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, family: int = 0, type: int = 0, proto: int = 0,
                    flags: int = 0) -> Any:
        name = host.decode() if isinstance(host, bytes) else host
        if name not in stub.answers:
            return real(host, port, family, type, proto, flags)
        answers = stub.answers[name]
        addresses = answers[min(stub.calls.count(name), len(answers) - 1)]
        stub.calls.append(name)
        return [(socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "",
                 (a, int(port or 0)) if ":" not in a else (a, int(port or 0), 0, 0)) for a in addresses]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    yield stub


@pytest.fixture
def stand_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """The notifier's address check allows STAND_IN alone, as if it were public."""
    allowed: Callable[..., bool] = lambda address, *, allow_private: allow_private or address == STAND_IN  # noqa: E731
    monkeypatch.setattr(targets_module, "address_allowed", allowed)


class Log:
    """The service's log as Targets writes to it: (level, event, fields) of each line."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str, dict[str, Any]]] = []

    def __getattr__(self, level: str) -> Callable[..., None]:
        return lambda event, **fields: self.lines.append((level, event, fields))


def _targets(log: Log, **settings: Any) -> Targets:
    """Targets as the service builds it, from the parts its signature names."""
    parts: dict[str, Any] = {"settings": Settings(**settings), "publisher": MemoryPublisher(),
                             "streams": MemoryStreams(), "clock": SystemClock(), "log": log}
    return Targets(**{name: parts[name] for name in inspect.signature(Targets).parameters})


async def _send(targets: Targets, url: str) -> DeliveryAttempt:
    tried = await targets.send(NotifyRule(on=[NotifyEvent.DEAD], webhook=url), NOTICE, f"{NOTICE.id}-0")
    assert tried is not None
    return tried


async def test_a_name_is_resolved_once_and_the_checked_address_is_the_one_connected_to(
        resolver: Resolver, stand_in: None) -> None:
    # Given a name that answers the allowed address to its first lookup and loopback to any later one, with a
    # receiver listening at each
    checked = await Hook(STAND_IN).start()
    rebound = await _beside(checked, "127.0.0.1")
    async with hooks(checked, rebound):
        resolver.answers["hooks.rebind.test"] = [[STAND_IN], ["127.0.0.1"]]
        targets = _targets(Log(), notify_timeout=5)

        # When a notice is sent to it
        tried = await _send(targets, f"http://hooks.rebind.test:{checked.port}/hook?token=t")

        # Then the address the name moved to got nothing, the name was looked up once, and the address that was
        # checked got the request, naming the host
        assert rebound.received == [], "the connection went to an address that was never checked"
        assert resolver.calls == ["hooks.rebind.test"]
        assert (tried.ok, tried.status, tried.error) == (True, 200, "")
        ((path, headers),) = checked.received
        assert path == "/hook?token=t" and headers["host"] == f"hooks.rebind.test:{checked.port}"


async def test_a_name_with_one_inner_address_is_refused_and_the_tenant_is_told_no_address(
        resolver: Resolver, stand_in: None) -> None:
    # Given a name answering an allowed address and the cloud metadata address together
    checked = await Hook(STAND_IN).start()
    async with hooks(checked):
        resolver.answers["hooks.mixed.test"] = [[STAND_IN, "169.254.169.254"]]
        log = Log()
        targets = _targets(log, notify_timeout=5)

        tried = await _send(targets, f"http://hooks.mixed.test:{checked.port}/hook")

        # Then nothing is sent, the tenant reads a generic refusal, and the service's log says which address
        assert checked.received == []
        assert (tried.ok, tried.status, tried.error) == (False, None, "refused: not a public address")
        (line,) = [fields for level, event, fields in log.lines if event == "webhook refused"]
        assert "169.254.169.254" in line["reason"] and line["host"] == "hooks.mixed.test"


@pytest.mark.parametrize("address", ["64:ff9b::a9fe:a9fe", "::ffff:127.0.0.1", "::7f00:1", "2002:7f00:1::"])
async def test_a_name_answering_a_translated_form_of_an_inner_address_is_refused(
        resolver: Resolver, address: str) -> None:
    # Given a name whose only address is an IPv6 form leading to loopback or cloud metadata (is_global passes it)
    resolver.answers["hooks.nat64.test"] = [[address]]
    log = Log()
    targets = _targets(log, notify_timeout=2)

    tried = await _send(targets, "http://hooks.nat64.test:8080/hook")

    # Then it is refused before any connection, as any inner address
    assert (tried.ok, tried.error) == (False, "refused: not a public address"), tried
    assert [event for _, event, _ in log.lines] == ["webhook refused"]


async def test_a_connection_that_fails_tells_the_tenant_neither_address_nor_port() -> None:
    # Given a loopback port nobody listens on (the deployment allows private targets)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = Log()
    targets = _targets(log, notify_timeout=5, notify_allow_private=True)

    tried = await _send(targets, f"http://127.0.0.1:{port}/hook")

    # Then the tenant reads "connection failed", and only the service's log names the port
    assert (tried.ok, tried.error) == (False, "connection failed"), tried
    assert any(fields.get("port") == port for _, _, fields in log.lines)


async def test_tls_goes_to_the_checked_address_and_verifies_the_certificate_for_the_host_name(
        resolver: Resolver, stand_in: None, tmp_path: Path) -> None:
    # Given a receiver on the allowed address whose certificate names hooks.tls.test only (not its address)
    now = datetime.now(UTC)
    ca = make_ca(tmp_path, now)
    files = issue(tmp_path, "hook", ["hooks.tls.test"], now)
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(files.cert, files.key)
    names: list[str | None] = []
    served.sni_callback = lambda _sock, name, _ctx: names.append(name)  # type: ignore[assignment,func-returns-value]
    hook = await Hook(STAND_IN, tls=served).start()
    async with hooks(hook):
        resolver.answers["hooks.tls.test"] = [[STAND_IN]]
        resolver.answers["other.tls.test"] = [[STAND_IN]]
        targets = _targets(Log(), notify_timeout=5)
        assert targets.tls.check_hostname and targets.tls.verify_mode == ssl.CERT_REQUIRED  # what is replaced
        targets.tls = ssl.create_default_context(cafile=str(ca))

        # When a notice goes to the host its certificate names
        tried = await _send(targets, f"https://hooks.tls.test:{hook.port}/hook")

        # Then it lands: the handshake named the host (SNI) and the certificate was verified for it
        assert (tried.ok, tried.status, tried.error) == (True, 200, ""), tried
        assert names == ["hooks.tls.test"]
        ((_, headers),) = hook.received
        assert headers["host"] == f"hooks.tls.test:{hook.port}"

        # And a name the certificate does not hold, at the same address, gets no request through
        refused = await _send(targets, f"https://other.tls.test:{hook.port}/hook")
        assert (refused.ok, refused.error) == (False, "TLS handshake failed (no certificate valid for the host?)")
        assert len(hook.received) == 1
