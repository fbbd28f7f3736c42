"""What a run's own credential reads (jetcron.auth.roles.job_template): messages by their subject, never by sequence.

A job's credential may ask `$JS.API.DIRECT.GET.<stream>.<subject>` for the subjects of its own tenant and run only:
the server checks the subject in the request's own subject, so the permission confines the read. The other forms
(`STREAM.MSG.GET`, a direct get whose subject is in the body, stream info with a subject filter) would read any
message or list every key, and a job's credential may use none of them.
"""

from __future__ import annotations

from datetime import datetime

from jetcron.bus.handles import Connection
from jetcron.bus.kv import translate, value_of
from jetcron.bus.ports import Stored, StreamState
from jetcron.core.errors import Unavailable
from jetcron.wire import subjects as s
from jetcron.wire.codec import decode
from jetcron.wire.messages import IdempotencyRoom

_NOT_FOUND = "404"
_HDR_SEQUENCE = "Nats-Sequence"
_HDR_TIME = "Nats-Time-Stamp"
_SERVER_HEADERS = ("Nats-Stream", "Nats-Subject", _HDR_SEQUENCE, _HDR_TIME, "Nats-Num-Pending", "Nats-Last-Sequence")


async def last_by_subject(nc: Connection, stream: str, subject: str, *, timeout: float) -> Stored | None:
    """The last message on `subject` (a literal subject) when it gives a value (kv.value_of); None when there is
    none. The stream must allow direct gets."""
    try:
        reply = await nc.request(f"$JS.API.DIRECT.GET.{stream}.{subject}", b"", timeout=timeout)
    except Exception as exc:
        raise translate(exc, f"read {stream} {subject}") from exc
    headers = dict(reply.headers or {})
    status = headers.get("Status", "")
    if status == _NOT_FOUND:
        return None
    if status:
        raise Unavailable(f"read {stream} {subject}: server answered {status} {headers.get('Description', '')}")
    data = value_of(reply.data, headers)
    if data is None:
        return None
    own = {k: v for k, v in headers.items() if k not in _SERVER_HEADERS}
    return Stored(data=data, seq=int(headers.get(_HDR_SEQUENCE, "0")), time=_stamp(headers.get(_HDR_TIME, "")),
                  headers=own or None)


def _stamp(text: str) -> datetime | None:
    # The server writes RFC 3339 with nanoseconds; Python reads microseconds at most.
    if not text:
        return None
    head, _, rest = text.partition(".")
    fraction = "".join(c for c in rest if c.isdigit())[:6]
    zone = rest[len(rest.rstrip("Z")):] or "+00:00"
    try:
        return datetime.fromisoformat(f"{head}.{fraction or '0'}{'+00:00' if zone == 'Z' else zone}")
    except ValueError:
        return None


class ScopedReads:
    """Reads for once() on a run's own credential: keys by subject, and the idempotency bucket's fill as the api
    tells it (a job may not read the bucket's stream info). The part of ports.Streams that IdempotencyKeys uses."""

    def __init__(self, nc: Connection, tenant: str, *, timeout: float) -> None:
        self.nc = nc
        self.tenant = tenant
        self.timeout = timeout

    async def last(self, stream: str, subject: str) -> Stored | None:
        return await last_by_subject(self.nc, stream, subject, timeout=self.timeout)

    async def state(self, stream: str) -> StreamState:
        if stream != s.kv_stream(s.BUCKET_IDEMPOTENCY):
            raise ValueError(f"a run's credential reads the state of {s.kv_stream(s.BUCKET_IDEMPOTENCY)} only, "
                             f"not {stream}")
        try:
            # Twice the timeout of a read: the question crosses two clients' links each way (the job's and the
            # api's), so the same margin over a slow link needs twice the time.
            reply = await self.nc.request(s.idem_room_subject(self.tenant), b"", timeout=2 * self.timeout)
        except Exception as exc:
            raise translate(exc, "the idempotency store's room (asked of the api)") from exc
        room = decode(reply.data, IdempotencyRoom)
        if room.error:
            raise Unavailable(f"the idempotency store's room: {room.error}")
        return StreamState(messages=0, bytes=room.bytes, first_seq=0, last_seq=0, max_bytes=room.max_bytes,
                           max_age=room.max_age)
