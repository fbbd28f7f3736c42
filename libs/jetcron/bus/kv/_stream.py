"""A bucket's stream read directly: a message's size and value, a subject's last value, the keys, a bound handle."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Mapping
from typing import Any

import nats.js.errors as jse
from nats.js import JetStreamContext
from nats.js.api import RawStreamMsg
from nats.js.kv import KeyValue

from jetcron.bus.kv._errors import translate
from jetcron.bus.natspy import api_prefix, connection_of, consumer_of, request_timeout
from jetcron.wire import subjects as s

DROP_TIMEOUT = 1.0
"""Seconds a watch that ends waits for the server to delete its consumer."""

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
    by jetcron.bus.topology without direct gets."""
    return KeyValue(name=bucket, stream=s.kv_stream(bucket), pre=s.kv_subject(bucket, ""), js=js, direct=False)
