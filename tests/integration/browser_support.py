"""The dashboard's browser tests: the system chromium (bench/browser.py), and what a page did wrong."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from host_needs import need
from playwright.async_api import Browser, ConsoleMessage, Page, Request, Response

from bench import browser
from bench.browser import log_in

__all__ = ["Watched", "chromium", "log_in"]


def chromium_path() -> str:
    """The system chromium; a test run without it is skipped on a laptop and fails in CI (tests/host_needs.py;
    `make browser` installs Debian's chromium package where it can)."""
    need("chromium", why="the dashboard's pages are driven in it")
    found = browser.find_chromium()
    assert found is not None
    return found


@asynccontextmanager
async def chromium() -> AsyncIterator[Browser]:
    async with browser.chromium(chromium_path()) as launched:
        yield launched


@dataclass
class Watched:
    """Everything a page did wrong: console errors, failed requests, error responses (expected ones aside)."""

    errors: list[str] = field(default_factory=list)
    expected_status: set[int] = field(default_factory=set)

    def attach(self, page: Page) -> None:
        page.on("console", self._console)
        page.on("pageerror", lambda exc: self.errors.append(f"page error: {exc}"))
        page.on("requestfailed", self._failed)
        page.on("response", self._response)

    def _console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.errors.append(f"console: {message.text}")

    def _failed(self, request: Request) -> None:
        # The browser aborts the page's own requests (the log's event stream, the run state's htmx poll) when the
        # page closes them or navigates away (a reload in the test): not a failure. A server's failure shows as an
        # error status (below) or another net error; an aborted page load is still one.
        if request.failure in ("net::ERR_ABORTED", None) and not request.is_navigation_request():
            return
        self.errors.append(f"request failed: {request.method} {request.url}: {request.failure}")

    def _response(self, response: Response) -> None:
        if response.status >= 400 and response.status not in self.expected_status:
            self.errors.append(f"HTTP {response.status}: {response.request.method} {response.url}")
