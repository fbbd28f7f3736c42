"""The agent's spare child (services/jetcron_services/agent/host/spares.py), made by jetcron-launch and by its twin in
Python: real processes in real cgroups, no NATS needed.

A run handed to a spare must look exactly like a spawned one to its program: its environment and nothing
else, its argv untouched, stdin empty, its own process group, its groups with the run's memory limit, its exit
code; and a spare that cannot take the run must leave nothing behind.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from harness import pid_alive, wait_for

from jetcron_services.agent.host import launch
from jetcron_services.agent.host.executor import Execution, Outcome
from jetcron_services.agent.host.limits import RunLimits, detect
from jetcron_services.agent.host.spares import Spare, SparePool
from jetcron_services.agent.host.strays import StrayGuard

SHOW = ("import json, os, sys; print(json.dumps({'env': dict(os.environ), 'argv': sys.argv[1:], "
        "'stdin': sys.stdin.read(), 'pid': os.getpid(), 'pgid': os.getpgid(0), "
        "'cgroups': open('/proc/self/cgroup').read().splitlines()}))")
# Its own memory limit as the kernel holds it (v1, else v2), read by small tools: a 1 MB group fits no Python
LIMIT = ("v1=/sys/fs/cgroup/memory$(sed -n 's/^[0-9]*:memory://p' /proc/self/cgroup)/memory.limit_in_bytes; "
         "cat $v1 2>/dev/null || cat /sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup)/memory.max")


@pytest.fixture(params=["jetcron-launch", "twin"])
def launcher(request: pytest.FixtureRequest) -> str | None:
    """What makes the spares and spawns the runs: jetcron-launch (make builds it), or its twin in Python."""
    if request.param == "twin":
        return None
    path = launch.launcher_path()
    assert path is not None, "jetcron-launch is not built or does not run here (make builds it)"
    return path


@pytest.fixture
async def pool(tmp_path: Path, launcher: str | None) -> AsyncIterator[SparePool]:
    root = detect(f"spares-{uuid.uuid4().hex[:8]}")
    if not SparePool.usable(root, launcher):
        pytest.skip(f"spares need cgroups (limits here: {root.mechanism})")
    strays = StrayGuard(tmp_path / "agent.pgids", "agent-s")
    made = SparePool(root, max_pids=64, strays=strays, agent_id="agent-s", launcher=launcher)
    made.refill()
    try:
        yield made
    finally:
        await made.close()
        root.close()


async def ready(pool: SparePool) -> Spare:
    """The pool's spare once it has joined its groups (before that it would still work, only not sooner)."""
    pool.refill()

    def joined() -> bool:
        spare = pool.ready
        return spare is not None and all(
            str(spare.proc.pid) in (g / "cgroup.procs").read_text().split() for g in spare.limits.groups)
    await wait_for(joined, 10, what="a spare in its groups")
    spare = pool.take()
    assert spare is not None
    return spare


async def execute(argv: list[str], env: dict[str, str], spare: Spare | None, pool: SparePool,
                  memory_mb: int = 64, user: tuple[int, int] | None = None) -> tuple[Outcome, str, Execution]:
    out: list[bytes] = []

    async def keep(_stream: str, data: bytes) -> None:
        out.append(data)

    limits = RunLimits(pool.root, f"run-{uuid.uuid4().hex[:6]}", memory_mb=memory_mb, max_pids=64)
    # spawned (no spare, or one that could not take the run) through the launcher that makes the pool's spares
    execution = Execution(argv, env, limits=limits, timeout=20, kill_grace=1, on_output=keep, spare=spare,
                          user=user, launcher=pool.launcher)
    assert await execution.start() is None
    outcome = await execution.wait()
    return outcome, b"".join(out).decode(), execution


async def test_a_spare_runs_the_program_with_exactly_its_env_and_argv_in_its_own_limited_groups(
        pool: SparePool) -> None:
    # Given a spare waiting in its groups
    spare = await ready(pool)
    pid, groups = spare.proc.pid, list(spare.limits.groups)

    # When a run is given to it: an env with spaces, '=' and an empty value, an argv of shell metacharacters
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "GREETING": "hello world", "EQ": "a=b=c", "EMPTY": ""}
    argv = [sys.executable, "-c", SHOW, "$(touch x) *", "two words", ""]
    outcome, output, execution = await execute(argv, env, spare, pool, memory_mb=48)

    # Then the program ran in the spare's process: same pid, leading its own group, inside the spare's groups
    seen = json.loads(output)
    assert outcome == Outcome("succeeded", 0)
    assert seen["pid"] == pid == execution.pid and seen["pgid"] == pid
    assert all(any(line.endswith("/" + g.name) for line in seen["cgroups"]) for g in groups), seen["cgroups"]
    # With exactly the run's environment (nothing of the agent's, nothing a shell adds) and its argv untouched
    assert seen["env"] == env
    assert seen["argv"] == ["$(touch x) *", "two words", ""]
    # And nothing on stdin (the run's items were read from it before the program started)
    assert seen["stdin"] == ""
    # And the memory limit was the run's, and its groups are removed once it ended
    assert execution.limits is spare.limits and spare.limits.memory_mb == 48
    assert not any(g.exists() for g in groups)
    # And no spare was made while it ran (its join would have stalled the run's child): the agent asks for the
    # next one once the child has ended
    assert pool.ready is None
    assert (await ready(pool)).proc.pid != pid


IDS = "grep -E '^(Uid|Gid|Groups|NoNewPrivs|CapPrm|CapEff|CapAmb):' /proc/self/status"


async def test_a_spare_switches_to_the_jobs_user_as_the_spawned_path_does(pool: SparePool) -> None:
    assert os.getuid() == 0, "these tests run as root, like an agent container does"
    nobody = (65534, 65534)
    env = {"PATH": "/usr/bin:/bin"}
    # When the same program runs as the job's user, once in a spare and once spawned
    outcome, in_spare, execution = await execute(["/bin/sh", "-c", IDS], env, await ready(pool), pool,
                                                 user=nobody)
    spawned_outcome, spawned, _ = await execute(["/bin/sh", "-c", IDS], env, None, pool, user=nobody)

    # Then both ran as that user: real, effective, saved and filesystem ids, with no capability left
    assert (outcome, spawned_outcome) == (Outcome("succeeded", 0), Outcome("succeeded", 0))
    assert execution.pid != 0 and "Uid:\t65534\t65534\t65534\t65534" in in_spare
    ids = dict(line.split(":", 1) for line in in_spare.splitlines())
    assert {k: v.split() for k, v in ids.items() if k != "Groups"} == {
        k: v.split() for k, v in (line.split(":", 1) for line in spawned.splitlines()) if k != "Groups"}
    assert ids["CapPrm"].strip() == ids["CapEff"].strip() == ids["CapAmb"].strip() == "0000000000000000"
    # And no supplementary group at all, as on the spawned path
    assert ids["Groups"].split() == []


async def test_a_spare_that_cannot_switch_user_starts_nothing(pool: SparePool) -> None:
    # When the run's user cannot be switched to (a uid beyond what the kernel allows)
    outcome, output, _ = await execute(["/bin/sh", "-c", "echo ran"], {"PATH": "/usr/bin:/bin"}, await ready(pool),
                                       pool, user=(2**32 - 1, 2**32 - 1))

    # Then the program never ran, and the spare said why
    assert outcome.outcome == "failed" and outcome.exit_code == 125
    assert "ran" not in output and "could not switch to uid 4294967295" in output


async def test_a_spare_takes_the_runs_memory_limit_however_small(pool: SparePool) -> None:
    # Given spares, when runs allowed 1 MB and 300 MB are given to them
    for memory_mb in (1, 300):
        spare = await ready(pool)
        outcome, output, execution = await execute(["/bin/sh", "-c", LIMIT], {"PATH": "/usr/bin:/bin"}, spare, pool,
                                                   memory_mb=memory_mb)
        # Then each program ran in its spare under its own limit (the waiting launcher is charged 256 KB of the
        # group, the kernel's batch: 1 MB fits)
        assert outcome == Outcome("succeeded", 0), output
        assert execution.pid == spare.proc.pid and int(output) == memory_mb * 1024 * 1024


async def test_a_spare_passes_the_exit_code_and_names_a_program_it_cannot_start(pool: SparePool) -> None:
    # Given a spare, when its program exits 3
    outcome, output, _ = await execute(["/bin/sh", "-c", "echo on stderr >&2; exit 3"], {}, await ready(pool),
                                       pool)
    # Then the run failed with that code, its output kept
    assert outcome == Outcome("failed", 3, "exit code 3") and output == "on stderr\n"

    # When the next one is given a program that is not there (gone after the agent resolved it)
    spare = await ready(pool)
    assert await spare.launch(["/nonexistent/prog", "x"], {}, 64) is True
    assert spare.proc.stderr is not None
    said = await spare.proc.stderr.read()
    # Then it exits 127, as a shell would, naming the program and why
    assert await spare.proc.wait() == 127
    assert said == b"jetcron: could not start /nonexistent/prog: No such file or directory\n"
    await spare.discard()


async def test_a_spare_taken_for_a_program_that_is_not_there_is_ended_with_its_groups(pool: SparePool) -> None:
    # Given a spare taken for a run whose program cannot be found
    spare = await ready(pool)
    execution = Execution(["no-such-program-anywhere"], {"PATH": "/usr/bin:/bin"}, spare=spare, timeout=20,
                          limits=RunLimits(pool.root, "r", memory_mb=64, max_pids=64), kill_grace=1,
                          on_output=_ignore)
    # When it starts, then it fails to start, naming the program
    assert await execution.start() == Outcome(
        "start_failed", None, "could not start 'no-such-program-anywhere': not found or not executable")
    # And the spare did not stay waiting: its process ended and its groups are gone
    assert not spare.alive and not pid_alive(spare.proc.pid)
    assert not any(g.exists() for g in spare.limits.groups)
    assert spare.proc.pid not in pool.strays.groups


async def _ignore(_stream: str, _data: bytes) -> None:
    pass


async def test_a_dead_spare_is_not_handed_out_and_leaves_nothing(pool: SparePool) -> None:
    # Given a spare that died while it waited (killed from outside)
    pool.refill()
    await wait_for(lambda: pool.ready is not None, 10, what="a spare")
    dead = pool.ready
    assert dead is not None
    os.killpg(dead.proc.pid, signal.SIGKILL)
    await dead.proc.wait()

    # When a run asks for one
    taken = pool.take()

    # Then none is given (the run is spawned as before), its groups are removed, and the next one is a new spare
    assert taken is None
    await wait_for(lambda: not any(g.exists() for g in dead.limits.groups), 10, what="the dead spare's groups")
    assert dead.proc.pid not in pool.strays.groups
    fresh = await ready(pool)
    assert fresh.alive and fresh.proc.pid != dead.proc.pid
    await fresh.discard()


async def test_a_spare_that_died_after_it_was_taken_leaves_the_run_to_be_spawned(pool: SparePool) -> None:
    # Given the spare an execution was given died after it was taken
    spare = await ready(pool)
    os.killpg(spare.proc.pid, signal.SIGKILL)
    await spare.proc.wait()
    outcome, output, execution = await execute(
        [sys.executable, "-c", "import os; print(os.getpid())"], {}, spare, pool)
    # Then the program was spawned into groups of its own instead, and the dead spare's groups are gone
    assert outcome == Outcome("succeeded", 0)
    assert int(output) == execution.pid != spare.proc.pid
    assert execution.limits is not None and execution.limits.name.startswith("run-")
    assert not any(g.exists() for g in spare.limits.groups)


async def test_closing_the_pool_ends_its_spare_and_removes_its_groups(pool: SparePool) -> None:
    spare = await ready(pool)
    await spare.discard()
    pool.refill()
    await wait_for(lambda: pool.ready is not None, 10, what="the next spare")
    waiting = pool.ready
    assert waiting is not None

    await pool.close()

    assert not pid_alive(waiting.proc.pid)
    assert not any(g.exists() for g in waiting.limits.groups)
    pool.refill()
    assert pool.take() is None and pool.ready is None  # closed: none is made any more

