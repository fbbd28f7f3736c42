"""jetcron.checkpoint: a long job saves its progress under its run id; the next attempt of the run resumes there.

    from jetcron import checkpoint

    with checkpoint.open() as ckpt:              # run id and attempt from JETCRON_RUN_ID / JETCRON_ATTEMPT
        last = ckpt.load()                       # None on a first attempt
        if last is not None and last.file:
            ckpt.restore_file(last, "model.pt")  # the weights saved with that step
        for epoch in range(last.step + 1 if last else 0, 100):
            loss = train(epoch)
            ckpt.save_file(epoch, "model.pt", {"loss": loss})   # or ckpt.save(epoch, {...}) for small state

Every attempt of one run shares its run id, so a re-run after an agent died resumes from the last saved step,
not from zero. An older attempt (fenced: its lease was lost) cannot overwrite a newer attempt's checkpoint
(StaleCheckpoint); a file that does not read back as saved raises DamagedCheckpoint. A run's credential reaches
its own run's checkpoint and nothing of another run or tenant. The run tracker removes a run's checkpoints once
the run has finished and JETCRON_CHECKPOINT_RETENTION seconds have passed.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from jetcron.bus.checkpoints import Checkpoints, DamagedCheckpoint, Saved, StaleCheckpoint
from jetcron.core.ids import DEFAULT_TENANT
from jetcron.sdk._sync import in_private_loop

__all__ = ["AsyncCheckpoint", "Checkpoint", "DamagedCheckpoint", "Saved", "StaleCheckpoint", "open", "open_async"]


def _identity(run_id: str | None, attempt: int | None) -> tuple[str, int]:
    run_id = run_id or os.environ.get("JETCRON_RUN_ID")
    if not run_id:
        raise RuntimeError("jetcron.checkpoint: no run id (not started by jetcron? pass run_id=)")
    return run_id, attempt if attempt is not None else int(os.environ.get("JETCRON_ATTEMPT", "1"))


def _tenant(tenant: str | None) -> str:
    # A run's credential reaches its own tenant's and run's checkpoint subjects only (jetcron.auth.roles.job_template).
    return tenant or os.environ.get("JETCRON_TENANT") or DEFAULT_TENANT


class AsyncCheckpoint:
    """One run's checkpoint, as seen by one attempt."""

    def __init__(self, store: Checkpoints, run_id: str, attempt: int) -> None:
        self.store = store
        self.run_id = run_id
        self.attempt = attempt

    async def load(self) -> Saved | None:
        """The latest checkpoint of this run (from any attempt), or None."""
        return await self.store.load(self.run_id)

    async def save(self, step: int, state: Any = None) -> Saved:
        """Record progress: a step number and small JSON-able state."""
        return await self.store.save(self.run_id, step, self.attempt, state, now=datetime.now(UTC))

    async def save_file(self, step: int, path: str | os.PathLike[str], state: Any = None) -> Saved:
        """Record progress with a file (streamed to the object store in chunks)."""
        with Path(path).open("rb") as f:
            return await self.store.save(self.run_id, step, self.attempt, state, file=f, now=datetime.now(UTC))

    async def restore_file(self, saved: Saved, path: str | os.PathLike[str]) -> Path:
        """Write the checkpoint's file to `path` (atomically: a partial download never replaces a good file)."""
        target = Path(path)
        partial = target.with_name(target.name + ".partial")
        with partial.open("wb") as f:
            await self.store.read_file(saved, f)
        partial.replace(target)
        return target


@asynccontextmanager
async def open_async(run_id: str | None = None, attempt: int | None = None, *, nats_url: str | None = None,
                     tenant: str | None = None) -> AsyncIterator[AsyncCheckpoint]:
    from jetcron.bus import rpc
    from jetcron.bus.connect import Identity, connect

    rid, number = _identity(run_id, attempt)
    url = nats_url or os.environ.get("JETCRON_NATS_URL", "nats://127.0.0.1:4222")
    nc = (await connect(url, name="jetcron-checkpoint", check=False,
                        identity=Identity.from_env(os.environ))).nc
    try:
        yield AsyncCheckpoint(Checkpoints(nc, rpc.jetstream(nc, timeout=5), _tenant(tenant)), rid, number)
    finally:
        await rpc.close(nc, drain=None)


class Checkpoint:
    """The synchronous form, for plain job scripts: the same methods, run on a private event loop."""

    def __init__(self, inner: AsyncCheckpoint, loop: asyncio.AbstractEventLoop) -> None:
        self._inner = inner
        self._loop = loop
        self.run_id = inner.run_id
        self.attempt = inner.attempt

    def load(self) -> Saved | None:
        return self._loop.run_until_complete(self._inner.load())

    def save(self, step: int, state: Any = None) -> Saved:
        return self._loop.run_until_complete(self._inner.save(step, state))

    def save_file(self, step: int, path: str | os.PathLike[str], state: Any = None) -> Saved:
        return self._loop.run_until_complete(self._inner.save_file(step, path, state))

    def restore_file(self, saved: Saved, path: str | os.PathLike[str]) -> Path:
        return self._loop.run_until_complete(self._inner.restore_file(saved, path))


@contextmanager
def open(run_id: str | None = None, attempt: int | None = None, *, nats_url: str | None = None,
         tenant: str | None = None) -> Iterator[Checkpoint]:
    with in_private_loop(open_async(run_id, attempt, nats_url=nats_url, tenant=tenant)) as (inner, loop):
        yield Checkpoint(inner, loop)
