"""Each attempt's scratch and uid on disk (services/jetcron_services/agent/host/scratch.py), without a server: where it
is made, its owner and mode, that it goes when the attempt ends or at the next start, and that no two attempts hold one
uid."""

from __future__ import annotations

import asyncio
import os
import stat
import threading
from pathlib import Path

import pytest

from jetcron.config import Settings
from jetcron.core.errors import Misconfigured
from jetcron.core.host.uid_pool import UidPool
from jetcron_services.agent.host.confine import JobUser
from jetcron_services.agent.host.scratch import NoRoom, Scratches, remove_tree

NOBODY = JobUser(name="nobody", uid=65534, gid=65534, home="/nonexistent")
AS_AGENT = JobUser(name="agent", uid=None, gid=None, home="/")
root_only = pytest.mark.needs("root", reason="giving a scratch to another user takes root")


def scratches(tmp_path: Path, user: JobUser = NOBODY, **kw: object) -> Scratches:
    made = Scratches(tmp_path / "scratch", agent_id="agent-1", job_user=user, private_tmp=False, max_file_mb=1,
                     **kw)  # type: ignore[arg-type]
    made.dir.mkdir(parents=True)
    return made


def with_uids(tmp_path: Path, count: int) -> Scratches:
    """An agent giving each attempt a uid of its own, `count` of them from 60600, its locks in a folder of its own."""
    locks = tmp_path / "job-uids"
    locks.mkdir()
    return scratches(tmp_path, uids=UidPool(range(60600, 60600 + count)), lock_dir=locks)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@root_only
async def test_a_scratch_is_the_job_users_alone_and_goes_with_its_attempt(tmp_path: Path) -> None:
    made = scratches(tmp_path)
    room = await made.open_soon(run_as_root=False)
    assert room.path.parent == made.dir and mode(room.path) == 0o700
    assert (room.path.stat().st_uid, room.path.stat().st_gid) == (65534, 65534)
    assert room.view.user == (65534, 65534) and room.view.env(str(room.path), {})["JETCRON_SCRATCH"] == str(room.path)
    (room.path / "deep" / "er").mkdir(parents=True)
    (room.path / "deep" / "er" / "f").write_text("x")
    (room.path / "out").symlink_to(tmp_path)  # a link out of it: removed, never followed
    assert made.close(room) is True
    assert not room.path.exists() and tmp_path.exists() and list(made.dir.iterdir()) == []


async def test_a_job_allowed_root_or_an_agent_that_does_not_switch_keeps_the_agents_user(tmp_path: Path) -> None:
    for made, as_root in ((scratches(tmp_path / "a"), True), (scratches(tmp_path / "b", AS_AGENT), False)):
        room = await made.open_soon(run_as_root=as_root)
        assert room.view.user is None and room.path.stat().st_uid == os.geteuid() and mode(room.path) == 0o700
        made.close(room)


@root_only
async def test_agents_sharing_a_lock_folder_never_give_out_the_same_uid(tmp_path: Path) -> None:
    # Given two agents with the same range and lock folder (every agent of a host shares one, whatever its data dir)
    locks = tmp_path / "job-uids"
    locks.mkdir()
    one = scratches(tmp_path / "1", uids=UidPool(range(60600, 60603)), lock_dir=locks)
    two = scratches(tmp_path / "2", uids=UidPool(range(60600, 60603)), lock_dir=locks)

    # When they open rooms until the range is used up
    rooms = [await one.open_soon(False), await two.open_soon(False), await one.open_soon(False)]

    # Then each room has a uid of its own, owns its scratch under it, with HOME there too
    uids = [r.view.user[0] for r in rooms if r.view.user]
    assert sorted(uids) == [60600, 60601, 60602]
    assert [r.path.stat().st_uid for r in rooms] == uids
    assert rooms[0].view.env("/s", {})["HOME"] == "/s"
    # And the next is refused with the setting named, keeping nothing
    with pytest.raises(NoRoom, match="no free uid in JETCRON_AGENT_JOB_UIDS"):
        await two.open_soon(False)
    assert len(list(two.dir.iterdir())) == 1
    # And a closed room's uid is free again, for the other agent too
    one.close(rooms[0])
    assert (await two.open_soon(False)).view.user == (uids[0], uids[0])


@root_only
async def test_a_room_is_made_off_the_event_loop_and_one_refused_keeps_neither_folder_nor_uid(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given an agent giving each attempt a uid of its own, whose folders are made on some thread
    made = with_uids(tmp_path, 2)
    threads: list[int] = []
    make = made.make
    monkeypatch.setattr(made, "make", lambda: threads.append(threading.get_ident()) or make())

    # When a room is opened from the event loop
    room = await made.open_soon(run_as_root=False)

    # Then its folder was made on another thread than the loop's, and is the uid's alone
    assert threads and threading.get_ident() not in threads
    assert room.view.user is not None and room.path.stat().st_uid == room.view.user[0] and mode(room.path) == 0o700

    # And when the folder cannot be handed to the next room's uid, that room is refused, named, and keeps nothing
    def refuse(path: object, uid: int, gid: int) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "chown", refuse)
    with pytest.raises(NoRoom, match="could not make the attempt's scratch directory: Operation not permitted"):
        await made.open_soon(run_as_root=False)
    assert list(made.dir.iterdir()) == [room.path]
    assert made.uids is not None and made.uids.in_use == {room.view.user[0]}


@root_only
async def test_a_room_cancelled_while_its_folder_is_made_leaves_neither_folder_nor_uid(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a folder whose making is held up (the filesystem's journal busy)
    made = with_uids(tmp_path, 1)
    started, go, done = threading.Event(), threading.Event(), threading.Event()
    make = made.make

    def slow_make() -> Path:
        started.set()
        go.wait(10)
        try:
            return make()
        finally:
            done.set()

    monkeypatch.setattr(made, "make", slow_make)
    opening = asyncio.create_task(made.open_soon(run_as_root=False))
    assert await asyncio.to_thread(started.wait, 10)

    # When the attempt is cancelled meanwhile, and the folder is made after all
    opening.cancel()
    with pytest.raises(asyncio.CancelledError):
        await opening
    go.set()
    assert await asyncio.to_thread(done.wait, 10)
    for _ in range(100):  # the undo runs on the loop once the thread is done
        if not list(made.dir.iterdir()):
            break
        await asyncio.sleep(0.01)

    # Then the folder is gone and the uid is free for the next room
    assert list(made.dir.iterdir()) == []
    monkeypatch.setattr(made, "make", make)
    assert (await made.open_soon(run_as_root=False)).view.user == (60600, 60600)


def test_an_agents_start_removes_the_scratches_an_earlier_life_left(tmp_path: Path) -> None:
    made = scratches(tmp_path, AS_AGENT)
    left = [made.make(), made.make()]
    (left[0] / "inner").mkdir()
    removed, killed = made.clear_leftovers()
    assert sorted(removed) == sorted(p.name for p in left) and killed == []
    assert list(made.dir.iterdir()) == []


@root_only
def test_setup_makes_the_folders_the_agents_and_closes_the_data_dir(tmp_path: Path) -> None:
    # Given a data dir anyone could list
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    os.chmod(data, 0o755)
    settings = Settings(data_dir=str(data), agent_slots=2, agent_job_uids="60600-60609",
                        agent_job_uid_locks=str(tmp_path / "locks" / "job-uids"))

    made, notes = Scratches.setup(settings, "agent-1", NOBODY)

    # Then the scratch root and the agent's folder are the agent's, searchable, not listable
    assert made.dir == data / "scratch" / "agent-1"
    assert mode(data / "scratch") == mode(made.dir) == 0o711
    # And the data dir is closed to others (searchable only if jobs must pass through it: no private /tmp)
    assert mode(data) == (0o700 if made.private_tmp else 0o711), notes
    assert made.uids is not None and len(made.uids) == 10 and made.lock_dir == tmp_path / "locks" / "job-uids"
    assert mode(made.lock_dir) == 0o700 and not (data / "job-uids").exists()


def test_a_uid_range_smaller_than_the_slots_refuses_the_start(tmp_path: Path) -> None:
    settings = Settings(data_dir=str(tmp_path), agent_slots=4, agent_job_uids="60600-60602")
    with pytest.raises(Misconfigured, match=r"JETCRON_AGENT_JOB_UIDS=60600-60602: 3 uids .* fewer than .* 4 slots"):
        Scratches.setup(settings, "agent-1", NOBODY)


def test_remove_tree_removes_what_a_job_made_unwritable(tmp_path: Path) -> None:
    top = tmp_path / "s"
    (top / "locked").mkdir(parents=True)
    (top / "locked" / "f").write_text("x")
    os.chmod(top / "locked", 0o500)
    assert remove_tree(top) and not top.exists()
