"""A bucket's watch: every current value, then live changes, resumed from where it stands when unanswered."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import msgspec
import nats.errors
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from jetcron.bus.kv._errors import translate
from jetcron.bus.kv._stream import drop_subscription, value_of
from jetcron.bus.natspy import connection_of
from jetcron.bus.ordered import in_order, stream_sequence
from jetcron.core.lifecycle.retry import outlasting_wait
from jetcron.wire import subjects as s
from jetcron.wire.codec import decode

T = TypeVar("T", bound=msgspec.Struct)


def _log() -> Any:
    """The stores' logger: structlog is imported when a line is first written (a CLI call seldom writes one)."""
    import structlog

    return structlog.get_logger("jetcron.kv")


WATCH_BATCH = 1000
"""Records per pull of a watch's initial load: big enough to amortise the round trip, small enough to decode
between pulls without holding the event loop for long."""


@dataclass
class WatchPosition:
    """How far a watch has come: whether its initial load is in, and the stream sequence up to which every change
    was yielded (or was a value it does not yield): where a watch the server stopped answering starts again."""

    loaded: bool = False
    covered: int = 0


class BucketWatch(Generic[T]):
    """A bucket's watch (kv.Store.watch): its initial load in batches, then an ordered consumer of its changes."""

    def __init__(self, js: JetStreamContext, bucket: str, kind: type[T]) -> None:
        self.js = js
        self.name = bucket
        self.stream = s.kv_stream(bucket)
        self.prefix = s.kv_subject(bucket, "")
        self.kind = kind

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
