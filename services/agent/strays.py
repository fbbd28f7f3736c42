"""No orphans: a reaper kills our process groups if we die; a restart kills groups left from an earlier life."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path


class StrayGuard:
    def __init__(self, path: Path, agent_id: str) -> None:
        self.path = path
        self.agent_id = agent_id
        self.groups: set[int] = set()
        self.reaper: asyncio.subprocess.Process | None = None

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text("".join(f"{g}\n" for g in sorted(self.groups)))
        tmp.replace(self.path)

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
            pgids = {int(line) for line in self.path.read_text().split()}
            for pgid, pids in self._members(pgids).items():
                if any(self._ours(p) for p in pids):
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(pgid, signal.SIGKILL)
                        killed.append(pgid)
        self.groups.clear()
        self._save()
        return killed

    async def start_reaper(self, python: str, runtime: str | None = None, cgroups: list[str] | None = None) -> None:
        args = [*(["--runtime", runtime] if runtime else []), *(a for d in cgroups or [] for a in ("--cgroup", d))]
        self.reaper = await asyncio.create_subprocess_exec(
            python, "-m", "jetcron.services.agent.reaper", *args, stdin=asyncio.subprocess.PIPE,
            start_new_session=True)

    def _tell(self, line: str) -> None:
        if self.reaper is not None and self.reaper.stdin is not None:
            with contextlib.suppress(Exception):
                self.reaper.stdin.write(line.encode())

    def add(self, pgid: int) -> None:
        self.groups.add(pgid)
        self._tell(f"+{pgid}\n")
        self._save()

    def remove(self, pgid: int) -> None:
        self.groups.discard(pgid)
        self._tell(f"-{pgid}\n")
        self._save()

    def add_container(self, name: str) -> None:
        self._tell(f"+c {name}\n")

    def remove_container(self, name: str) -> None:
        self._tell(f"-c {name}\n")

    async def stop_reaper(self) -> None:
        if self.reaper is not None and self.reaper.stdin is not None:
            self.reaper.stdin.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.reaper.wait(), timeout=5)
