"""Typed KV stores: revision-checked writes through the leaner ack wait, reads, and the bucket's watch."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import TypeVar

import msgspec
import nats.js.errors as jse
from nats.js import JetStreamContext

from jetcron.bus.acks import publish_acked
from jetcron.bus.kv._errors import NO_MESSAGE, WRONG_LAST, translate
from jetcron.bus.kv._stream import bind, scan_keys, value_of
from jetcron.bus.kv._watch import BucketWatch
from jetcron.bus.natspy import valid_key
from jetcron.bus.records import RecordOps, kind_of
from jetcron.core.errors import NotFound, WriteConflict
from jetcron.wire import subjects as s
from jetcron.wire.codec import decode, encode

T = TypeVar("T", bound=msgspec.Struct)


class Store(RecordOps[T]):
    """A KV bucket whose values are one msgspec type (the NATS adapter of ports.Records)."""

    def __init__(self, js: JetStreamContext, bucket: str, kind: type[T],
                 ttl_of: Callable[[T], int | None] | None = None) -> None:
        self.js = js
        self.kv = bind(js, bucket)
        self.stream = s.kv_stream(bucket)
        self.prefix = s.kv_subject(bucket, "")
        """A key's subject is the prefix and the key: what a write publishes to."""
        self.kind = kind
        self.name = bucket
        self.ttl_of = ttl_of
        """Each value's own lifetime on the server (its Nats-TTL, whole seconds), or None to keep it: an ended run
        ages out (jetcron.core.lifecycle.retention.record_ttl), a live one stays."""
        self._watch = BucketWatch(js, bucket, kind)

    @classmethod
    async def open(cls, js: JetStreamContext, bucket: str, kind: type[T],
                   ttl_of: Callable[[T], int | None] | None = None) -> Store[T]:
        return cls(js, bucket, kind, ttl_of)

    async def get(self, key: str) -> tuple[T, int]:
        """The value and its revision, or NotFound."""
        try:
            entry = await self.kv.get(key)
        except jse.KeyNotFoundError:
            raise NotFound(kind_of(self.name), key) from None
        except Exception as exc:
            raise translate(exc, f"read {self.name}/{key}") from exc
        if entry.value is None:
            raise NotFound(kind_of(self.name), key)
        return decode(entry.value, self.kind), int(entry.revision or 0)

    async def _write(self, key: str, value: bytes, last: int | None, ttl: int | None = None) -> int:
        """One write, checked against revision `last` (0: the key must not exist; None: unchecked) and living
        `ttl` seconds (None: until changed), as nats-py's KeyValue writes it, through the leaner ack wait (acks.py)."""
        if not valid_key(key):
            raise jse.InvalidKeyError(key)
        headers: dict[str, str] | None = None
        if last is not None:
            headers = {s.HDR_EXPECTED_LAST_SUBJECT_SEQ: str(last)}
        if ttl is not None:
            # Earlier revisions go with it: in a bucket that keeps history, the one before would otherwise be
            # the key's value again once this one expired (a fired one-shot job, active again).
            headers = {**(headers or {}), s.HDR_TTL: str(ttl), s.HDR_ROLLUP: s.ROLLUP_SUBJECT}
        return await publish_acked(self.js, self.prefix + key, value, headers)

    def _ttl(self, value: T) -> int | None:
        return self.ttl_of(value) if self.ttl_of is not None else None

    async def create(self, key: str, value: T) -> int:
        """Write only if the key does not exist (expected revision 0): the fire gate. A key whose last revision
        is a delete marker counts as not existing (written against the marker's revision), as in nats-py."""
        data, ttl = encode(value), self._ttl(value)
        try:
            try:
                return await self._write(key, data, 0, ttl)
            except jse.APIError as exc:
                if exc.err_code not in WRONG_LAST:
                    raise
                try:
                    await self.kv.get(key)
                except jse.KeyNotFoundError as gone:
                    if gone.entry is None:
                        # Refused as written already, yet not found: the read came from a replica behind the write
                        # that refused ours (a cluster just made, every replica creating the same key at once).
                        raise WriteConflict(f"create {self.name}/{key}: written by someone else first") from None
                    return await self._write(key, data, int(gone.entry.revision or 0), ttl)
                raise
        except WriteConflict:
            raise
        except Exception as exc:
            raise translate(exc, f"create {self.name}/{key}") from exc

    async def update(self, key: str, value: T, revision: int) -> int:
        """Compare-and-set against `revision`; WriteConflict if someone wrote first."""
        try:
            return await self._write(key, encode(value), revision, self._ttl(value))
        except Exception as exc:
            raise translate(exc, f"update {self.name}/{key}") from exc

    async def put(self, key: str, value: T) -> int:
        try:
            return await self._write(key, encode(value), None, self._ttl(value))
        except Exception as exc:
            raise translate(exc, f"write {self.name}/{key}") from exc

    async def delete(self, key: str) -> None:
        """A delete marker: watchers see the key go at once."""
        try:
            await self.kv.delete(key)
        except Exception as exc:
            raise translate(exc, f"delete {self.name}/{key}") from exc

    async def keys(self, pattern: str = ">") -> list[str]:
        try:
            return await scan_keys(self.js, self.name, pattern)
        except Exception as exc:
            raise translate(exc, f"list {self.name}") from exc

    async def mark(self) -> tuple[int, int]:
        try:
            state = (await self.js.stream_info(self.stream)).state
        except Exception as exc:
            raise translate(exc, f"read {self.name}'s state") from exc
        return int(state.last_seq or 0), int(state.messages or 0)

    def watch(self, pattern: str = ">") -> AsyncIterator[tuple[str, T | None, int]]:
        """Every current value, then live changes: (key, value or None when deleted, revision); the end of the
        current values is marked by ("", None, 0). It ends only with its connection or its caller (BucketWatch)."""
        return self._watch.watch(pattern)

    async def last(self, pattern: str) -> tuple[T, int] | None:
        """The value written last under a key pattern (`job.*`), with its revision; None when nothing matches or
        that last write was a delete (a marker of a deleted, purged or expired key: an older value under the
        pattern is not looked for, which would take a scan).

        One request whatever the pattern covers: the server answers a message get by its last subject matching
        the filter from its subject index, where listing the keys and reading each would grow with history.
        """
        try:
            msg = await self.js.get_last_msg(self.stream, self.prefix + pattern)
        except Exception as exc:
            if isinstance(exc, jse.NotFoundError) and exc.err_code == NO_MESSAGE:
                return None
            raise translate(exc, f"read the last of {self.name}/{pattern}") from exc
        if (data := value_of(msg.data, msg.headers)) is None:
            return None
        return decode(data, self.kind), int(msg.seq or 0)


class ServerBuckets:
    """ports.Buckets on JetStream: each bucket a kv.Store."""

    def __init__(self, js: JetStreamContext) -> None:
        self.js = js

    async def open(self, name: str, kind: type[T]) -> Store[T]:
        return await Store.open(self.js, name, kind)
