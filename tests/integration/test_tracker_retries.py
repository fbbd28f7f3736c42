"""Retries with backoff, dead letter and replay, non-retryable exit codes: the run tracker on a real nats-server."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import nats
from harness import Services, wait_for
from metrics_support import samples
from test_runs import now_job, runs_of, state_is, the_run

from jetcron.bus.registry import Registry
from jetcron.sdk.client import Client

FAST_BACKOFF = {"max_attempts": 3, "initial_seconds": 0.5, "multiplier": 2.0, "max_delay_seconds": 10, "jitter": 0.0}


def _t(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


def cli(services: Services, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(Path(sys.executable).parent / "jetcron"), "--nats", services.server.url, *args],
                          capture_output=True, text=True, timeout=30, env={**os.environ, "PYTHONWARNINGS": "ignore"})


async def test_a_failing_run_retries_with_backoff_then_is_dead_lettered_and_replayable(
        services: Services, client: Client) -> None:
    # Given a job that always exits 3, three attempts, backoff 0.5 s then 1 s (no jitter)
    await services.start_system(agents=1)
    await client.call("jobs.create", now_job("flaky", "sh", "-c", "echo try $JETCRON_ATTEMPT; exit 3",
                                             retry=FAST_BACKOFF))

    # When it has run out of attempts
    run = await the_run(client, "flaky", when=state_is("dead", "failed", "succeeded"), timeout=30,
                        what="flaky to be dead")

    # Then it is dead after three failed attempts, with the reason, each attempt spaced by the backoff
    assert run["state"] == "dead"
    assert [(a["attempt"], a["outcome"], a["exit_code"]) for a in run["history"]] == [
        (1, "failed", 3), (2, "failed", 3), (3, "failed", 3)]
    assert run["reason"] == "exit code 3 on attempt 3; 3/3 attempts failed"
    gaps = [_t(b["started_at"]) - _t(a["finished_at"]) for a, b in itertools.pairwise(run["history"])]
    assert 0.5 <= gaps[0] < 3.0 and 1.0 <= gaps[1] < 4.0, gaps

    # And `jetcron dlq list` shows it (read from the dead-letter stream)
    listed = await wait_for(lambda: "flaky." in cli(services, "dlq", "list", "-o", "json").stdout, 10,
                            what="the dead run in dlq list")
    assert listed
    page = await client.call("dlq.list")
    assert [r["run_id"] for r in page["items"]] == [run["run_id"]]

    # When it is replayed from the CLI
    replayed = cli(services, "dlq", "replay", run["run_id"], "-o", "json")
    assert replayed.returncode == 0, replayed.stderr

    # Then a new run with a fresh attempt series runs (and, still failing, is dead again after its own 3 attempts)
    async def replay_dead() -> list[dict[str, object]]:
        return [r for r in await runs_of(client, "flaky") if r["run_id"] != run["run_id"] and r["state"] == "dead"]

    again = (await wait_for(replay_dead, 30, what="the replay to run out of attempts"))[0]
    assert [a["attempt"] for a in again["history"]] == [1, 2, 3]  # type: ignore[index]
    assert str(again["reason"]).startswith("exit code 3")


async def test_a_non_retryable_exit_code_fails_at_once(services: Services, client: Client) -> None:
    # Given a job whose exit code 2 means "bad input, do not retry"
    await services.start_system(agents=1)
    await client.call("jobs.create", now_job("strict", "sh", "-c", "exit 2",
                                             retry={**FAST_BACKOFF, "non_retryable_exit_codes": [2]}))

    # Then it fails after one attempt, saying why, and is not dead-lettered
    run = await the_run(client, "strict", when=state_is("failed", "dead", "succeeded"), what="strict to end")
    assert (run["state"], run["attempt"], run["reason"]) == ("failed", 1, "exit code 2 is non-retryable")
    assert (await client.call("dlq.list"))["items"] == []


async def test_a_run_that_fails_then_succeeds_ends_succeeded(services: Services, client: Client,
                                                             tmp_path: Path) -> None:
    # Given a job that fails on its first attempt only
    await services.start_system(agents=1)
    await client.call("jobs.create", now_job(
        "second-time", "sh", "-c", 'test "$JETCRON_ATTEMPT" -ge 2', retry=FAST_BACKOFF))

    # Then the second attempt succeeds and the record shows both
    run = await the_run(client, "second-time", when=state_is("succeeded", "dead"), what="the retry to succeed")
    assert [(a["attempt"], a["outcome"]) for a in run["history"]] == [(1, "failed"), (2, "succeeded")]
    assert (run["state"], run["exit_code"]) == ("succeeded", 0)


async def retries_counted(services: Services) -> float:
    """jetcron_retries_total as the run tracker's /metrics shows it (one tracker: every retry is its write)."""
    nc = await nats.connect(services.server.url)
    try:
        trackers = [i for i in await (await Registry.open(nc.jetstream())).instances() if i.service == "run_tracker"]
    finally:
        await nc.close()
    assert len(trackers) == 1
    return (await samples(trackers[0]))[("jetcron_retries_total", frozenset())]


async def test_each_retry_of_a_failing_run_counts_once_in_jetcron_retries_total(services: Services,
                                                                                client: Client) -> None:
    # Given a tracker that has retried nothing yet
    await services.start_system(agents=1)
    before = await retries_counted(services)
    assert before == 0

    # When a job fails on its first two attempts and succeeds on its third
    await client.call("jobs.create", now_job("third-time", "sh", "-c", 'test "$JETCRON_ATTEMPT" -ge 3',
                                             retry=FAST_BACKOFF))
    run = await the_run(client, "third-time", when=state_is("succeeded", "dead"), timeout=30,
                        what="the second retry to succeed")
    assert [(a["attempt"], a["outcome"]) for a in run["history"]] == [(1, "failed"), (2, "failed"), (3, "succeeded")]

    # Then the counter went up by exactly its two retries (each counted as it was written, before it ran)
    assert await retries_counted(services) - before == 2


async def test_a_retry_on_the_same_agent_starts_while_the_failed_attempt_still_releases_its_lease(
        services: Services, client: Client) -> None:
    # Given one agent whose lease releases are slow (3 s after an attempt's report, without stalling the agent)
    await services.start_system(agents=1, JETCRON_FAULT="agent.before_release=sleep3")

    # When a job fails at once and its retry is assigned to that agent within the 3 s
    await client.call("jobs.create", now_job("again", "false", retry={**FAST_BACKOFF, "max_attempts": 2,
                                                                      "initial_seconds": 0.1}))

    # Then the retry runs as attempt 2, on the lease it took over from attempt 1, and the run is dead after two
    # failures (it used to be skipped as "lease held elsewhere", stall, and run a third time)
    run = await the_run(client, "again", when=state_is("dead"), timeout=25, what="the run to be dead")
    assert [(a["attempt"], a["agent"], a["outcome"]) for a in run["history"]] == [
        (1, "agent-1", "failed"), (2, "agent-1", "failed")]
    assert "assignment skipped" not in services["agent-1"].output()
