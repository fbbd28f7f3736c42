"""The REST API's docs page in a real headless Chromium: Redoc, vendored and served by the gateway itself, renders the
contract under the page's Content-Security-Policy, and the page asks no other site for anything."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import warnings
from collections.abc import AsyncIterator, Iterator
from urllib.parse import urlsplit

import pytest
import uvicorn
from browser_support import chromium
from harness import wait_for
from litestar import Litestar
from playwright.async_api import ConsoleMessage, Request, expect

from jetcron_services.gateway.app import build_app
from jetcron_services.gateway.gate import Gate

pytestmark = pytest.mark.timeout(120)


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@contextlib.asynccontextmanager
async def _serving(app: Litestar) -> AsyncIterator[str]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    sock.setblocking(False)
    server = _Server(uvicorn.Config(app, log_config=None, access_log=False, lifespan="off"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        await wait_for(lambda: server.started, 10, what="the gateway to listen")
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        await task
        sock.close()


async def test_the_docs_page_renders_the_contract_from_the_gateways_own_origin_alone() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        app = build_app(Gate(lookup=lambda _: None, client=lambda _: None, ready=lambda: None))  # type: ignore[arg-type,return-value]
    async with _serving(app) as base, chromium() as browser:
        page = await browser.new_page()
        requested: list[str] = []
        refused: list[str] = []
        errors: list[str] = []

        def console(message: ConsoleMessage) -> None:
            if message.type != "error":
                return
            # The policy at work: Redoc's logo from its makers' CDN is refused before any request is made.
            (refused if "Content Security Policy" in message.text else errors).append(message.text)

        def answered(sent: Request) -> None:
            requested.append(sent.url)

        def failed(sent: Request) -> None:
            blocked.append((sent.url, sent.failure))

        blocked: list[tuple[str, str | None]] = []
        page.on("console", console)
        page.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))
        page.on("requestfinished", answered)
        page.on("requestfailed", failed)
        answer = await page.goto(f"{base}/api/v1/docs")
        assert answer is not None and answer.status == 200
        # Redoc rendered the document: its title, and its operations by summary
        await expect(page.locator("h1").first).to_contain_text("jetcron", timeout=30_000)
        await expect(page.locator("h2", has_text="Create a job").first).to_be_visible()
        await page.wait_for_load_state("networkidle")
        origins = {f"{urlsplit(url).scheme}://{urlsplit(url).netloc}" for url in requested
                   if not url.startswith(("data:", "blob:"))}
        assert origins == {base}, requested  # everything that was fetched came from the gateway
        # and what the page tried elsewhere (Redoc's logo) the browser refused without asking the other site
        assert all(urlsplit(url).netloc == "cdn.redoc.ly" and failure == "csp"
                   for url, failure in blocked), blocked
        assert errors == [], errors
        assert all("cdn.redoc.ly" in text for text in refused), refused
