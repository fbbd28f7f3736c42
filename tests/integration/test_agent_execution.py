"""How the agent executes a run, on a real nats-server: argv and env, output, follow, timeout, limits, drain."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from harness import Services, pid_alive, wait_for
from test_runs import now_job, runs_of, state_is, the_run

from jetcron.sdk.client import ApiError, Client

ONE_ATTEMPT = {"retry": {"max_attempts": 1}}


async def test_argv_runs_without_a_shell_in_its_own_group_with_the_run_identity(
        services: Services, client: Client, tmp_path: Path) -> None:
    # Given one agent and an argument full of shell metacharacters
    await services.start_system(agents=1)
    marker = tmp_path / "pwned"
    literal = f"$(touch {marker}); * | `touch {marker}` > x"
    script = ('printf "arg=%s\\n" "$1"; echo "pid=$$ pgid=$(cut -d" " -f5 /proc/$$/stat)"; '
              'env | grep -E "^(JETCRON_|GREETING=|LD_)" | sort')

    # When a job passes it as an argv element
    await client.call("jobs.create", now_job("argv", "sh", "-c", script, "sh", literal, env={"GREETING": "hello"}))
    run = await the_run(client, "argv", when=state_is("succeeded", "dead", "failed"), what="argv to end")

    # Then the argument reached the program literally (no shell ran it) and nothing was touched
    assert run["state"] == "succeeded", run
    output = (await client.call("runs.logs", {"run_id": run["run_id"]}))["output"]
    lines = output.splitlines()
    assert f"arg={literal}" in lines
    assert not marker.exists()
    # And the child leads its own process group
    ids = dict(part.split("=") for part in next(line for line in lines if line.startswith("pid=")).split())
    assert ids["pid"] == ids["pgid"]
    # And it got the job's env and the run's identity, with the fencing token the run record holds
    env = dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith(("arg=", "pid=")))
    assert env["GREETING"] == "hello"
    assert env["JETCRON_RUN_ID"] == run["run_id"]
    assert env["JETCRON_ATTEMPT"] == "1"
    assert env["JETCRON_IDEMPOTENCY_KEY"] == f"run:{run['run_id']}"
    assert env["JETCRON_SCHEDULED_AT"].startswith(run["scheduled_at"][:19])
    assert env["JETCRON_FENCING_TOKEN"] == str(run["token"]) != "0"
    assert not any(name.startswith("LD_") for name in env)

    # And env names that would hijack the child are refused at submit, naming the variable
    for name in ("LD_PRELOAD", "JETCRON_RUN_ID"):
        with pytest.raises(ApiError, match=name) as refused:
            await client.call("jobs.create", now_job(f"bad-{len(name)}", "true", env={name: "x"}))
        assert refused.value.code == "invalid"


async def test_output_is_capped_per_run_with_a_truncation_marker(services: Services, client: Client) -> None:
    # Given agents that keep at most 1 KiB of output per run
    services.env["JETCRON_LOG_CAP_BYTES"] = "1024"
    await services.start_system(agents=1)

    # When a job writes 5,000 bytes
    await client.call("jobs.create", now_job("chatty", "sh", "-c", "head -c 5000 /dev/zero | tr '\\0' x"))
    run = await the_run(client, "chatty", when=state_is("succeeded"), what="chatty to succeed")

    # Then the stored output is the first KiB followed by the truncation marker
    logs = await client.call("runs.logs", {"run_id": run["run_id"]})
    assert logs["output"] == "x" * 1024 + "\n[jetcron: output truncated at the per-run cap]\n"
    assert logs["complete"] is True


async def test_follow_streams_live_and_stops_when_the_run_ends(services: Services, client: Client) -> None:
    # Given a job that prints, pauses, prints again
    await services.start_system(agents=1)
    await client.call("jobs.create", now_job("slowtalk", "sh", "-c", "echo one; sleep 2; echo two"))
    run = await the_run(client, "slowtalk", what="the run to exist")

    # When its logs are followed from the start
    seen: list[tuple[float, bytes]] = []

    async def follow() -> None:
        async for chunk in client.follow_logs(run["run_id"]):
            seen.append((time.monotonic(), chunk))

    await asyncio.wait_for(follow(), 20)
    ended = time.monotonic()

    # Then each line arrived as it was written (live), and following stopped once the run was over
    text = b"".join(c for _, c in seen).decode()
    assert text == "one\ntwo\n"
    first = next(t for t, c in seen if b"one" in c)
    second = next(t for t, c in seen if b"two" in c)
    assert second - first > 1.5, "the first line came before the second was written"
    assert ended - second < 5
    final = await client.call("runs.get", {"run_id": run["run_id"]})
    assert final["state"] == "succeeded"


async def test_follow_stops_for_a_run_without_output(services: Services, client: Client) -> None:
    # Given a run that prints nothing (the agent writes no end marker for it)
    await services.start_system(agents=1)
    await client.call("jobs.create", now_job("quiet", "sleep", "1"))
    run = await the_run(client, "quiet", what="the run to exist")

    # When `jetcron runs logs RUN --follow` follows it
    started = time.monotonic()
    done = await asyncio.to_thread(
        subprocess.run, [str(Path(sys.executable).parent / "jetcron"), "--nats", services.server.url, "runs", "logs",
                         run["run_id"], "--follow"], capture_output=True, timeout=30,
        env={**os.environ, "PYTHONWARNINGS": "ignore"})

    # Then the command exits by itself once the run has succeeded, with no output
    assert done.returncode == 0, done.stderr
    assert done.stdout == b""
    assert time.monotonic() - started < 15
    assert (await client.call("runs.get", {"run_id": run["run_id"]}))["state"] == "succeeded"


async def test_a_timeout_terms_then_kills_the_group_and_ends_timed_out(
        services: Services, client: Client, tmp_path: Path) -> None:
    # Given a job that ignores SIGTERM (so does its child) and would sleep 30 s, with a 1 s timeout
    pids = tmp_path / "pids"
    await services.start_system(agents=1)
    await client.call("jobs.create", now_job(
        "stubborn", "sh", "-c", f"trap '' TERM; sleep 30 & echo $$ $! > {pids}; wait", timeout_seconds=1,
        **ONE_ATTEMPT))

    # When it runs past its timeout
    run = await the_run(client, "stubborn", when=state_is("dead", "failed", "succeeded"), timeout=20,
                        what="the run to end")

    # Then SIGTERM was ignored, the grace period passed, SIGKILL ended the whole group: outcome timed_out
    assert (run["outcome"], run["history"][0]["outcome"]) == ("timed_out", "timed_out")
    assert run["history"][0]["reason"] == "timed out after 1s"
    assert run["reason"].startswith("timed out after 1s")
    shell, sleeper = map(int, pids.read_text().split())
    await wait_for(lambda: not pid_alive(shell) and not pid_alive(sleeper), 5, what="the group to be gone")
    elapsed = (_t(run["history"][0]["finished_at"]) - _t(run["history"][0]["started_at"]))
    assert 1.5 < elapsed < 6, f"timeout 1 s + grace 1 s, took {elapsed:.1f}s"


def _t(stamp: str) -> float:
    from datetime import datetime
    return datetime.fromisoformat(stamp).timestamp()


async def _limits(client: Client) -> str:
    async def registered() -> list[dict[str, object]]:
        return list((await client.call("agents.list"))["items"])  # empty until the agent's first heartbeat

    agents = await wait_for(registered, 10, what="the agent registered")
    return str(agents[0]["limits"])


async def test_memory_exhaustion_kills_the_child_with_the_reason_and_the_agent_survives(
        services: Services, client: Client) -> None:
    # Given an agent that enforces limits with cgroups
    await services.start_system(agents=1)
    mechanism = await _limits(client)
    if mechanism == "rlimit":
        pytest.skip("no writable cgroup here: memory is capped by RLIMIT_AS, which cannot name the cause")

    # When a job with 64 MB touches 300 MB
    hog = "x = bytearray(300 * 2**20); x[::4096] = b'a' * (len(x) // 4096); print('survived')"
    await client.call("jobs.create", now_job("hog", sys.executable, "-c", hog, resources={"memory_mb": 64},
                                             **ONE_ATTEMPT))
    run = await the_run(client, "hog", when=state_is("dead", "failed", "succeeded"), what="the hog to end")

    # Then it was killed and the record says why, in words
    assert run["state"] == "dead"
    assert run["history"][0]["reason"] == "memory limit 64 MB exceeded"
    assert run["reason"].startswith("memory limit 64 MB exceeded")
    assert "survived" not in (await client.call("runs.logs", {"run_id": run["run_id"]}))["output"]

    # And the agent lives on and runs the next job
    assert services["agent-1"].alive
    await client.call("jobs.create", now_job("after-hog", "true"))
    assert (await the_run(client, "after-hog", when=state_is("succeeded", "dead")))["state"] == "succeeded"


async def test_process_exhaustion_kills_the_child_with_the_reason(services: Services, client: Client) -> None:
    # Given an agent that allows 16 processes per run
    services.env["JETCRON_AGENT_MAX_PIDS"] = "16"
    await services.start_system(agents=1)
    if await _limits(client) == "rlimit":
        pytest.skip("no writable pids cgroup here; RLIMIT_NPROC is per user and ignored for root")

    # When a job forks 40 sleepers
    await client.call("jobs.create", now_job(
        "forky", "sh", "-c", "for i in $(seq 40); do sleep 20 & done; wait", **ONE_ATTEMPT))
    run = await the_run(client, "forky", when=state_is("dead", "failed", "succeeded"), what="forky to end")

    # Then the run is ended with the limit named, long before its sleepers would have finished
    assert run["history"][0]["reason"] == "process limit 16 reached"
    assert _t(run["history"][0]["finished_at"]) - _t(run["history"][0]["started_at"]) < 10
    assert services["agent-1"].alive


async def test_sigterm_drains_and_hands_running_work_back(services: Services, client: Client,
                                                          tmp_path: Path) -> None:
    # Given a long run on agent-1 (draining agents wait 2 s for it) and a second agent
    calls = tmp_path / "calls"
    await services.start_system(agents=1)
    await client.call("jobs.create", now_job(
        "long", "sh", "-c", f'echo "$JETCRON_ATTEMPT $JETCRON_AGENT_ID" >> {calls}; '
        'if [ "$JETCRON_ATTEMPT" = 1 ]; then sleep 60; fi'))
    await the_run(client, "long", when=lambda r: r["state"] == "running" and calls.exists(), what="attempt 1")
    services.start("agent-2", "agent", JETCRON_AGENT_ID="agent-2")
    await services["agent-2"].wait_logged("agent ready", 30)

    # When agent-1 gets SIGTERM
    services["agent-1"].terminate()

    # Then it hands the run back after its grace period, and exits cleanly
    assert await asyncio.to_thread(services["agent-1"].finish, 20) == 0
    run = await the_run(client, "long", when=state_is("succeeded", "dead", "failed"), timeout=20,
                        what="the re-run to end")

    # And the run was re-dispatched to agent-2, spending nothing from its retry budget
    assert run["state"] == "succeeded"
    assert [(a["attempt"], a["agent"], a["outcome"]) for a in run["history"]] == [
        (1, "agent-1", "handed_back"), (2, "agent-2", "succeeded")]
    assert calls.read_text().splitlines() == ["1 agent-1", "2 agent-2"]


async def test_sigterm_hands_staged_work_back_at_once_and_it_still_starts_on_time(
        services: Services, client: Client, tmp_path: Path) -> None:
    # Given a run staged 20 s ahead and taken by agent-1, which waits for its due time, and a second agent;
    # agent-1 is slow to release a lease (2 s): the hand-back must still not reach agent-2 before the lease is free
    calls = tmp_path / "calls"
    await services.start_system(agents=1, JETCRON_TRIGGER_HORIZON="20", JETCRON_FAULT="agent.before_release=sleep2")
    due = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=22)
    await client.call("jobs.create", {"spec": {
        "name": "staged", "command": ["sh", "-c", f'echo "$JETCRON_ATTEMPT $JETCRON_AGENT_ID" >> {calls}'],
        "schedule": {"kind": "at", "at": due.isoformat()}}})
    await the_run(client, "staged", when=lambda r: r["state"] == "assigned", timeout=10, what="the staging")

    async def held_by_agent_1() -> bool:
        agents = (await client.call("agents.list"))["items"]
        return any(a["agent_id"] == "agent-1" and a["running"] == 1 for a in agents)
    await wait_for(held_by_agent_1, 5, what="agent-1 to hold the staged attempt")
    services.start("agent-2", "agent", JETCRON_AGENT_ID="agent-2")
    await services["agent-2"].wait_logged("agent ready", 30)

    # When agent-1 gets SIGTERM well before the due time
    services["agent-1"].terminate()

    # Then it gives the waiting attempt back and exits without waiting for the due time
    assert await asyncio.to_thread(services["agent-1"].finish, 10) == 0
    assert datetime.now(UTC) < due - timedelta(seconds=3), "agent-1 held its exit until the staged run was due"

    # And the run starts once, on agent-2, at its due time, not early
    run = await the_run(client, "staged", when=state_is("succeeded", "dead", "failed"), timeout=40,
                        what="the staged run to end")
    assert [(a["attempt"], a["agent"], a["outcome"]) for a in run["history"]] == [
        (1, "agent-1", "handed_back"), (2, "agent-2", "succeeded")]
    assert datetime.fromisoformat(run["started_at"]) >= due
    assert calls.read_text().splitlines() == ["2 agent-2"]


async def test_a_restarted_agent_kills_what_its_earlier_life_left(services: Services, client: Client,
                                                                  tmp_path: Path) -> None:
    # Given a run whose grandchild sleeps on agent-1
    pids = tmp_path / "pids"
    await services.start_system(agents=1)
    await client.call("jobs.create", now_job("leftover", "sh", "-c", f"sleep 60 & echo $! > {pids}; wait",
                                             **ONE_ATTEMPT))
    await the_run(client, "leftover", when=lambda r: r["state"] == "running" and pids.exists()
                  and pids.read_text().strip(), what="the job to run")
    sleeper = int(pids.read_text())
    agent = services["agent-1"]

    # When the agent and its reaper are both killed with SIGKILL (nothing is left to clean up)
    agent.note_descendants()
    reaper = next(p for p in agent.seen if b"agent.host.reaper" in Path(f"/proc/{p}/cmdline").read_bytes())
    os.kill(reaper, 9)
    agent.kill9()
    await asyncio.sleep(0.5)
    assert pid_alive(sleeper), "with its reaper dead too, the grandchild outlives the agent"

    # Then the agent started again with the same id kills the stray at once
    del services.procs["agent-1"]
    again = services.start("agent-1", "agent", JETCRON_AGENT_ID="agent-1")  # (its log file is appended to)
    await wait_for(lambda: again.output().count("agent ready") == 2, 30, what="agent-1 to be ready again")
    assert not pid_alive(sleeper)
    assert "killed strays from an earlier life" in services["agent-1"].output()


async def test_a_quick_run_reports_once(services: Services, client: Client) -> None:
    # Given one agent, publishing its reports to the events stream to be counted there
    await services.start_system(agents=1, JETCRON_REPORT_BY="stream")

    # When a job ends well within the start-report delay
    await client.call("jobs.create", now_job("blink", "true"))
    run = await the_run(client, "blink", when=state_is("succeeded"), what="blink to succeed")

    # Then its record has the start and the finish from one report, and no separate start event was sent
    assert run["started_at"] and run["finished_at"] and run["history"][0]["started_at"]
    import nats

    from jetcron.wire import subjects as s
    nc = await nats.connect(services.server.url)
    try:
        info = await nc.jetstream().stream_info(s.STREAM_EVENTS, subjects_filter=s.EVENTS_ALL)
        subjects: dict[str, Any] = info.state.subjects or {}
    finally:
        await nc.close()
    assert sum(n for subject, n in subjects.items() if s.parse_event_subject(subject)[0] == "finished") == 1
    assert not [subject for subject in subjects if s.parse_event_subject(subject)[0] == "started"]
    assert len(await runs_of(client, "blink")) == 1


async def test_an_agent_killed_with_sigkill_leaves_no_process_and_no_cgroup(services: Services, client: Client,
                                                                            tmp_path: Path) -> None:
    # Given a run sleeping on an agent that enforces limits with cgroups
    pids = tmp_path / "pids"
    await services.start_system(agents=1)
    if await _limits(client) == "rlimit":
        pytest.skip("no writable cgroup here")
    await client.call("jobs.create", now_job("doomed", "sh", "-c", f"sleep 60 & echo $$ $! > {pids}; wait"))
    await the_run(client, "doomed", when=lambda r: r["state"] == "running" and pids.exists()
                  and len(pids.read_text().split()) == 2, what="the job to run")
    shell, sleeper = map(int, pids.read_text().split())
    groups = [Path("/sys/fs/cgroup") / line.split(":", 2)[1] / line.split(":", 2)[2].lstrip("/")
              for line in Path(f"/proc/{sleeper}/cgroup").read_text().splitlines()
              if line.split(":", 2)[1] in ("memory", "pids")]
    # (a group of the run's own inside the agent's; a spare's groups are named for the spare: spares.py)
    assert groups and all(g.parent.name.startswith("jetcron-agent-") and g.is_dir() for g in groups), groups

    # When the agent is killed with SIGKILL
    services["agent-1"].kill9()

    # Then its reaper kills the job's whole group and removes the run's cgroups and the agent's own
    await wait_for(lambda: not pid_alive(shell) and not pid_alive(sleeper), 10, what="the job to die")
    await wait_for(lambda: not any(g.exists() or g.parent.exists() for g in groups), 10,
                   what="the cgroups to be removed")


async def test_an_assignment_delivered_again_after_its_attempt_ended_does_not_run_it_again(
        services: Services, client: Client, tmp_path: Path) -> None:
    # Given one agent, and a copy of every assignment sent to it
    import nats

    from jetcron.wire import subjects as s
    await services.start_system(agents=1)
    nc = await nats.connect(services.server.url)
    try:
        sent: list[bytes] = []

        async def copy(msg: Any) -> None:
            sent.append(msg.data)
        await nc.subscribe(s.assign_subject("agent-1"), cb=copy)
        await nc.subscribe(s.handoff_subject("agent-1"), cb=copy)  # handed over directly (assign_by direct)
        ran = tmp_path / "ran.log"
        await client.call("jobs.create", now_job("once", "sh", "-c", f'echo "$JETCRON_ATTEMPT" >> {ran}'))
        run = await the_run(client, "once", when=state_is("succeeded"), what="once to succeed")
        assert len(sent) == 1

        # When that assignment comes again after the attempt ended (as it does when the agent's ack was lost
        # with a NATS node: the consumer redelivers it after its ack wait)
        await nc.jetstream().publish(s.assign_subject("agent-1"), sent[0], headers={"Nats-Msg-Id": "again"})
        await wait_for(lambda: "this attempt already ran here" in services["agent-1"].output(), 20,
                       what="the agent to skip the assignment")
    finally:
        await nc.close()

    # Then the job ran once, and its run still has its one attempt
    assert ran.read_text().split() == ["1"]
    again = await the_run(client, "once")
    assert again["state"] == "succeeded" and len(again["history"]) == len(run["history"]) == 1
