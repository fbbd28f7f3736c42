"""A restarted agent kills process groups an earlier life left behind, and only its own."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from harness import clean_env, pid_alive, start_time, wait_until

from jetcron_services.agent.host import strays
from jetcron_services.agent.host.strays import StrayGuard, replay


def orphaned_group(tmp_path: Path, agent_id: str) -> tuple[int, int]:
    """A job whose leader (the shell) has exited while its grandchild sleeps on in the group: what an agent
    killed with its reaper leaves (PR_SET_PDEATHSIG took the shell, not the grandchild)."""
    pid_file = tmp_path / f"grandchild-{agent_id}"
    leader = subprocess.Popen(
        ["sh", "-c", f"sleep 60 & echo $! > {pid_file}"], start_new_session=True,
        env=clean_env(JETCRON_AGENT_ID=agent_id))
    leader.wait(timeout=5)
    grandchild = int(wait_until(lambda: pid_file.exists() and pid_file.read_text().strip(), 5, what="pid file"))
    return leader.pid, grandchild


def test_a_restart_kills_the_groups_of_its_earlier_life_even_without_their_leader(tmp_path: Path) -> None:
    # Given a pgid file listing a group whose leader is gone but whose grandchild still runs
    pgid, grandchild = orphaned_group(tmp_path, "agent-x")
    started = start_time(grandchild)
    assert os.getpgid(grandchild) == pgid and pid_alive(grandchild)
    (tmp_path / "agent-x.pgids").write_text(f"{pgid}\n")

    # When the agent starts again
    killed = StrayGuard(tmp_path / "agent-x.pgids", "agent-x").kill_leftovers()

    # Then the stray group is killed and the file is emptied
    assert killed == [pgid]
    wait_until(lambda: not pid_alive(grandchild, started), 5, what="the stray to die")
    assert (tmp_path / "agent-x.pgids").read_text() == ""


def test_a_group_that_is_not_ours_is_left_alone(tmp_path: Path) -> None:
    # Given a listed group whose processes belong to another agent (a reused pid or a neighbour)
    pgid, grandchild = orphaned_group(tmp_path, "someone-else")
    (tmp_path / "agent-x.pgids").write_text(f"{pgid}\n")
    try:
        # When agent-x starts again
        killed = StrayGuard(tmp_path / "agent-x.pgids", "agent-x").kill_leftovers()

        # Then it kills nothing
        assert killed == []
        time.sleep(0.1)
        assert pid_alive(grandchild)
    finally:
        os.killpg(pgid, 9)


def test_the_file_is_a_journal_of_adds_and_removes_that_replays_to_the_running_groups(tmp_path: Path) -> None:
    # Given a guard that saw five groups start and three of them end
    guard = StrayGuard(tmp_path / "agent-x.pgids", "agent-x")
    guard.kill_leftovers()
    for pgid in (101, 102, 103, 104, 105):
        guard.add(pgid)
    for pgid in (102, 104, 101):
        guard.remove(pgid)

    # Then each change was appended as one line, not the whole set rewritten
    text = (tmp_path / "agent-x.pgids").read_text()
    assert text.split() == ["101", "102", "103", "104", "105", "-102", "-104", "-101"]
    # And a restart reads it back as exactly the groups still running (a torn last line is skipped)
    assert replay(text + "10") == {103, 105, 10}
    assert replay(text + "-1x") == {103, 105}


def test_a_long_journal_is_rewritten_as_the_live_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(strays, "COMPACT_AFTER", 10)
    guard = StrayGuard(tmp_path / "agent-x.pgids", "agent-x")
    guard.kill_leftovers()
    guard.add(7)
    # When many runs start and end beside a long-running group
    for pgid in range(1000, 1040):
        guard.add(pgid)
        guard.remove(pgid)

    # Then the file never grows past the bound, and still lists exactly the live group
    lines = (tmp_path / "agent-x.pgids").read_text().split()
    assert len(lines) <= 10 + 4 * 1 + 1
    assert replay(" ".join(lines)) == {7} == guard.groups
