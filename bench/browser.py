"""Headless Chromium (Debian's package) driven by Playwright: the dashboard's tests, its bench and screenshots.

Playwright's own browser download is impossible on these machines; the system chromium runs with the flags that
keep it off the network (without them it makes refused connections at every start).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from playwright.async_api import Browser, Page, async_playwright

FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]


def find_chromium() -> str | None:
    return os.environ.get("JETCRON_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


@asynccontextmanager
async def chromium(executable: str) -> AsyncIterator[Browser]:
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=executable, args=FLAGS, headless=True)
        try:
            yield browser
        finally:
            await browser.close()


async def log_in(page: Page, base: str, token: str) -> None:
    await page.goto(f"{base}/ui/login")
    await page.get_by_label("API token").fill(token)
    await page.get_by_role("button", name="Log in").click()
    await page.wait_for_url(f"{base}/ui")
