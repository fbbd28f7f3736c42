"""Finish reports handed to the trackers several to a request, on a real nats-server: a herd that ends at one instant
on one agent reports in a few requests, every run recorded once and no finish stored on the events stream; with
`JETCRON_AGENT_REPORT_BATCH=1` (one report to a request, the protocol before) most of that herd's reports go to the
stream instead."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import nats
from harness import Services, wait_for
from nats.aio.msg import Msg
from test_direct_handoff import finished_events

from jetcron.sdk.client import Client
from jetcron.wire import subjects as s
from jetcron.wire.codec import decode
from jetcron.wire.messages import RunFinished

HERD = 30


async def _herd(services: Services, client: Client, **agent: str) -> list[tuple[str, int]]:
    """Start the system with one sim agent, stage HERD runs due at one instant a few seconds ahead, and wait for
    each to succeed once; (subject, reports) of every direct report request seen meanwhile."""
    await services.start_system(agents=0, JETCRON_TRIGGER_HORIZON="10")
    services.start("agent-1", "agent", JETCRON_AGENT_ID="agent-1", JETCRON_AGENT_SIM="true",
                   JETCRON_AGENT_SLOTS=str(HERD), **agent)
    await services["agent-1"].wait_logged("agent ready", 30)
    seen: list[tuple[str, int]] = []

    async def note(msg: Msg) -> None:
        kind, _ = s.parse_event_subject(msg.subject)
        seen.append((kind, len(decode(msg.data, list[RunFinished])) if kind == s.REPORT_BATCH else 1))

    nc = await nats.connect(services.server.url)
    try:
        await nc.subscribe(s.REPORT_ALL, cb=note)  # beside the trackers' queue group: a copy of each request
        due = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=5)
        for i in range(HERD):
            await client.call("jobs.create", {"spec": {"name": f"herd{i}", "command": ["true"],
                                                       "schedule": {"kind": "at", "at": due.isoformat()}}})

        async def each_succeeded_once() -> bool:
            runs = (await client.call("runs.list", {"state": "succeeded", "limit": 100}))["items"]
            return sorted(r["run_id"].split(".")[0] for r in runs if r["attempt"] == 1) == sorted(
                f"herd{i}" for i in range(HERD))

        await wait_for(each_succeeded_once, 40, what=f"the {HERD} runs of the herd to succeed once")
        await asyncio.sleep(0.2)  # the last requests' copies
    finally:
        await nc.close()
    return seen


async def test_a_herd_that_ends_at_once_reports_in_a_few_requests_and_stores_no_finish(
        services: Services, client: Client) -> None:
    # Given one sim agent (the default `agent_report_batch`, 32) and a herd of 30 runs due at one instant
    seen = await _herd(services, client)

    # Then their reports went to the trackers directly, most of them several to a request, every one once
    batched = [n for kind, n in seen if kind == s.REPORT_BATCH]
    assert batched and max(batched) >= 2, seen
    assert sum(n for _, n in seen) == HERD and len(seen) < HERD, seen
    # And no finish report was stored on the events stream
    assert await finished_events(services.server.url) == 0


async def test_one_report_to_a_request_sends_most_of_a_herds_to_the_stream(
        services: Services, client: Client) -> None:
    # Given one sim agent that hands over one report to a request (the protocol before)
    seen = await _herd(services, client, JETCRON_AGENT_REPORT_BATCH="1")

    # Then no request carried two, and past 16 in flight its reports went to the events stream
    assert all(kind == "finished" for kind, _ in seen), seen
    stored = await finished_events(services.server.url)
    assert stored > 0 and stored + len(seen) >= HERD, (stored, seen)
