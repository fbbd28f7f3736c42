"""No orphans: a reaper kills our process groups if we die; a restart kills groups left from an earlier life.

The groups are kept in a file as a journal: a line `<pgid>` when a group is added, `-<pgid>` when it is removed,
appended with one write each, rather than the whole set rewritten at every start and end of a run (a write
and a rename each listing every running group, which a busy agent cannot afford); the journal is rewritten as
the live set only when it has grown well past it.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from io import FileIO
from pathlib import Path

from jetcron_services.agent.host.process_group import kill_group

COMPACT_AFTER = 1024
"""Lines the journal may hold beyond four per live group before it is rewritten as the live set."""


def replay(text: str) -> set[int]:
    """The groups a journal leaves listed: added and not removed since. A line that is not a number is skipped.
    Each line is one small append, so only a host crash could tear one; a torn number may list a group that is
    not ours, which kill_leftovers then leaves alone (it kills only groups whose processes carry our agent id)."""
    groups: set[int] = set()
    for line in text.split():
        with contextlib.suppress(ValueError):
            if line.startswith("-"):
                groups.discard(int(line[1:]))
            else:
                groups.add(int(line))
    return groups


class StrayGuard:
    def __init__(self, path: Path, agent_id: str) -> None:
        self.path = path
        self.agent_id = agent_id
        self.groups: set[int] = set()
        self.reaper: asyncio.subprocess.Process | None = None
        self._journal: FileIO | None = None
        self._lines = 0

    def _save(self) -> None:
        """Write the live set as the whole file (atomically), and go on appending to it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text("".join(f"{g}\n" for g in sorted(self.groups)))
        tmp.chmod(0o600)  # the agent's alone (docs/security.md, "A job's view of the host")
        tmp.replace(self.path)
        if self._journal is not None:
            self._journal.close()
        self._journal = self.path.open("ab", buffering=0)
        self._lines = len(self.groups)

    def _append(self, line: str) -> None:
        if self._journal is None or self._lines > COMPACT_AFTER + 4 * len(self.groups):
            self._save()  # the change is already in self.groups
            return
        self._journal.write(line.encode())
        self._lines += 1

    def _ours(self, pid: int) -> bool:
        """A process is ours if it still carries our agent id (pids get reused)."""
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            return False
        return f"JETCRON_AGENT_ID={self.agent_id}".encode() in environ.split(b"\0")

    @staticmethod
    def _members(pgids: set[int]) -> dict[int, list[int]]:
        """Live processes of each group. The leader (the job's shell) may be gone, killed by PR_SET_PDEATHSIG
        with the agent, while its grandchildren live on in the group."""
        found: dict[int, list[int]] = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()
            if fields[0] != "Z" and int(fields[2]) in pgids:
                found.setdefault(int(fields[2]), []).append(int(entry.name))
        return found

    def kill_leftovers(self) -> list[int]:
        killed: list[int] = []
        if self.path.exists():
            pgids = replay(self.path.read_text())
            for pgid, pids in self._members(pgids).items():
                if any(self._ours(p) for p in pids) and kill_group(pgid, signal.SIGKILL):
                    killed.append(pgid)
        self.groups.clear()
        self._save()
        return killed

    async def start_reaper(self, python: str, runtime: str | None = None, cgroups: list[str] | None = None) -> None:
        args = [*(["--runtime", runtime] if runtime else []), *(a for d in cgroups or [] for a in ("--cgroup", d))]
        self.reaper = await asyncio.create_subprocess_exec(
            python, "-m", "jetcron_services.agent.host.reaper", *args, stdin=asyncio.subprocess.PIPE,
            start_new_session=True)

    def _tell(self, line: str) -> None:
        if self.reaper is not None and self.reaper.stdin is not None:
            with contextlib.suppress(Exception):
                self.reaper.stdin.write(line.encode())

    def add(self, pgid: int) -> None:
        self.groups.add(pgid)
        self._tell(f"+{pgid}\n")
        self._append(f"{pgid}\n")

    def remove(self, pgid: int) -> None:
        self.groups.discard(pgid)
        self._tell(f"-{pgid}\n")
        self._append(f"-{pgid}\n")

    def add_container(self, name: str) -> None:
        self._tell(f"+c {name}\n")

    def remove_container(self, name: str) -> None:
        self._tell(f"-c {name}\n")

    async def close(self) -> None:
        """At the agent's stop: close the journal, and end the reaper by closing its stdin (it kills any group it
        still knows, and exits)."""
        if self._journal is not None:
            self._journal.close()
            self._journal = None
        if self.reaper is not None and self.reaper.stdin is not None:
            self.reaper.stdin.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.reaper.wait(), timeout=5)
