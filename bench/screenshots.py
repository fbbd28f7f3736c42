"""`make screenshots`: a small live jetcron (auth on, one agent) with a few jobs, and a screenshot of every
dashboard page in headless Chromium, written to the folder given (docs/images/ for the docs and README)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from bench.browser import chromium, find_chromium, log_in
from bench.common import system
from jetcron.bus.server import free_port
from jetcron.sdk.client import Client

TENANT = "acme"
JOBS = [
    {"name": "extract", "command": ["sh", "-c", "echo extracting; sleep 1; echo 1200 rows"],
     "schedule": {"kind": "cron", "cron": "0 3 * * *", "tz": "Europe/Berlin"}},
    {"name": "transform", "command": ["true"], "depends_on": ["extract"],
     "schedule": {"kind": "cron", "cron": "0 3 * * *", "tz": "Europe/Berlin"}},
    {"name": "load", "command": ["true"], "depends_on": ["transform"],
     "schedule": {"kind": "cron", "cron": "0 3 * * *", "tz": "Europe/Berlin"}},
    {"name": "tick", "command": ["sh", "-c", "date"], "schedule": {"kind": "every", "every_seconds": 2}},
    {"name": "flaky", "command": ["sh", "-c", "echo trying; exit 3"], "retry": {"max_attempts": 2,
                                                                                 "initial_seconds": 0.5}},
    {"name": "long", "command": ["sh", "-c", "for i in $(seq 1 600); do echo step $i; sleep 1; done"]},
]


async def _wait(predicate: object, what: str, timeout: float = 60) -> object:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        got = await predicate()  # type: ignore[operator]
        if got:
            return got
        if loop.time() > deadline:
            raise TimeoutError(f"waiting for {what}")
        await asyncio.sleep(0.5)


async def shoot(url: str, identity: object, port: int, out: Path, executable: str) -> list[Path]:
    admin = await Client.connect(url, timeout=30, identity=identity)  # type: ignore[arg-type]
    client = Client(admin.nc, 30, tenant=TENANT)
    for spec in JOBS:
        await client.jobs.create(spec)
    await client.jobs.trigger("extract")

    async def settled() -> bool:
        dead = (await client.runs.list(job="flaky")).items
        running = (await client.runs.list(job="long")).items
        ticks = (await client.runs.list(job="tick")).items
        return bool(dead and dead[-1].state == "dead" and running and running[-1].state == "running"
                    and len(ticks) >= 5)

    await _wait(settled, "the example jobs to settle")
    long_run = (await client.runs.list(job="long")).items[-1].run_id
    admin_token = (await admin.tokens.create(admin=True)).token
    tenant_token = (await admin.tokens.create(tenant=TENANT)).token
    await admin.close()
    assert admin_token and tenant_token
    base = f"http://127.0.0.1:{port}"
    pages = {"overview": "/ui", "jobs": "/ui/jobs", "job": "/ui/jobs/extract", "run": f"/ui/runs/{long_run}",
             "flow": "/ui/flows/load", "dlq": "/ui/dlq"}
    admin_pages = {"agents": "/ui/agents", "tenants": "/ui/tenants"}
    written = []
    out.mkdir(parents=True, exist_ok=True)
    async with chromium(executable) as browser:
        for token, shots in ((tenant_token, pages), (admin_token, admin_pages)):
            page = await browser.new_page(viewport={"width": 1280, "height": 800})
            await log_in(page, base, token)
            for name, path in shots.items():
                await page.goto(base + path)
                await page.wait_for_timeout(2500 if name == "run" else 300)
                target = out / f"{name}.png"
                await page.screenshot(path=str(target), full_page=True)
                written.append(target)
            await page.close()
        login = await browser.new_page(viewport={"width": 1280, "height": 500})
        await login.goto(base + "/ui/login")
        await login.screenshot(path=str(out / "login.png"))
        written.append(out / "login.png")
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    executable = find_chromium()
    if executable is None:
        sys.exit("chromium is not installed: `make browser` installs Debian's package")
    port = free_port()
    with system(sync_always=False, auth=True, agents=1,
                services=("api", "trigger", "placement", "run_tracker", "gateway"),
                JETCRON_HTTP_PORT=str(port)) as jc:
        for path in asyncio.run(shoot(jc.url, jc.identity, port, args.out, executable)):
            print(path)


if __name__ == "__main__":
    main()
