"""Idempotency keys with a bounded lifetime: claim (create with TTL), commit, and a fail-closed bucket."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Protocol

import msgspec

from jetcron.bus.handles import JetStream
from jetcron.bus.ports import Publisher, Stored, StreamState
from jetcron.bus.publish import StreamPublisher
from jetcron.bus.streams import ServerStreams
from jetcron.core.errors import IdempotencyStoreFull, InvalidSpec, StorageFull, WriteConflict
from jetcron.wire import subjects as s
from jetcron.wire.codec import decode, encode


class KeyRecord(msgspec.Struct, frozen=True, kw_only=True):
    state: str
    """claimed | done"""
    body_hash: str = ""
    result: str = ""
    """What the first writer stored (e.g. the job name a create returned)."""
    at: datetime | None = None
    owner: str = ""
    """A claim's random nonce (once()): the claimer finds its own claim by it when the claim's write landed and
    its acknowledgement was lost."""


class KeyReads(Protocol):
    """What IdempotencyKeys reads: a key's last value and the bucket's fill. ports.Streams does both; a run's own
    credential reads through jetcron.bus.scoped.ScopedReads."""

    async def last(self, stream: str, subject: str) -> Stored | None: ...

    async def state(self, stream: str) -> StreamState: ...


class IdempotencyKeys:
    """Keys in the idempotency bucket, written through a Publisher (each write carries its own TTL and the revision
    it expects) and read through KeyReads: the server's, a run's scoped reads, or the twins'."""

    def __init__(self, publisher: Publisher, streams: KeyReads) -> None:
        self.publisher = publisher
        self.streams = streams
        self.stream = s.kv_stream(s.BUCKET_IDEMPOTENCY)
        self.prefix = s.kv_subject(s.BUCKET_IDEMPOTENCY, "")

    @classmethod
    def on_server(cls, js: JetStream) -> IdempotencyKeys:
        return cls(StreamPublisher(js), ServerStreams(js))

    async def get(self, key: str) -> tuple[KeyRecord, int] | None:
        found = await self.streams.last(self.stream, self.prefix + key)
        return None if found is None else (decode(found.data, KeyRecord), found.seq)

    async def _write(self, key: str, record: KeyRecord, ttl: float, expected: int) -> int:
        try:
            return await self.publisher.publish(self.prefix + key, encode(record), ttl=max(1, math.ceil(ttl)),
                                                headers={s.HDR_EXPECTED_LAST_SUBJECT_SEQ: str(expected)})
        except StorageFull as exc:
            raise IdempotencyStoreFull(
                f"idempotency store is full: refusing new key {key!r} rather than forgetting old ones") from exc

    async def claim(self, key: str, record: KeyRecord, ttl: float) -> int | None:
        """Create the key; None if it already exists (read it to see who has it)."""
        try:
            return await self._write(key, record, ttl, expected=0)
        except WriteConflict:
            return None

    async def take_over(self, key: str, record: KeyRecord, ttl: float, revision: int) -> int | None:
        """Claim a key whose last record (at `revision`) was released; None if someone else wrote it first."""
        try:
            return await self._write(key, record, ttl, expected=revision)
        except WriteConflict:
            return None

    async def ensure_room(self, ttl: float | None = None) -> None:
        """Refuse a new claim unless the bucket keeps a reserve (the claim's commit must fit too) and keeps a key
        as long as `ttl` (its max_age, JETCRON_IDEMPOTENCY_MAX_SECONDS: the server would cut the key's own TTL
        there, and a retry after that would repeat the effect).

        A commit replaces the claim, and a full bucket (discard new) refuses that replacement as well; a refused
        commit after the effect was done would let the claim expire and a later attempt do the effect again.
        So new keys stop at max_bytes minus a reserve (1 %, at least 1 KiB), leaving room for the commits of
        claims already taken.
        """
        state = await self.streams.state(self.stream)
        longest = state.max_age
        if ttl is not None and longest > 0 and ttl > longest:
            raise InvalidSpec("ttl", ttl, f"is longer than the idempotency store keeps a key ({longest:.0f} s, "
                              "JETCRON_IDEMPOTENCY_MAX_SECONDS): the key would be forgotten early")
        limit = state.max_bytes
        if limit > 0 and state.bytes + max(limit // 100, 1024) > limit:
            raise IdempotencyStoreFull(
                f"idempotency store is full ({state.bytes} of {limit} bytes): refusing new keys rather than "
                "forgetting old ones; raise its max_bytes or shorten key lifetimes")

    async def commit(self, key: str, record: KeyRecord, ttl: float, revision: int) -> int:
        return await self._write(key, record, ttl, expected=revision)

    async def forget(self, key: str, revision: int) -> None:
        """Drop our own claim (the effect failed) so a later attempt may claim again."""
        try:
            await self._write(key, KeyRecord(state="released"), 1, expected=revision)
        except WriteConflict:
            pass
