"""Typed KV stores: revision-checked writes, server error codes translated once into jetcron errors."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import msgspec
import nats.errors
import nats.js.errors as jse
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, RawStreamMsg
from nats.js.kv import KeyValue

from jetcron.bus.acks import publish_acked
from jetcron.bus.natspy import api_prefix, connection_of, consumer_of, request_timeout, valid_key
from jetcron.bus.ordered import in_order, stream_sequence
from jetcron.bus.records import RecordOps, kind_of
from jetcron.core.errors import NotFound, StorageFull, Unavailable, WriteConflict
from jetcron.core.retry import outlasting_wait
from jetcron.wire import subjects as s
from jetcron.wire.codec import decode, encode

T = TypeVar("T", bound=msgspec.Struct)



def _log() -> Any:
    """The stores' logger: structlog is imported when a line is first written (a CLI call seldom writes one)."""
    import structlog

    return structlog.get_logger("jetcron.kv")

WATCH_BATCH = 1000
"""Records per pull of a watch's initial load: big enough to amortise the round trip, small enough to decode
between pulls without holding the event loop for long."""
DROP_TIMEOUT = 1.0
"""Seconds a watch that ends waits for the server to delete its consumer."""

WRONG_LAST = (10071, 10164)
"""The server's codes for a write whose expected last sequence did not match: someone wrote first."""
NO_MESSAGE = 10037
"""The server's code for a message get that matched nothing (a missing stream is another not-found: 10059)."""
# 10077: message size; 10047/10048: storage or bytes limit; 10023: the server's JetStream store (max_file_store)
# is full; 10026/10027: a consumer or stream count limit; 10008/10163: cluster not ready: retryable.
_FULL = {10023, 10047, 10048, 10026, 10027}
_REMOVED = ("DEL", "PURGE")
"""The server's KV-Operation header on a delete marker and on a purge marker (an expiry under subject delete
markers reads as a purge too: docs/decisions-nats.md)."""


def stored_size(subject: str, data: bytes, headers: Mapping[str, str] | None) -> int:
    """The bytes the server's file store counts for one message (a stream state's `bytes` adds them up): a 22-byte
    record head and an 8-byte hash around the subject and the body, and the header block with its 4-byte length.
    Storage pressure counts what it lets go in these, so that it stops where the server's figure will."""
    size = 30 + len(subject.encode()) + len(data)
    if headers:
        block = "NATS/1.0\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        size += 4 + len(block.encode())
    return size


def value_of(data: bytes | None, headers: Mapping[str, str] | None) -> bytes | None:
    """The value a message of a bucket's stream gives its key, or None when it gives none: a delete or purge
    marker, or an empty body. Every reader of raw KV messages asks this, so a key reads as gone the same way
    everywhere."""
    if not data or (headers is not None and headers.get("KV-Operation") in _REMOVED):
        return None
    return data


async def read_value(js: JetStreamContext, stream: str, subject: str, what: str) -> tuple[bytes, RawStreamMsg] | None:
    """The value of the last message on `subject` in a bucket's stream, with that message (its sequence, time and
    headers); None when there is none or it gives no value (value_of). Read from the stream by subject, not through
    nats-py's KeyValue, for the buckets whose writers publish themselves (leases, idempotency keys); errors are
    translated as reading `what`."""
    try:
        msg = await js.get_msg(stream, subject=subject, direct=False)
    except jse.NotFoundError:
        return None
    except Exception as exc:
        raise translate(exc, f"read {what}") from exc
    data = value_of(msg.data, msg.headers)
    return None if data is None else (data, msg)


def translate(exc: BaseException, what: str) -> Exception:
    """Map a nats-py error to a jetcron error that says what happened and whether to retry."""
    if isinstance(exc, jse.KeyWrongLastSequenceError):
        return WriteConflict(f"{what}: written by someone else first")
    if isinstance(exc, jse.KeyNotFoundError):  # an APIError that nats-py makes without an err_code
        return NotFound("key", what)
    if isinstance(exc, jse.ServiceUnavailableError) and exc.err_code is None:
        return Unavailable(f"{what}: no server answered (503: a stream or consumer with no leader yet); retry later")
    if isinstance(exc, jse.APIError):
        code, description = getattr(exc, "err_code", None), getattr(exc, "description", None)
        if code in WRONG_LAST:
            return WriteConflict(f"{what}: written by someone else first")
        if code in _FULL or (description and "maximum" in description.lower()):
            return StorageFull(f"{what}: storage full ({description}). The run tracker lets the oldest finished "
                               "runs go near a limit; if this lasts, raise the limit (JETCRON_*_MAX_BYTES, or the "
                               "server's max_file_store) or shorten JETCRON_HISTORY_KEEP_SECONDS "
                               "(docs/operations.md, \"Storage pressure\"); retry later")
        return Unavailable(f"{what}: server error {code} {description}; retry later")
    if isinstance(exc, (asyncio.TimeoutError, nats.errors.TimeoutError, nats.errors.NoRespondersError,
                        nats.errors.ConnectionClosedError, jse.NoStreamResponseError)):
        return Unavailable(f"{what}: storage did not answer ({type(exc).__name__}); outcome unknown, retry")
    return Unavailable(f"{what}: {type(exc).__name__}: {exc}")


async def drop_subscription(js: JetStreamContext, sub: Any) -> None:
    """Unsubscribe and delete the consumer behind it: nats-py leaves it to the inactivity timeout,
    so every short-lived watch would leave a consumer behind for minutes (and hit the consumer limit)."""
    names = consumer_of(sub)
    with contextlib.suppress(Exception):
        await sub.unsubscribe()
    if names is not None and connection_of(js).is_connected:
        # Bounded: a frozen server answers nothing, and a watch ending on a service's stop must not hold the stop
        # for the JetStream timeout (10 s); a consumer left behind goes at its inactivity threshold.
        with contextlib.suppress(Exception):
            await asyncio.wait_for(js.delete_consumer(*names), timeout=DROP_TIMEOUT)


async def scan_keys(js: JetStreamContext, bucket: str, pattern: str) -> list[str]:
    """Keys matching a subject pattern, from the stream's per-subject counts (filtered by the server).

    Not nats-py's keys(), which filters by substring, and not a watch, whose end-of-data marker can
    arrive before data already delivered (an empty answer for a full bucket under load). A key whose
    last message is a delete marker is listed too: callers read each key and skip missing ones.

    The server answers at most 100,000 subjects at a time (with the `total` it found) and nats-py's stream_info
    neither asks for the next page nor keeps the total: so the pages are asked for here, by `offset`, until the
    total is reached. Keys written or gone between pages may be missed or listed twice (once here).
    """
    prefix = s.kv_subject(bucket, "")
    subject = f"{api_prefix(js)}.STREAM.INFO.{s.kv_stream(bucket)}"
    keys: dict[str, None] = {}
    offset = 0
    while True:
        request = json.dumps({"subjects_filter": prefix + pattern, "offset": offset}).encode()
        body = json.loads((await connection_of(js).request(subject, request, timeout=request_timeout(js))).data)
        if "error" in body:
            jse.APIError.from_error(body["error"])  # raises the error nats-py would have raised
        page = (body.get("state") or {}).get("subjects") or {}
        keys.update(dict.fromkeys(key[len(prefix):] for key in page))
        offset += len(page)
        if not page or offset >= int(body.get("total") or 0):
            return list(keys)


def bind(js: JetStreamContext, bucket: str) -> KeyValue:
    """A handle on one of jetcron's buckets without asking the server about it first (nats-py's key_value()
    reads the stream's info): a role may use a bucket it is not allowed to inspect, and every bucket is made
    by topology.py without direct gets."""
    return KeyValue(name=bucket, stream=s.kv_stream(bucket), pre=s.kv_subject(bucket, ""), js=js, direct=False)


@dataclass
class WatchPosition:
    """How far a watch has come: whether its initial load is in, and the stream sequence up to which every change
    was yielded (or was a value it does not yield): where a watch the server stopped answering starts again."""

    loaded: bool = False
    covered: int = 0


class Store(RecordOps[T]):
    """A KV bucket whose values are one msgspec type (the NATS adapter of ports.Records)."""

    def __init__(self, js: JetStreamContext, bucket: str, kind: type[T],
                 ttl_of: Callable[[T], int | None] | None = None) -> None:
        self.js = js
        self.kv = bind(js, bucket)
        self.stream = s.kv_stream(bucket)
        self.prefix = s.kv_subject(bucket, "")
        """A key's subject is the prefix and the key: what a watch strips and a write publishes to."""
        self.kind = kind
        self.name = bucket
        self.ttl_of = ttl_of
        """Each value's own lifetime on the server (its Nats-TTL, whole seconds), or None to keep it: an ended run
        ages out (jetcron.core.retention.record_ttl), a live one stays."""

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

    async def watch(self, pattern: str = ">") -> AsyncIterator[tuple[str, T | None, int]]:
        """Every current value, then live changes: (key, value or None when deleted, revision).

        The end of the initial values is marked by ("", None, 0). The current values are pulled in batches
        (an ephemeral consumer, last value per key), so a bucket of a million records arrives as fast as the
        caller takes it; nats-py's push-based watch answered the server's flow control on arrival and overflowed
        its buffer (docs/benchmarks.md). Live changes then come from an ordered consumer starting right after
        the last sequence the snapshot covers.

        A watch ends only with its connection (or its caller). A step the server does not answer (a stream or
        consumer with no leader yet, a cluster without quorum, a bucket not made yet) is tried again, for ever,
        from where the watch stands: what was yielded is not yielded again, and nothing after it is skipped.
        A service's view is its watches: one that ended would freeze that view for good (a placement that no
        longer sees agents places nothing).
        """
        subject = s.kv_subject(self.name, pattern)
        at = WatchPosition()
        failures = 0
        while True:
            try:
                if not at.loaded:
                    async for item in self._load(subject, at):
                        failures = 0
                        yield item
                    at.loaded = True
                    yield "", None, 0
                async for item in self._live(subject, at):
                    failures = 0
                    yield item
            except Exception as exc:
                if connection_of(self.js).is_closed:
                    raise  # the service is stopping (a connection is closed only then)
                failures += 1
                wait = outlasting_wait(failures)
                _log().warning("watch not answered; trying again from where it stands", bucket=self.name,
                             revision=at.covered, loaded=at.loaded, failures=failures, retry_in=wait,
                             error=str(translate(exc, f"watch {self.name}")))
                await asyncio.sleep(wait)

    async def _load(self, subject: str, at: WatchPosition) -> AsyncIterator[tuple[str, T | None, int]]:
        """The last value of every key written at or before the stream's last sequence now (later ones come with
        the live changes). A load started again after a failure yields only what is newer than what the first
        yielded, deletes included: a key it yielded may have been deleted in between."""
        js = self.js
        info = await js.stream_info(self.stream)
        snapshot = int(info.state.last_seq or 0)
        again = at.covered > 0
        if snapshot > at.covered:
            config = ConsumerConfig(deliver_policy=DeliverPolicy.LAST_PER_SUBJECT, ack_policy=AckPolicy.NONE,
                                    inactive_threshold=60.0, filter_subject=subject)
            sub = await js.pull_subscribe(subject, stream=self.stream, config=config)
            try:
                pending = (await sub.consumer_info()).num_pending
                while pending:
                    try:
                        msgs = await sub.fetch(WATCH_BATCH, timeout=5)
                    except (TimeoutError, nats.errors.TimeoutError):
                        break  # nothing came in 5 s: the rest was deleted meanwhile
                    for msg in msgs:
                        meta = msg.metadata
                        sequence = meta.sequence.stream
                        if sequence > snapshot:
                            pending = 0
                            break
                        pending = meta.num_pending
                        # The server delivers the last values in stream order, so what a failed load yielded
                        # is all at or below `covered`.
                        if sequence <= at.covered:
                            continue
                        entry = self._entry(msg, sequence)
                        if entry is not None and (entry[1] is not None or again):
                            at.covered = sequence
                            yield entry
            finally:
                await drop_subscription(js, sub)
        at.covered = max(at.covered, snapshot)

    async def _live(self, subject: str, at: WatchPosition) -> AsyncIterator[tuple[str, T | None, int]]:
        """Every change after `at.covered`, for ever."""
        js = self.js
        live = await js.subscribe(subject, stream=self.stream, ordered_consumer=True, config=ConsumerConfig(
            deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=at.covered + 1))
        try:
            async for msg in in_order(live):
                at.covered = sequence = stream_sequence(msg.reply)
                entry = self._entry(msg, sequence)
                if entry is not None:
                    yield entry
        finally:
            await drop_subscription(js, live)

    def _entry(self, msg: Any, revision: int) -> tuple[str, T | None, int] | None:
        """(key, value or None for a delete, revision) of a stream message at `revision`; None if undecodable."""
        key = msg.subject[len(self.prefix):]
        if (data := value_of(msg.data, msg.headers)) is None:
            return key, None, revision
        try:
            return key, decode(data, self.kind), revision
        except msgspec.DecodeError:
            return None

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
