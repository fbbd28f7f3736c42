"""How full each stream and the server's JetStream store are, and the ways history is let go early: a key with
every revision of it (no marker: nothing is left of it), a run's output, a stream's oldest consumed messages, and
a bucket read from its oldest message on."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import TypeVar

import msgspec
import nats.errors
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from jetcron.bus.connect import live_jsz, monitor_urls
from jetcron.bus.kv import drop_subscription, translate, value_of
from jetcron.wire import subjects as s
from jetcron.wire.codec import decode

T = TypeVar("T", bound=msgspec.Struct)

SERVER = "server"
"""The usage line of the server's JetStream store as a whole (its max_file_store)."""
OLDEST_BATCH = 256


class Usage(msgspec.Struct, frozen=True):
    stream: str
    """A stream's name (a bucket's is KV_<bucket>), or SERVER."""
    used: int
    """Bytes it holds (the server's: what its streams hold plus what the others have reserved)."""
    limit: int
    """Its max_bytes (the server's max_file_store); 0: no limit of its own."""
    messages: int = 0
    first_seq: int = 0

    @property
    def ratio(self) -> float:
        """The used share of its limit; 0 without a limit."""
        return self.used / self.limit if self.limit > 0 else 0.0


async def stream_usages(js: JetStreamContext, streams: Sequence[str]) -> list[Usage]:
    """Each stream's bytes against its max_bytes; one that does not exist (being made again) is left out."""
    found: list[Usage] = []
    for name in streams:
        try:
            info = await js.stream_info(name)
        except Exception as exc:
            if isinstance(exc, nats.js.errors.NotFoundError):
                continue
            raise translate(exc, f"usage of {name}") from exc
        found.append(Usage(stream=name, used=int(info.state.bytes or 0), limit=max(int(info.config.max_bytes or 0), 0),
                           messages=int(info.state.messages or 0), first_seq=int(info.state.first_seq or 0)))
    return found


async def server_usage(nats_url: str, monitor_url: str | None, streams: Sequence[Usage]) -> Usage | None:
    """The server's JetStream store from a monitor port's /jsz (None when none answers): a stream with its own
    max_bytes reserves all of it, so what is left to the others is the store less the reservations less what the
    streams without a limit hold."""
    live = await live_jsz(monitor_urls(nats_url, monitor_url))
    if live is None:
        return None
    jsz = live[1]
    limit = int(jsz.get("config", {}).get("max_storage") or 0)
    reserved = int(jsz.get("reserved_storage") or 0)
    in_reserved = sum(u.used for u in streams if u.limit > 0)
    used = reserved + max(0, int(jsz.get("storage") or 0) - in_reserved)
    return Usage(stream=SERVER, used=used, limit=limit)


async def remove_key(js: JetStreamContext, bucket: str, key: str) -> None:
    """Purge a key with every revision of it: no delete marker is left (a finished run's record let go)."""
    try:
        await js.purge_stream(s.kv_stream(bucket), subject=s.kv_subject(bucket, key))
    except Exception as exc:
        raise translate(exc, f"remove {bucket}/{key}") from exc


async def remove_output(js: JetStreamContext, run_id: str) -> None:
    """Purge every chunk of one run's output."""
    try:
        await js.purge_stream(s.STREAM_LOGS, subject=s.logs_filter(run_id))
    except Exception as exc:
        raise translate(exc, f"remove the output of {run_id}") from exc


async def purge_before(js: JetStreamContext, stream: str, seq: int) -> None:
    """Purge every message of `stream` below sequence `seq`."""
    try:
        await js.purge_stream(stream, seq=seq)
    except Exception as exc:
        raise translate(exc, f"purge {stream} below {seq}") from exc


async def oldest(js: JetStreamContext, bucket: str, kind: type[T], after: int = 0
                 ) -> AsyncIterator[tuple[str, T, int, int]]:
    """(key, value, stored size, stream sequence) of a history=1 bucket's records, the longest unwritten first (each
    stored message is its key's only one), from just after sequence `after` (0: the oldest) until the caller stops
    or the bucket's end; deletes and undecodable values are passed over."""
    subject = s.kv_subject(bucket, ">")
    prefix = s.kv_subject(bucket, "")
    start = (dict(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=after + 1) if after
             else dict(deliver_policy=DeliverPolicy.ALL))
    config = ConsumerConfig(ack_policy=AckPolicy.NONE, inactive_threshold=60.0, filter_subject=subject,
                            **start)
    try:
        sub = await js.pull_subscribe(subject, stream=s.kv_stream(bucket), config=config)
    except Exception as exc:
        raise translate(exc, f"read {bucket} from its oldest") from exc
    try:
        while True:
            try:
                msgs = await sub.fetch(OLDEST_BATCH, timeout=2)
            except (TimeoutError, nats.errors.TimeoutError):
                return
            for msg in msgs:
                if (data := value_of(msg.data, msg.headers)) is None:
                    continue
                with contextlib.suppress(msgspec.DecodeError):
                    yield (msg.subject[len(prefix):], decode(data, kind), len(data) + len(msg.subject),
                           int(msg.metadata.sequence.stream))
            if msgs and msgs[-1].metadata.num_pending == 0:
                return
    finally:
        await drop_subscription(js, sub)
