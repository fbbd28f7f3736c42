"""Headless Chromium (Debian's package) driven by Playwright, for the dashboard's tests and `make screenshots`.

Playwright's own browser download is impossible on these machines; the system chromium runs with the flags
that keep it off the network (FIELD_NOTES: background networking makes refused connections at every start).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import pytest
from playwright.async_api import Browser, ConsoleMessage, Page, Request, Response, async_playwright

FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]


def chromium_path() -> str:
    """The system chromium; a test run without it is skipped on a laptop and fails in CI (.ci/run installs it)."""
    found = os.environ.get("JETCRON_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed: .ci/run installs Debian's chromium package")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return found


@asynccontextmanager
async def chromium() -> AsyncIterator[Browser]:
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=chromium_path(), args=FLAGS, headless=True)
        try:
            yield browser
        finally:
            await browser.close()


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
        # A server-sent event stream the page closes itself, or one cut by navigating away, is not a failure.
        if request.url.endswith("/log") and request.failure in ("net::ERR_ABORTED", None):
            return
        self.errors.append(f"request failed: {request.method} {request.url}: {request.failure}")

    def _response(self, response: Response) -> None:
        if response.status >= 400 and response.status not in self.expected_status:
            self.errors.append(f"HTTP {response.status}: {response.request.method} {response.url}")


async def log_in(page: Page, base: str, token: str) -> None:
    await page.goto(f"{base}/ui/login")
    await page.get_by_label("API token").fill(token)
    await page.get_by_role("button", name="Log in").click()
    await page.wait_for_url(f"{base}/ui")
