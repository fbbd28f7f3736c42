"""The direct hand-offs on a real nats-server: placement hands each assignment to its agent with a core request the
agent answers once its claim is stored, so JC_ASSIGN stores nothing; an AssignRun a placement of the previous release
published to JC_ASSIGN is still taken; an answer that comes too late sends the assignment by the stream as well, and
the run still runs once. The agent hands its finish report to the trackers the same way, answered once the run record
is written; one set to `JETCRON_REPORT_BY=stream` (as an agent of the previous release may be) reports by the
stream."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import nats
from harness import Services, wait_for
from placement_support import job, runs_of, start

from jetcron.core.lifecycle.run_state import RunEvent
from jetcron.core.lifecycle.runs import Change, apply
from jetcron.core.models import Run
from jetcron.sdk.client import Client
from jetcron.wire import subjects as s
from jetcron.wire.codec import decode, encode
from jetcron.wire.messages import AssignRun


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


async def assign_as_the_previous_release(url: str, run_id: str, agent: str) -> None:
    """What a placement of the previous release set to the stream (JETCRON_ASSIGN_BY=stream there) did to hand a
    run to `agent`: the `assigned` CAS, then an AssignRun on JC_ASSIGN carrying that write's revision as its token."""
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        runs = await js.key_value(s.BUCKET_RUNS)
        entry = await runs.get(run_id)
        run = decode(entry.value or b"", Run)
        new = apply(run, Change(event=RunEvent.ASSIGN, agents=[agent]), datetime.now(UTC))
        token = await runs.update(run_id, encode(new), last=entry.revision)
        assert new.spec is not None
        await js.publish(s.assign_subject(agent), encode(AssignRun(
            run_id=run_id, attempt=run.attempt, job=run.job, agent=agent, spec=new.spec, scheduled_at=run.scheduled_at,
            due_at=run.due_at, keep_seconds=run.keep_seconds, token=token)),
            headers={"Nats-Msg-Id": s.msg_id(run_id, run.attempt, f"assign.{agent}")})
    finally:
        await nc.close()


async def test_an_assignment_a_placement_of_the_previous_release_published_to_the_stream_runs_once(
        services: Services, client: Client, tmp_path: Path) -> None:
    # Given an agent and no placement of this version, and a run recorded (a yearly job run by hand)
    await services.start_system(agents=1, core=("api", "run_tracker"))
    ran = tmp_path / "ran.log"
    by_hand = job("older", "sh", "-c", f'echo "$JETCRON_ATTEMPT" >> {ran}')
    by_hand["spec"]["schedule"] = {"kind": "cron", "cron": "0 0 1 1 *"}
    await client.call("jobs.create", by_hand)
    run = await client.call("jobs.trigger", {"name": "older"})

    # When a placement of the previous release assigns it to the agent by the stream
    await assign_as_the_previous_release(services.server.url, run["run_id"], "agent-1")

    # Then it runs once, at its first attempt, taken from the stream once and acked
    await each_succeeds_once(client, ["older"])
    assert ran.read_text().split() == ["1"]
    assert await assign_stream(services.server.url) == (1, 0, 0, 0)


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


async def test_an_agent_set_to_report_by_the_stream_has_each_finish_stored_there_and_applied(
        services: Services, client: Client) -> None:
    # Given an agent that publishes its reports to the events stream (JETCRON_REPORT_BY=stream: every finish on the
    # stream's trail, as an agent of the previous release may also be set)
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
