"""The gateway process: watches the token bucket, serves the REST API with uvicorn on JETCRON_HTTP_PORT."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator

import uvicorn

from jetcron.auth.tokens import TokenRecord
from jetcron.bus.ports import Records
from jetcron.core.errors import Misconfigured
from jetcron.sdk.client import Client
from jetcron.services.gateway.app import build_app
from jetcron.services.gateway.gate import Gate
from jetcron.services.runtime import Context, background
from jetcron.wire import subjects as s


class TokenBook:
    """Every token record, kept current by a watch: a revoked token is refused as soon as its delete arrives,
    and checking one costs no round trip."""

    def __init__(self) -> None:
        self.records: dict[str, TokenRecord] = {}
        self.loaded = asyncio.Event()

    def lookup(self, token_id: str) -> TokenRecord | None:
        return self.records.get(token_id)

    async def follow(self, store: Records[TokenRecord]) -> None:
        """For ever: the watch itself waits out a bucket not made yet or NATS away (bus/kv.Store.watch)."""
        seen: dict[str, TokenRecord] = {}
        async for key, record, _ in store.watch():
            if not key:
                self.records = seen
                self.loaded.set()
            elif record is None:
                seen.pop(key, None)
            else:
                seen[key] = record


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
                ready=ready)
    sock = _listen(ctx.settings.http_host, ctx.settings.http_port)
    host, port = sock.getsockname()[:2]
    app = build_app(gate, trace_url=ctx.settings.ui_trace_url, public_url=ctx.settings.http_public_url)
    server = _Server(uvicorn.Config(app, log_config=None, access_log=False, lifespan="off", server_header=False))
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
