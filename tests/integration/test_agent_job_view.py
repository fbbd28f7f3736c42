"""A job's view of the host through both launch paths (services/jetcron_services/agent/host/scratch.py, launch.py,
spares.py), each set up by jetcron-launch and by its twin in Python: real processes, real mount namespaces and
cgroups, no NATS needed.

A spawned child and one that took a spare must see the same: its scratch as its working directory and its /tmp,
owned by its user, mode 0700, nothing of the host's /tmp, the file size bound.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from harness import wait_for

from jetcron.config import Settings
from jetcron_services.agent.host import launch
from jetcron_services.agent.host.confine import JobUser
from jetcron_services.agent.host.executor import Execution, Outcome
from jetcron_services.agent.host.limits import RLIMIT, LimitRoot, RunLimits, detect
from jetcron_services.agent.host.scratch import Room, Scratches
from jetcron_services.agent.host.spares import Spare, SparePool
from jetcron_services.agent.host.strays import StrayGuard

pytestmark = pytest.mark.needs("root", reason="a job's own user and a private /tmp take a root agent (these tests "
                                               "run as root, like an agent container does)")
NOBODY = JobUser(name="nobody", uid=65534, gid=65534, home="/nonexistent")
# What the job sees of its scratch: where it is, what it is told, its owner and mode, what its /tmp holds
MINE = f"mine-{uuid.uuid4().hex[:8]}"
LOOK = (f'pwd; echo "$JETCRON_SCRATCH $TMPDIR"; stat -c "%a %u" .; id -u; touch {MINE}; ls -A /tmp; '
        'sed -n "s/^Max file size *\\([0-9a-z]*\\).*/\\1/p" /proc/self/limits')


@pytest.fixture(params=["jetcron-launch", "twin"])
def launcher(request: pytest.FixtureRequest) -> str | None:
    """How the child is set up: jetcron-launch (make builds it), or its twin in Python."""
    if request.param == "twin":
        return None
    path = launch.launcher_path()
    assert path is not None, "jetcron-launch is not built or does not run here (make builds it)"
    return path


@pytest.fixture
def scratches(tmp_path: Path, launcher: str | None) -> Scratches:
    made, notes = Scratches.setup(Settings(data_dir=str(tmp_path / "data"), agent_slots=1, agent_max_file_mb=1,
                                           agent_job_uids=""),
                                  "agent-v", NOBODY, launcher)
    if not made.private_tmp:
        pytest.skip(f"no private /tmp on this host: {notes}")
    return made


@pytest.fixture
async def pool(tmp_path: Path, scratches: Scratches, launcher: str | None) -> AsyncIterator[SparePool]:
    root = detect(f"view-{uuid.uuid4().hex[:8]}")
    if not SparePool.usable(root, launcher):
        pytest.skip(f"spares need cgroups (limits here: {root.mechanism})")
    strays = StrayGuard(tmp_path / "agent.pgids", "agent-v")
    made = SparePool(root, max_pids=64, strays=strays, agent_id="agent-v", scratches=scratches, launcher=launcher)
    try:
        yield made
    finally:
        await made.close()
        await strays.close()
        root.close()


async def run(scratches: Scratches, root: LimitRoot, argv: list[str], spare: Spare | None = None,
              launcher: str | None = None) -> tuple[Outcome, str, Room, int]:
    """As an attempt starts its child (child.py): the room (a spare's scratch if it took one), its env, its user."""
    room = await scratches.open_soon(run_as_root=False, path=spare.hand_over() if spare is not None else None)
    env = {"PATH": "/usr/bin:/bin", **room.view.env(str(room.path), {})}
    out: list[bytes] = []

    async def keep(_stream: str, data: bytes) -> None:
        out.append(data)

    execution = Execution(argv, env, limits=RunLimits(root, f"run-{uuid.uuid4().hex[:6]}", memory_mb=64, max_pids=64),
                          timeout=20, kill_grace=1, on_output=keep, spare=spare, user=room.view.user,
                          view=room.view, scratch=str(room.path), launcher=launcher)
    assert await execution.start() is None
    return await execution.wait(), b"".join(out).decode(), room, execution.pid


async def test_a_spawned_child_and_one_in_a_spare_see_only_their_own_scratch_as_their_tmp(
        pool: SparePool, scratches: Scratches, launcher: str | None) -> None:
    # Given a spare made with its scratch bound over /tmp in a namespace of its own
    pool.refill()
    spare = await wait_for(lambda: pool.ready, 10, what="a spare")
    assert spare.scratch is not None and spare.scratch.parent == scratches.dir
    spare_scratch, taken = spare.scratch, pool.take()

    # When a job looks around, once in the spare and once spawned
    seen = [await run(scratches, pool.root, ["/bin/sh", "-c", LOOK], taken, launcher),
            await run(scratches, pool.root, ["/bin/sh", "-c", LOOK], launcher=launcher)]

    # Then each started in /tmp, its scratch, told so, owned by its user with mode 0700, holding only its own file,
    # with files bounded at 1 MiB
    for outcome, output, room, _ in seen:
        assert outcome == Outcome("succeeded", 0), output
        assert output.splitlines() == ["/tmp", "/tmp /tmp", "700 65534", "65534", MINE, "1048576"]
        # And on the host that scratch is the room's folder, the host's /tmp untouched
        assert (room.path / MINE).exists() and (room.path.stat().st_mode & 0o777) == 0o700
        assert not (Path("/tmp") / MINE).exists()
    # (the first ran in the spare itself, in the scratch made with it)
    assert (seen[0][3], seen[0][2].path) == (spare.proc.pid, spare_scratch) and seen[1][3] != spare.proc.pid
    # And once closed, each scratch is gone
    for _, _, room, _ in seen:
        assert scratches.close(room) and not room.path.exists()


async def test_without_cgroups_the_rlimit_path_gives_the_same_view_and_bounds_a_file(
        scratches: Scratches, launcher: str | None) -> None:
    # Given an agent with rlimits only (no cgroup delegated)
    root = LimitRoot(RLIMIT)

    # When a job looks around, then writes 2 MiB into one file
    outcome, output, room, _ = await run(scratches, root, ["/bin/sh", "-c", LOOK], launcher=launcher)
    big, said, big_room, _ = await run(scratches, root, ["/bin/sh", "-c", "head -c 2097152 /dev/zero > big"],
                                       launcher=launcher)

    # Then it saw what a job in a cgroup sees, and the write past 1 MiB was refused (SIGXFSZ ends the writer)
    assert outcome == Outcome("succeeded", 0), output
    assert output.splitlines() == ["/tmp", "/tmp /tmp", "700 65534", "65534", MINE, "1048576"]
    assert big.outcome == "failed", said
    assert (big_room.path / "big").stat().st_size == 1024 * 1024
    assert scratches.close(room) and scratches.close(big_room)
