"""Runs end to end against a real nats-server: execute and log, survive a dead agent, fence stale reports, cancel."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import nats
from harness import Services, pid_alive, wait_for

from jetcron.bus.server import EmbeddedNats
from jetcron.sdk.client import Client
from jetcron.wire import subjects as s
from jetcron.wire.codec import encode
from jetcron.wire.messages import RunFinished


def now_job(name: str, *command: str, **spec: Any) -> dict[str, Any]:
    return {"spec": {"name": name, "command": list(command), "schedule": {"kind": "now"}, **spec}}


async def runs_of(client: Client, job: str) -> list[dict[str, Any]]:
    page = await client.call("runs.list", {"job": job})
    return list(page["items"])


async def the_run(client: Client, job: str, *, when: Any = bool, timeout: float = 20.0,
                  what: str = "") -> dict[str, Any]:
    """Wait until the job has exactly one run and `when(run)` holds; return that run."""

    async def check() -> dict[str, Any] | None:
        runs = await runs_of(client, job)
        assert len(runs) <= 1, f"job {job} has {len(runs)} runs: {[r['run_id'] for r in runs]}"
        return runs[0] if runs and when(runs[0]) else None

    result: dict[str, Any] = await wait_for(check, timeout, what=what or f"the run of {job}")
    return result


async def tracker_caught_up(url: str, seq: int | None = None) -> None:
    """Wait until the run tracker has handled (acked) every event up to `seq`, or every event so far."""
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        if seq is None:
            seq = (await js.stream_info(s.STREAM_EVENTS)).state.last_seq

        async def handled() -> bool:
            info = await js.consumer_info(s.STREAM_EVENTS, s.CONSUMER_TRACKER)
            return info.ack_floor.stream_seq >= seq

        await wait_for(handled, 10, what=f"the run tracker to handle events up to {seq}")
    finally:
        await nc.close()


def state_is(*states: str) -> Any:
    return lambda run: run["state"] in states


async def test_now_job_runs_and_its_output_is_in_the_logs(services: Services, client: Client) -> None:
    # Given the whole system with two agents
    await services.start_system(agents=2)

    # When a `now` job is created
    await client.call("jobs.create", now_job("hello", "sh", "-c", "echo hi from $JETCRON_RUN_ID"))

    # Then its one run succeeds on one of the agents, and its output carries its own run id
    run = await the_run(client, "hello", when=state_is("succeeded"), what="hello to succeed")
    assert run["run_id"].startswith("hello.")
    assert (run["attempt"], run["exit_code"], run["outcome"]) == (1, 0, "succeeded")
    assert run["agent"] in ("agent-1", "agent-2")
    assert [(a["attempt"], a["outcome"]) for a in run["history"]] == [(1, "succeeded")]
    logs = await client.call("runs.logs", {"run_id": run["run_id"]})
    assert f"hi from {run['run_id']}" in logs["output"]
    assert logs["complete"] is True


# A job that records each attempt's identity, then sleeps long on attempt 1 (to be killed) and briefly after.
RECORDING_JOB = (
    'echo "$JETCRON_RUN_ID $JETCRON_ATTEMPT $JETCRON_IDEMPOTENCY_KEY" >> {calls}; '
    'echo $$ >> {pids}; '
    'if [ "$JETCRON_ATTEMPT" = 1 ]; then sleep 60; else sleep {later}; fi'
)


async def kill_agent_mid_run(services: Services, client: Client, tmp_path: Path, *,
                             later: float) -> tuple[dict[str, Any], str]:
    """Run the recording job, kill -9 its agent while attempt 1 sleeps; return the run as seen then, and the agent."""
    calls, pids = tmp_path / "calls.txt", tmp_path / "pids.txt"
    await services.start_system(agents=2)
    await client.call("jobs.create", now_job(
        "sleepy", "sh", "-c", RECORDING_JOB.format(calls=calls, pids=pids, later=later)))
    # (the pid is written after the identity line: once it is there, both are)
    running = await the_run(client, "sleepy", when=lambda r: r["state"] == "running" and pids.exists()
                            and pids.read_text().strip() != "", what="attempt 1 to run")
    victim = running["agent"]
    services[victim].kill9()
    return running, victim


async def test_agent_killed_mid_run_the_run_reruns_elsewhere_with_the_same_key(
        services: Services, client: Client, tmp_path: Path) -> None:
    # Given attempt 1 of a run sleeping on one agent
    # When that agent is killed with SIGKILL (no drain, no report)
    first, victim = await kill_agent_mid_run(services, client, tmp_path, later=1)
    survivor = "agent-2" if victim == "agent-1" else "agent-1"
    attempt_1_pid = int((tmp_path / "pids.txt").read_text().split()[0])

    # Then the orphaned child dies with its agent (the reaper), not minutes later
    await wait_for(lambda: not pid_alive(attempt_1_pid), 10, what=f"attempt 1's child {attempt_1_pid} to die")

    # And once the lease expires the run is re-run on the other agent as attempt 2, which succeeds
    run = await the_run(client, "sleepy", when=state_is("succeeded", "dead", "failed"), timeout=30,
                        what="the re-run to end")
    assert run["run_id"] == first["run_id"]
    assert (run["state"], run["attempt"], run["agent"]) == ("succeeded", 2, survivor)
    assert [(a["attempt"], a["agent"], a["outcome"]) for a in run["history"]] == [
        (1, victim, "lost"), (2, survivor, "succeeded")]
    assert "lease expired" in run["history"][0]["reason"]
    assert run["history"][1]["token"] > run["history"][0]["token"], "a new attempt holds a newer fencing token"

    # And both attempts saw the same run id and idempotency key, with a growing attempt number
    run_id = run["run_id"]
    assert (tmp_path / "calls.txt").read_text().splitlines() == [
        f"{run_id} 1 run:{run_id}", f"{run_id} 2 run:{run_id}"]


async def test_a_stale_report_after_redispatch_changes_nothing(
        services: Services, client: Client, nats_server: EmbeddedNats, tmp_path: Path) -> None:
    # Given a run re-dispatched after its agent died: attempt 2 now runs elsewhere with a newer token
    first, victim = await kill_agent_mid_run(services, client, tmp_path, later=30)
    current = await the_run(client, "sleepy", when=lambda r: r["state"] == "running" and r["attempt"] == 2,
                            timeout=30, what="attempt 2 to run")
    old_token = first["token"]
    assert current["token"] != old_token

    # When the dead attempt's late reports arrive: its own success, and one claiming attempt 2 with the old token
    nc = await nats.connect(nats_server.url)
    try:
        js = nc.jetstream()
        last_seq = 0
        for attempt in (1, 2):
            report = RunFinished(run_id=first["run_id"], attempt=attempt, token=old_token, agent=victim,
                                 outcome="succeeded", exit_code=0, at=datetime.now(UTC))
            ack = await js.publish(s.event_subject("finished", victim), encode(report),
                                   headers={s.HDR_MSG_ID: f"stale-{attempt}"})
            last_seq = ack.seq

    finally:
        await nc.close()
    await tracker_caught_up(nats_server.url, last_seq)

    # Then the run record is exactly as it was: attempt 2 still running under its own token
    after = await client.call("runs.get", {"run_id": first["run_id"]})
    assert after == current


async def test_cancel_of_a_running_job_kills_it_and_it_stays_cancelled(
        services: Services, client: Client, tmp_path: Path) -> None:
    # Given a running job whose shell would exit 0 on SIGTERM (a late "success") and has a grandchild
    pids = tmp_path / "pids.txt"
    await services.start_system(agents=1)
    await client.call("jobs.create", now_job(
        "victim", "sh", "-c", f"trap 'exit 0' TERM; sleep 60 & echo $$ $! > {pids}; wait"))
    run = await the_run(client, "victim", when=lambda r: r["state"] == "running" and pids.exists(),
                        what="the job to run")
    shell, grandchild = map(int, await wait_for(lambda: pids.read_text().split(), 5, what="pids written"))
    assert pid_alive(shell) and pid_alive(grandchild)

    # When the run is cancelled
    cancelled = await client.call("runs.cancel", {"run_id": run["run_id"], "reason": "not needed"})
    assert cancelled["state"] == "cancelled"

    # Then the whole process group is gone
    await wait_for(lambda: not pid_alive(shell) and not pid_alive(grandchild), 10,
                   what="the job's processes to die")

    # And once the agent has let go of the attempt, the record is still cancelled, untouched by the exit 0
    async def agent_idle() -> bool:
        agents = (await client.call("agents.list"))["items"]
        return bool(agents) and all(a["running"] == 0 for a in agents)

    await wait_for(agent_idle, 10, what="the agent to report no running attempts")
    await tracker_caught_up(services.server.url)
    final = await client.call("runs.get", {"run_id": run["run_id"]})
    assert (final["state"], final["outcome"], final["reason"]) == ("cancelled", "cancelled", "not needed")
    assert [(a["attempt"], a["outcome"]) for a in final["history"]] == [(1, "cancelled")]
    assert final["exit_code"] is None


async def test_a_staged_run_cancelled_while_it_waits_for_its_due_time_never_starts(
        services: Services, client: Client, tmp_path: Path) -> None:
    # Given a run staged 20 s ahead, assigned and taken by its agent, which waits for the due time
    ran = tmp_path / "ran"
    await services.start_system(agents=1, JETCRON_TRIGGER_HORIZON="20")
    due = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=22)
    await client.call("jobs.create", {"spec": {"name": "later", "command": ["touch", str(ran)],
                                               "schedule": {"kind": "at", "at": due.isoformat()}}})

    async def agent_running(n: int) -> bool:
        agents = (await client.call("agents.list"))["items"]
        return bool(agents) and sum(a["running"] for a in agents) == n

    run = await the_run(client, "later", when=lambda r: r["state"] == "assigned", timeout=10, what="the staging")
    await wait_for(lambda: agent_running(1), 5, what="the agent to hold the staged attempt")
    assert datetime.now(UTC) < due - timedelta(seconds=1), "staged and taken ahead of its due time"

    # When it is cancelled before its due time
    cancelled = await client.call("runs.cancel", {"run_id": run["run_id"], "reason": "plans changed"})
    assert cancelled["state"] == "cancelled"

    # Then the agent lets go of the attempt at once, freeing its slot well before the due time
    await wait_for(lambda: agent_running(0), 10, what="the agent to let go of the attempt")
    assert datetime.now(UTC) < due, "the cancelled attempt held its slot until its due time"
    assert not ran.exists(), "a cancelled staged run started its command"
    await tracker_caught_up(services.server.url)
    final = await client.call("runs.get", {"run_id": run["run_id"]})
    assert (final["state"], final["reason"], final["started_at"]) == ("cancelled", "plans changed", None)
