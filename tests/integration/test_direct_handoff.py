"""The direct hand-offs on a real nats-server: placement hands each assignment to its agent with a core request the
agent answers once its claim is stored, so JC_ASSIGN stores nothing; an agent of the earlier protocol
(`JETCRON_ASSIGN_BY=stream`) gets its assignments by the stream; an answer that comes too late sends the
assignment by the stream as well, and the run still runs once. The agent hands its finish report to the trackers
the same way (`JETCRON_REPORT_BY`), answered once the run record is written."""

from __future__ import annotations

from pathlib import Path

import nats
from harness import Services, wait_for
from placement_support import job, runs_of, start

from jetcron.sdk.client import Client
from jetcron.wire import subjects as s


async def assign_stream(url: str) -> tuple[int, int, int, int]:
    """JC_ASSIGN's (last sequence, messages held) and its agent-1 consumer's (redelivered, ack pending)."""
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        stream = await js.stream_info(s.STREAM_ASSIGN)
        consumer = await js.consumer_info(s.STREAM_ASSIGN, s.assign_consumer("agent-1"))
        return stream.state.last_seq, stream.state.messages, consumer.num_redelivered, consumer.num_ack_pending
    finally:
        await nc.close()


async def each_succeeds_once(client: Client, names: list[str]) -> None:
    async def done() -> bool:
        seen = [sorted((r["state"], r["attempt"]) for r in await runs_of(client, n)) for n in names]
        return all(runs == [("succeeded", 1)] for runs in seen)

    await wait_for(done, 40, what=f"each of {names} to succeed once, at its first attempt")


async def test_runs_handed_to_their_agent_directly_store_no_assignment(
        services: Services, client: Client, tmp_path: Path) -> None:
    # Given an agent that takes assignments handed to it directly (the default)
    await start(services, {"agent-1": {}})
    ran = tmp_path / "ran.log"

    # When three runs are due now
    names = [f"direct{i}" for i in range(3)]
    for name in names:
        await client.call("jobs.create", job(name, "sh", "-c", f'echo "$JETCRON_RUN_ID" >> {ran}'))

    # Then each runs once, and not one AssignRun was stored on the agent's stream
    await each_succeeds_once(client, names)
    assert sorted(line.split(".")[0] for line in ran.read_text().split()) == names
    assert await assign_stream(services.server.url) == (0, 0, 0, 0)


async def test_an_agent_of_the_earlier_protocol_gets_its_assignments_by_the_stream(
        services: Services, client: Client) -> None:
    # Given an agent that does not answer direct hand-offs (JETCRON_ASSIGN_BY=stream: a cluster mid-upgrade)
    await start(services, {"agent-1": {"JETCRON_ASSIGN_BY": "stream"}})

    # When two runs are due now
    names = ["older0", "older1"]
    for name in names:
        await client.call("jobs.create", job(name, "true"))

    # Then each runs once, both by the stream, each taken once and acked
    await each_succeeds_once(client, names)
    assert await assign_stream(services.server.url) == (2, 0, 0, 0)


async def test_an_answer_too_late_sends_the_assignment_by_the_stream_too_and_the_run_runs_once(
        services: Services, client: Client, tmp_path: Path) -> None:
    # Given an agent whose first answer to a hand-off comes 2 s late, past placement's 0.5 s wait, though it has
    # taken the run
    await start(services, {"agent-1": {"JETCRON_FAULT": "agent.handoff_answer=sleep2"}})
    ran = tmp_path / "ran.log"

    # When a run is due now, running long enough that the stream's copy arrives while it runs
    await client.call("jobs.create", job("late", "sh", "-c", f'echo "$JETCRON_ATTEMPT" >> {ran}; sleep 1'))

    # Then the run ran once, at its first attempt, though its assignment came twice
    await each_succeeds_once(client, ["late"])
    assert ran.read_text().split() == ["1"]
    assert await assign_stream(services.server.url) == (1, 0, 0, 0)


async def finished_events(url: str) -> int:
    """The finish reports JC_EVENTS holds (every agent's)."""
    nc = await nats.connect(url)
    try:
        info = await nc.jetstream().stream_info(s.STREAM_EVENTS, subjects_filter=s.event_subject("finished", "*"))
        return sum((info.state.subjects or {}).values())
    finally:
        await nc.close()


async def test_finish_reports_handed_to_the_trackers_directly_store_no_event(
        services: Services, client: Client) -> None:
    # Given an agent that hands its finish reports to the trackers directly (the default)
    await start(services, {"agent-1": {}})

    # When two runs are due now
    names = ["reported0", "reported1"]
    for name in names:
        await client.call("jobs.create", job(name, "true"))

    # Then each is recorded as succeeded once, and no finish report was stored on the events stream
    await each_succeeds_once(client, names)
    assert await finished_events(services.server.url) == 0


async def test_an_agent_of_the_earlier_protocol_reports_by_the_stream(services: Services, client: Client) -> None:
    # Given an agent that publishes its reports to the events stream (JETCRON_REPORT_BY=stream)
    await start(services, {"agent-1": {"JETCRON_REPORT_BY": "stream"}})
    names = ["streamed0", "streamed1"]
    for name in names:
        await client.call("jobs.create", job(name, "true"))
    # Then each run's finish was stored there, once
    await each_succeeds_once(client, names)
    assert await finished_events(services.server.url) == 2


async def test_a_tracker_answer_too_late_sends_the_report_by_the_stream_too_and_the_run_ends_once(
        services: Services, client: Client) -> None:
    # Given a tracker whose first answer to a report comes 2 s late, past the agent's 0.5 s wait, though it has
    # written the run's end
    services.start("run_tracker", "run_tracker", JETCRON_FAULT="tracker.report_answer=sleep2")
    await start(services, {"agent-1": {}}, core=("api", "trigger"))
    await services["run_tracker"].wait_logged("run tracker ready", 40)

    # When a run is due now
    await client.call("jobs.create", job("late-report", "true"))

    # Then it succeeded once, at its first attempt, with one entry in its history, and its report came by the
    # stream too (dropped there as late)
    await each_succeeds_once(client, ["late-report"])
    await wait_for(lambda: finished_events(services.server.url), 10, what="the report's copy on the stream")
    (run,) = await runs_of(client, "late-report")
    assert len(run["history"]) == 1
    assert await finished_events(services.server.url) == 1
