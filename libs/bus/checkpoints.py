"""Checkpoints in a JetStream object store: per run, one record (step, small state) and optionally one file.

Object names: `RUN_ID` holds the record; `RUN_ID/file/STEP` the file it points to. The file is written before
the record, so a record never points at a file that is not there; files of older steps are removed after the
record moved past them (a crash in between leaves one orphan, removed with the run's checkpoints).
"""

from __future__ import annotations

import base64
import io
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import msgspec
import nats.js.errors as jse
from nats.js import JetStreamContext
from nats.js.object_store import ObjectStore

from jetcron.bus.kv import translate
from jetcron.core.errors import Conflict, JetcronError
from jetcron.wire import subjects as s

LIST_WAIT = 5.0
"""Seconds a listing waits for its next entry before it counts as unanswered."""


class StaleCheckpoint(Conflict):
    """A newer attempt of the run has saved a checkpoint: this (older, fenced) attempt may not overwrite it."""


class Saved(msgspec.Struct, frozen=True, kw_only=True):
    """One run's latest checkpoint."""

    run_id: str
    step: int
    attempt: int
    state: Any = None
    """Small JSON-able progress (counters, a cursor, a loss): kept in the record itself."""
    file: str = ""
    """Object name of the saved file, when the checkpoint has one."""
    file_size: int = 0
    at: datetime | None = None


def file_object(run_id: str, step: int) -> str:
    return f"{run_id}/file/{step}"


def run_of(name: str) -> str:
    """The run an object belongs to (its record or one of its files)."""
    return name.split("/", 1)[0]


class Checkpoints:
    """Save, load and remove run checkpoints in the OBJECT_CHECKPOINTS bucket."""

    def __init__(self, js: JetStreamContext, bucket: str = s.OBJECT_CHECKPOINTS) -> None:
        self.js = js
        self.bucket = bucket
        self._store: ObjectStore | None = None

    async def _obj(self) -> ObjectStore:
        if self._store is None:
            try:
                self._store = await self.js.object_store(self.bucket)
            except Exception as exc:
                raise translate(exc, f"open checkpoint bucket {self.bucket}") from exc
        return self._store

    async def load(self, run_id: str) -> Saved | None:
        """The run's latest checkpoint record, or None if it never saved one."""
        obj = await self._obj()
        try:
            result = await obj.get(run_id)
        except jse.NotFoundError:
            return None
        except Exception as exc:
            raise translate(exc, f"load checkpoint of {run_id}") from exc
        if result.data is None or not result.data:
            return None
        return msgspec.json.decode(result.data, type=Saved)

    async def read_file(self, saved: Saved, into: io.BufferedIOBase) -> None:
        """Write the checkpoint's file into `into`."""
        if not saved.file:
            raise JetcronError(f"checkpoint of {saved.run_id} at step {saved.step} has no file")
        obj = await self._obj()
        try:
            await obj.get(saved.file, writeinto=into)
        except Exception as exc:
            raise translate(exc, f"load checkpoint file {saved.file}") from exc

    async def save(self, run_id: str, step: int, attempt: int, state: Any = None, *,
                   file: io.BufferedIOBase | bytes | None = None, now: datetime | None = None) -> Saved:
        """Store the checkpoint (replacing the previous one); StaleCheckpoint if a newer attempt saved since."""
        obj = await self._obj()
        previous = await self.load(run_id)
        if previous is not None and previous.attempt > attempt:
            raise StaleCheckpoint(f"checkpoint of {run_id}: attempt {previous.attempt} saved step {previous.step}; "
                                  f"attempt {attempt} is older and may not overwrite it")
        name, size = "", 0
        try:
            if file is not None:
                name = file_object(run_id, step)
                info = await obj.put(name, file)
                size = int(info.size or 0)
            saved = Saved(run_id=run_id, step=step, attempt=attempt, state=state, file=name, file_size=size, at=now)
            await obj.put(run_id, msgspec.json.encode(saved))
        except JetcronError:
            raise
        except Exception as exc:
            raise translate(exc, f"save checkpoint of {run_id} at step {step}") from exc
        if previous is not None and previous.file and previous.file != name:
            await self._remove(previous.file)
        return saved

    async def names(self) -> AsyncIterator[str]:
        """Every live object name in the bucket (records and files).

        Not nats-py's list(): it reads the last meta message, then watches for it, and waits for ever for the
        end-of-data marker when the last object is removed between the two (the watch then delivers nothing;
        a tracker sweeping checkpoints while another removes them hung so). Each wait here is bounded: a
        listing that stalls is Unavailable, and the caller tries again."""
        obj = await self._obj()
        names: list[str] = []
        try:
            watcher: Any = await obj.watch(ignore_deletes=True)  # nats-py leaves its watcher untyped
            try:
                while (info := await watcher.updates(timeout=LIST_WAIT)) is not None:
                    if not info.deleted:
                        names.append(info.name)
            finally:
                await watcher.stop()
        except Exception as exc:
            raise translate(exc, "list checkpoints") from exc
        for name in names:
            yield name

    async def remove_run(self, run_id: str) -> int:
        """Remove every object of the run; how many there were."""
        removed = 0
        async for name in self.names():
            if run_of(name) == run_id:
                await self._remove(name)
                removed += 1
        return removed

    async def _remove(self, name: str) -> None:
        """Purge the object's chunks and its meta entry (nats-py's delete() leaves a marker per name forever)."""
        obj = await self._obj()
        try:
            info = await obj.get_info(name)
        except jse.NotFoundError:
            return
        except Exception as exc:
            raise translate(exc, f"remove checkpoint object {name}") from exc
        stream = s.obj_stream(self.bucket)
        meta = f"$O.{self.bucket}.M.{base64.urlsafe_b64encode(name.encode()).decode()}"
        try:
            if info.nuid:
                await self.js.purge_stream(stream, subject=f"$O.{self.bucket}.C.{info.nuid}")
            await self.js.purge_stream(stream, subject=meta)
        except Exception as exc:
            raise translate(exc, f"remove checkpoint object {name}") from exc
