"""The lease log on JetStream: raw, revision-checked publishes to the lease buckets."""

from __future__ import annotations

import math

from nats.js import JetStreamContext

from jetcron.bus.acks import publish_acked
from jetcron.bus.kv import read_value, scan_keys, translate
from jetcron.bus.ports import LeaseEntry
from jetcron.wire import subjects as s


def _ttl_of(headers: dict[str, str] | None) -> float | None:
    try:
        return float((headers or {})[s.HDR_TTL])
    except (KeyError, ValueError):  # not ours: a write by hand, or a duration like "1m" (we write seconds)
        return None


def _ttl_header(ttl: float) -> str:
    # Whole seconds: the header also takes durations, but seconds are what every server version accepts.
    return str(max(1, math.ceil(ttl)))


class ServerLeaseLog:
    """ports.LeaseLog on JetStream: raw, revision-checked publishes to the lease buckets.

    nats-py's KeyValue.update() carries no TTL, so a renewal through it would make the lease immortal; each write
    here carries both Nats-TTL and Nats-Expected-Last-Subject-Sequence (docs/decisions-nats.md). Each key lives in
    the bucket `subjects.lease_bucket` names: run leases apart from leader and shard leases."""

    def __init__(self, js: JetStreamContext) -> None:
        self.js = js

    async def write(self, key: str, writer: str, data: bytes, ttl: float, expected: int | None) -> int:
        headers = {s.HDR_TTL: _ttl_header(ttl)}
        subject, group = s.lease_subject(key, writer), s.lease_filter(key)
        if expected is not None:
            headers[s.HDR_EXPECTED_LAST_SUBJECT_SEQ] = str(expected)
            if group != subject:  # checked against every writer's claim on the run: anyone's newer write fences
                headers[s.HDR_EXPECTED_LAST_SUBJECT_SEQ_SUBJECT] = group
        try:
            return await publish_acked(self.js, subject, data, headers)
        except Exception as exc:
            raise translate(exc, f"lease {key}") from exc

    async def last(self, key: str) -> LeaseEntry | None:
        return await self._entry(key, s.lease_filter(key))

    async def own(self, key: str, writer: str) -> LeaseEntry | None:
        return await self._entry(key, s.lease_subject(key, writer))

    async def _entry(self, key: str, subject: str) -> LeaseEntry | None:
        found = await read_value(self.js, s.kv_stream(s.lease_bucket(key)), subject, f"lease {key}")
        if found is None:
            return None
        data, msg = found
        return LeaseEntry(data=data, revision=int(msg.seq or 0), written_at=msg.time, ttl=_ttl_of(msg.headers),
                          writer=s.lease_writer(msg.subject or ""))

    async def keys(self, pattern: str) -> list[str]:
        try:
            return await scan_keys(self.js, s.lease_bucket(pattern), pattern)
        except Exception as exc:
            raise translate(exc, f"list leases {pattern}") from exc
