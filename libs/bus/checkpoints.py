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
from jetcron.bus.ports import Streams
from jetcron.bus.streams import ServerStreams
from jetcron.core.errors import Conflict, JetcronError
from jetcron.wire import subjects as s


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
        """Every live object name in the bucket (records and files): stored_names."""
        for name in await stored_names(ServerStreams(self.js), self.bucket):
            yield name

    async def remove_run(self, run_id: str) -> int:
        """Remove every object of the run; how many there were."""
        return await remove_run(ServerStreams(self.js), run_id, self.bucket)

    async def _remove(self, name: str) -> None:
        await remove_object(ServerStreams(self.js), self.bucket, name)


def meta_subject(bucket: str, name: str) -> str:
    """The subject of an object's meta entry in its bucket's stream."""
    return f"$O.{bucket}.M.{base64.urlsafe_b64encode(name.encode()).decode()}"


async def stored_names(streams: Streams, bucket: str = s.OBJECT_CHECKPOINTS) -> list[str]:
    """Every live object name in the bucket (records and files), from the meta entries its stream holds: one read
    of the subjects' counts, then each meta entry's last value (a deleted object's says so). Not nats-py's list(),
    which watches for the end-of-data marker and waits for ever when the last object is removed meanwhile."""
    stream, prefix = s.obj_stream(bucket), f"$O.{bucket}.M."
    names: list[str] = []
    for subject in await streams.counts(stream, prefix + ">"):
        found = await streams.last(stream, subject)
        if found is None:
            continue
        meta = msgspec.json.decode(found.data, type=_Meta)
        if not meta.deleted:
            names.append(meta.name)
    return sorted(names)


async def remove_object(streams: Streams, bucket: str, name: str) -> None:
    """Purge the object's chunks and its meta entry (nats-py's delete() leaves a marker per name forever)."""
    stream, meta_at = s.obj_stream(bucket), meta_subject(bucket, name)
    found = await streams.last(stream, meta_at)
    if found is None:
        return
    meta = msgspec.json.decode(found.data, type=_Meta)
    if meta.nuid:
        await streams.purge(stream, subject=f"$O.{bucket}.C.{meta.nuid}")
    await streams.purge(stream, subject=meta_at)


async def remove_run(streams: Streams, run_id: str, bucket: str = s.OBJECT_CHECKPOINTS) -> int:
    """Remove every object of the run; how many there were."""
    mine = [name for name in await stored_names(streams, bucket) if run_of(name) == run_id]
    for name in mine:
        await remove_object(streams, bucket, name)
    return len(mine)


class _Meta(msgspec.Struct):
    """What of an object's meta entry (the object store's JSON) is read here."""

    name: str
    nuid: str = ""
    deleted: bool = False
