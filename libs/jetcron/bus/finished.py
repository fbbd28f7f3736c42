"""Finished runs per minute (jc_finished, jetcron.core.lifecycle.finished) read by time: the last hour in two
requests."""

from __future__ import annotations

import contextlib
from datetime import datetime, timedelta

import msgspec

from jetcron.bus.ports import Streams
from jetcron.core.lifecycle.finished import FinishedMinute, minute_of, parse_stamp
from jetcron.wire import subjects as s
from jetcron.wire.codec import decode

READ_SLACK = timedelta(minutes=5)
"""The read starts this long before the first minute asked for. Each minute's record is last written at or after
its minute by the tracker's clock, and stamped by the server's: a tracker clock ahead of the server's would
otherwise hide the newest minutes."""
MAX_RECORDS = 20_000
"""At most this many records are read (a day of minutes is 1,440 per scope)."""


async def read_minutes(streams: Streams, tenant: str | None, since: datetime, *,
                       written_since: datetime | None = None) -> list[FinishedMinute]:
    """The records of the minutes from `since` on, the cluster's (tenant None) or one tenant's, oldest first.
    `written_since`: the server time the read starts from (default READ_SLACK before `since`); a benchmark that
    wrote days of minutes in a few seconds names its own. A record's one message is its last write, so the
    minutes written before are skipped by the server, not read."""
    first = minute_of(since)
    msgs, _more = await streams.written_since(
        s.kv_stream(s.BUCKET_FINISHED), s.kv_subject(s.BUCKET_FINISHED, s.finished_filter(tenant)),
        written_since or first - READ_SLACK, MAX_RECORDS)
    by_minute: dict[datetime, FinishedMinute] = {}
    prefix = s.kv_subject(s.BUCKET_FINISHED, "")
    for msg in msgs:
        if not msg.data:
            continue  # a key deleted by hand
        at = parse_stamp(s.parse_finished_key(msg.subject[len(prefix):])[1])
        if at is None or at < first:
            continue
        with contextlib.suppress(msgspec.DecodeError, msgspec.ValidationError):
            by_minute[at] = decode(msg.data, FinishedMinute)
    return [by_minute[at] for at in sorted(by_minute)]
