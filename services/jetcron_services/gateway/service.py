"""The gateway process: watches the token bucket, serves the REST API with uvicorn on JETCRON_HTTP_PORT."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import secrets
import socket
from collections.abc import Iterator
from pathlib import Path

import uvicorn

from jetcron.auth.jwt import BEGIN_SEED
from jetcron.auth.tokens import TokenRecord
from jetcron.bus.ports import Records
from jetcron.config import Settings
from jetcron.core.errors import Misconfigured
from jetcron.sdk.client import Client
from jetcron.wire import subjects as s
from jetcron_services.gateway.app import build_app
from jetcron_services.gateway.gate import Followers, Gate
from jetcron_services.gateway.ui.session import Sessions, proxies
from jetcron_services.runtime import Context, background


class TokenBook:
    """Every token record, kept current by a watch: a revoked token is refused as soon as its delete arrives,
    and checking one costs no round trip."""

    def __init__(self) -> None:
        self.records: dict[str, TokenRecord] = {}
        self.loaded = asyncio.Event()

    def lookup(self, token_id: str) -> TokenRecord | None:
        return self.records.get(token_id)

    async def follow(self, store: Records[TokenRecord]) -> None:
        """For ever: the watch itself waits out a bucket not made yet or NATS away (jetcron.bus.kv.Store.watch)."""
        seen: dict[str, TokenRecord] = {}
        async for key, record, _ in store.watch():
            if not key:
                self.records = seen
                self.loaded.set()
            elif record is None:
                seen.pop(key, None)
            else:
                seen[key] = record


KEY_LABEL = b"jetcron-ui-session-key"


def session_key(settings: Settings) -> bytes:
    """The key dashboard sessions are signed with (ui/session.py): from JETCRON_UI_SESSION_KEY_FILE, else derived
    from the seed of the gateway's NATS credential (its replicas share it, and holding it already lets one ask the
    API for any tenant), else random: sessions then last as long as this process."""
    if settings.ui_session_key_file:
        try:
            secret = Path(settings.ui_session_key_file).read_bytes().strip()
        except OSError as exc:
            raise Misconfigured(f"JETCRON_UI_SESSION_KEY_FILE {settings.ui_session_key_file}: cannot read it "
                                f"({exc.strerror})") from None
        if len(secret) < 32:
            raise Misconfigured(f"JETCRON_UI_SESSION_KEY_FILE {settings.ui_session_key_file}: holds {len(secret)} "
                                "bytes; at least 32 random bytes are needed (e.g. `openssl rand -hex 32`)")
    elif settings.nats_creds:
        try:
            lines = Path(settings.nats_creds).read_text().splitlines()
        except OSError as exc:
            raise Misconfigured(f"JETCRON_NATS_CREDS {settings.nats_creds}: cannot read it ({exc.strerror})") from None
        seed = lines[lines.index(BEGIN_SEED) + 1].strip() if BEGIN_SEED in lines[:-1] else ""
        if not seed:
            raise Misconfigured(f"JETCRON_NATS_CREDS {settings.nats_creds}: no user seed to sign dashboard "
                                "sessions with; set JETCRON_UI_SESSION_KEY_FILE")
        secret = seed.encode()
    else:
        return secrets.token_bytes(32)
    return hmac.new(secret, KEY_LABEL, hashlib.sha256).digest()


KEEP_ALIVE_SECONDS = 75
"""Seconds an idle HTTP connection is kept open (nginx's default): longer than the clients' own pools keep one."""

class _Server(uvicorn.Server):
    """Stops when the service does (its SIGTERM handling is the runtime's, not uvicorn's)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _listen(host: str, port: int) -> socket.socket:
    """Bound here, not by uvicorn: a port in use is this service's named error, and port 0 is known at once."""
    # IPPROTO_TCP named: asyncio turns Nagle off (TCP_NODELAY) only on sockets that say they are TCP, and with
    # it on, a reply written in two parts waited out the client's delayed ACK (40 ms on every GET).
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise Misconfigured(f"JETCRON_HTTP_HOST/PORT {host}:{port}: cannot listen ({exc.strerror})") from None
    sock.listen(1024)
    sock.setblocking(False)
    return sock


async def main(ctx: Context) -> None:
    book = TokenBook()
    watch = background(ctx, book.follow(await ctx.buckets.open(s.BUCKET_TOKENS, TokenRecord)))
    timeout = ctx.settings.http_api_timeout

    def ready() -> str | None:
        return ctx.readiness() or (None if book.loaded.is_set() else "starting: tokens not loaded yet")

    gate = Gate(lookup=book.lookup, client=lambda tenant: Client(timeout=timeout, tenant=tenant, rpc=ctx.rpc),
                ready=ready, followers=Followers(ctx.settings.http_log_followers))
    sock = _listen(ctx.settings.http_host, ctx.settings.http_port)
    host, port = sock.getsockname()[:2]
    settings = ctx.settings
    sessions = Sessions(key=session_key(settings), max_age=settings.ui_session_seconds,
                        secure=settings.ui_cookie_secure, trusted_proxies=proxies(settings.http_trusted_proxies))
    app = build_app(gate, trace_url=settings.ui_trace_url, public_url=settings.http_public_url, sessions=sessions)
    # A connection idle for as long as clients keep theirs (httpx: 5 s, uvicorn's own default too) could be closed
    # by the server just as a client sends on it, which it reads as an error; the server keeps it longer.
    server = _Server(uvicorn.Config(app, log_config=None, access_log=False, lifespan="off", server_header=False,
                                    timeout_keep_alive=KEEP_ALIVE_SECONDS))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    await book.loaded.wait()
    ctx.ready.set()
    ctx.log.info("gateway ready", url=f"http://{host}:{port}/api/v1", docs=f"http://{host}:{port}/api/v1/docs",
                 dashboard=f"http://{host}:{port}/ui")
    await ctx.stop.wait()
    server.should_exit = True
    await serving
    sock.close()
    watch.cancel()
