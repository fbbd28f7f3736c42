"""Checkpoints on the JC_CKPT stream: per run, one record (step, small state) and optionally one file.

Every part of a run's checkpoints lies under the run's own subjects, `jc.ckpt.<tenant>.<run token>.<part>`
(jetcron.wire.subjects.checkpoint_subject), so the server confines a run's credential to them
(jetcron.auth.roles.job_template): it reads them by subject and writes them, and reaches nothing of another run or
tenant. The record is part `rec`; a file is written in chunks, part `f.<attempt>.<slot>.<n>`. The stream keeps one
message per subject: a chunk written again replaces the one before.

A file goes into the slot the current record does not point at, then the record moves to it, so a save that dies
half-way leaves the previous checkpoint whole. The record carries the file's size, chunk count and sha256, which a
read checks. Older slots and chunks left by a larger file go with the run (the tracker's one purge of its subjects).
"""

from __future__ import annotations

import asyncio
import hashlib
import io
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import msgspec

from jetcron.bus.handles import Connection, JetStream
from jetcron.bus.ports import Streams
from jetcron.bus.publish import publish
from jetcron.bus.scoped import last_by_subject
from jetcron.core.errors import Conflict, JetcronError, WriteConflict
from jetcron.wire import subjects as s

CHUNK = 128 * 1024
"""Bytes per chunk of a file (the object store's own size): well under the stream's largest message."""
WINDOW = 8
"""Chunks in flight while a file is written: acknowledged writes one at a time would cost a round trip each."""


class StaleCheckpoint(Conflict):
    """A newer attempt of the run has saved a checkpoint: this (older, fenced) attempt may not overwrite it."""


class DamagedCheckpoint(JetcronError):
    """A checkpoint's file does not read back as it was saved (a chunk missing or replaced)."""


class Saved(msgspec.Struct, frozen=True, kw_only=True):
    """One run's latest checkpoint."""

    run_id: str
    step: int
    attempt: int
    state: Any = None
    """Small JSON-able progress (counters, a cursor, a loss): kept in the record itself."""
    file: str = ""
    """Where the saved file lies (`f.<attempt>.<slot>`), when the checkpoint has one."""
    file_size: int = 0
    chunks: int = 0
    sha256: str = ""
    at: datetime | None = None


def _slot_of(file: str) -> tuple[int, int] | None:
    """(attempt, slot) of a record's file part, None without one."""
    parts = file.split(".")
    if len(parts) != 3 or parts[0] != "f":
        return None
    return int(parts[1]), int(parts[2])


def _next_slot(previous: Saved | None, attempt: int) -> int:
    """The slot a new file of `attempt` goes into: not the one the current record points at."""
    if previous is None or (where := _slot_of(previous.file)) is None or where[0] != attempt:
        return 0
    return 1 - where[1]


def _pieces(file: io.BufferedIOBase | bytes) -> Iterator[bytes]:
    if isinstance(file, bytes):
        for at in range(0, len(file), CHUNK):
            yield file[at:at + CHUNK]
        return
    while piece := file.read(CHUNK):
        yield piece


class Checkpoints:
    """Save and load one tenant's run checkpoints: what jetcron.checkpoint does with a run's own credential."""

    def __init__(self, nc: Connection, js: JetStream, tenant: str, *, timeout: float = 5.0) -> None:
        self.nc = nc
        self.js = js
        self.tenant = tenant
        self.timeout = timeout

    def _subject(self, run_id: str, part: str) -> str:
        return s.checkpoint_subject(self.tenant, run_id, part)

    async def _record(self, run_id: str) -> tuple[Saved, int] | None:
        found = await last_by_subject(self.nc, s.STREAM_CHECKPOINTS, self._subject(run_id, "rec"),
                                      timeout=self.timeout)
        return None if found is None else (msgspec.json.decode(found.data, type=Saved), found.seq)

    async def load(self, run_id: str) -> Saved | None:
        """The run's latest checkpoint record, or None if it never saved one."""
        found = await self._record(run_id)
        return None if found is None else found[0]

    async def read_file(self, saved: Saved, into: io.BufferedIOBase) -> None:
        """Write the checkpoint's file into `into`; DamagedCheckpoint if it does not read back as saved."""
        if not saved.file:
            raise JetcronError(f"checkpoint of {saved.run_id} at step {saved.step} has no file")
        digest, size = hashlib.sha256(), 0
        for index in range(saved.chunks):
            part = f"{saved.file}.{index}"
            found = await last_by_subject(self.nc, s.STREAM_CHECKPOINTS, self._subject(saved.run_id, part),
                                          timeout=self.timeout)
            if found is None:
                raise DamagedCheckpoint(f"checkpoint of {saved.run_id} at step {saved.step}: chunk {index} of "
                                        f"{saved.chunks} is missing")
            digest.update(found.data)
            size += len(found.data)
            into.write(found.data)
        if size != saved.file_size or digest.hexdigest() != saved.sha256:
            raise DamagedCheckpoint(f"checkpoint of {saved.run_id} at step {saved.step}: its file reads back as "
                                    f"{size} bytes that differ from the {saved.file_size} saved")

    async def save(self, run_id: str, step: int, attempt: int, state: Any = None, *,
                   file: io.BufferedIOBase | bytes | None = None, now: datetime | None = None) -> Saved:
        """Store the checkpoint (replacing the previous one); StaleCheckpoint if a newer attempt saved since."""
        previous = await self._record(run_id)
        before = previous[0] if previous else None
        if before is not None and before.attempt > attempt:
            raise _stale(run_id, before, attempt)
        fields: dict[str, Any] = {}
        if file is not None:
            where = f"f.{attempt}.{_next_slot(before, attempt)}"
            fields = await self._write_file(run_id, where, file)
        saved = Saved(run_id=run_id, step=step, attempt=attempt, state=state, at=now, **fields)
        expected = str(previous[1] if previous else 0)
        try:
            await publish(self.js, self._subject(run_id, "rec"), msgspec.json.encode(saved),
                          headers={s.HDR_EXPECTED_LAST_SUBJECT_SEQ: expected})
        except WriteConflict:
            now_there = await self.load(run_id)
            if now_there is not None and now_there.attempt > attempt:
                raise _stale(run_id, now_there, attempt) from None
            raise Conflict(f"checkpoint of {run_id}: another save of attempt {attempt} landed first") from None
        return saved

    async def _write_file(self, run_id: str, where: str, file: io.BufferedIOBase | bytes) -> dict[str, Any]:
        digest, size, index = hashlib.sha256(), 0, 0
        pending: list[asyncio.Task[int]] = []
        try:
            for piece in _pieces(file):
                digest.update(piece)
                size += len(piece)
                subject = self._subject(run_id, f"{where}.{index}")
                pending.append(asyncio.create_task(publish(self.js, subject, piece)))
                index += 1
                if len(pending) >= WINDOW:
                    await asyncio.gather(*pending)
                    pending.clear()
            await asyncio.gather(*pending)
            pending.clear()
        finally:
            for task in pending:
                task.cancel()
        return {"file": where, "file_size": size, "chunks": index, "sha256": digest.hexdigest()}


def _stale(run_id: str, newer: Saved, attempt: int) -> StaleCheckpoint:
    return StaleCheckpoint(f"checkpoint of {run_id}: attempt {newer.attempt} saved step {newer.step}; attempt "
                           f"{attempt} is older and may not overwrite it")


# --- the run tracker's side: which runs saved checkpoints, and their removal -------------------------------------


class SavedRun(msgspec.Struct, frozen=True, kw_only=True):
    """A run's checkpoint subjects, and the run they belong to: "" when the record there names a run whose subjects
    these are not (a job may write only its own run's record, so this one is its own doing, and not kept)."""

    subjects: str
    run_id: str


async def saved_runs(streams: Streams) -> list[SavedRun]:
    """Every run with a checkpoint record, from the stream's record subjects (one read of the subjects' counts,
    then each record)."""
    found: list[SavedRun] = []
    for subject in sorted(await streams.counts(s.STREAM_CHECKPOINTS, s.CHECKPOINT_RECORDS)):
        last = await streams.last(s.STREAM_CHECKPOINTS, subject)
        if last is None:
            continue
        tenant, everything = subject.split(".")[2], subject.rsplit(".", 1)[0] + ".>"
        try:
            run_id = msgspec.json.decode(last.data, type=Saved).run_id
        except msgspec.DecodeError:
            run_id = ""
        owned = run_id and s.checkpoint_subject(tenant, run_id, "rec") == subject
        found.append(SavedRun(subjects=everything, run_id=run_id if owned else ""))
    return found


async def remove_run(streams: Streams, saved: SavedRun) -> None:
    """Remove every part of the run's checkpoints: its record and every chunk of every slot."""
    await streams.purge(s.STREAM_CHECKPOINTS, subject=saved.subjects)
