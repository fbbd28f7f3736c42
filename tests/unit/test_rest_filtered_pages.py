"""A filtered jobs page through the REST gateway (on the api's own verbs over the twins) is full unless the listing
ended, however rare the jobs its filter finds, and looks at each job once."""

from __future__ import annotations

from datetime import timedelta

import pytest
from rest_twin import T0, gateway

from jetcron.core.ids import job_key, run_id
from jetcron.core.models import JobRecord, JobSpec, Run, RunState

JOBS = 10_000
EVERY = 500
"""One job in EVERY has a latest run that failed; the others have not run yet."""


@pytest.mark.timeout(120)
async def test_a_filtered_page_is_full_unless_the_listing_ended_among_10000_jobs() -> None:
    async with gateway() as gw:
        # Given 10,000 jobs of acme, one in 500 of them failed
        for i in range(JOBS):
            spec = JobSpec(name=f"j{i:05d}", command=["true"], tenant="acme")
            await gw.ctx.jobs.put(spec.key, JobRecord(spec=spec, created_at=T0, updated_at=T0))
        failed = [f"j{i:05d}" for i in range(0, JOBS, EVERY)]
        for name in failed:
            key = job_key("acme", name)
            at = T0 + timedelta(hours=1)
            run = Run(run_id=run_id(key, at), job=key, tenant="acme", state=RunState.FAILED, scheduled_at=at,
                      due_at=at, created_at=at)
            await gw.ctx.runs.put(run.run_id, run)
        headers = gw.headers("acme")

        # When one page of 50 is asked for: it holds all 20, and says the listing ended
        gw.asked.calls.clear()
        page = await gw.http.get("/api/v1/jobs", params={"status": "failed", "limit": 50}, headers=headers)
        assert page.status_code == 200, page.text
        assert [j["job_id"] for j in page.json()["items"]] == failed and page.json()["next_cursor"] is None
        # each job was looked at once: listed once, its latest run read once
        listed = [p for p in gw.asked.of("jobs.list")]
        assert sum(p["limit"] for p in listed) >= JOBS and all(p["limit"] <= 1000 for p in listed), listed
        latest = [p["job"] for p in gw.asked.of("runs.list") if p.get("latest")]
        assert len(latest) == len(set(latest)) == JOBS

        # And pages of 5 are full, each going on where the one before stopped, until the listing ends
        pages: list[list[str]] = []
        cursor = None
        while True:
            got = await gw.http.get("/api/v1/jobs", params={"status": "failed", "limit": 5,
                                                            **({"cursor": cursor} if cursor else {})},
                                    headers=headers)
            assert got.status_code == 200, got.text
            pages.append([j["job_id"] for j in got.json()["items"]])
            cursor = got.json()["next_cursor"]
            if cursor is None:
                break
        assert all(len(p) == 5 for p in pages[:-1]) and len(pages) <= len(failed) // 5 + 1, pages
        assert [name for p in pages for name in p] == failed
