"""The one module that reads or writes nats-py's private attributes. Each need has a function here that says why
the public API does not serve it; the rest of bus uses nats-py's public API only.

tests/unit/test_natspy.py builds nats-py's own objects without a server and fails when the installed nats-py no
longer has one of these names, or gives it another type; pyproject.toml pins nats-py to the minor release that
test passed on, so a new release comes in only by raising the pin and running it.
"""

from __future__ import annotations

import asyncio
from typing import Any

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.kv import _is_key_valid


def server_info(nc: Client) -> dict[str, Any]:
    """The INFO block the server last sent: its `version` as sent, and the cluster's `connect_urls` as advertised.
    nats-py keeps both but publishes neither as such: `connected_server_version` rebuilds the version (0.0.0-unknown
    when there is none) and the server pool mixes the advertised URLs with those given and found before."""
    info: dict[str, Any] = nc._server_info
    return info


def connection_of(js: JetStreamContext) -> Client:
    """The connection a JetStream context sends on. The leaner ack wait (acks.py) and the pull queue (consume.py)
    publish and subscribe on it themselves; the context does not expose it."""
    nc: Client = js._nc
    return nc


def request_timeout(js: JetStreamContext) -> float:
    """The seconds a JetStream context waits for an answer (its `timeout`): the leaner ack wait keeps to what
    `js.publish` would wait."""
    return float(js._timeout)


def api_prefix(js: JetStreamContext) -> str:
    """The JetStream API's subject prefix (`$JS.API`, or `$JS.<domain>.API`): the pull queue sends its pull
    requests itself, to `<prefix>.CONSUMER.MSG.NEXT.<stream>.<consumer>`."""
    prefix: str = js._prefix
    return prefix


def valid_key(key: str) -> bool:
    """Whether nats-py's KeyValue takes `key` as a key: kv.Store writes by publishing, and refuses what nats-py's
    own put would refuse (nats-py has no public name for the check)."""
    return bool(_is_key_valid(key))


def consumer_of(sub: Any) -> tuple[str, str] | None:
    """(stream, consumer) behind a JetStream push or pull subscription, None for another subscription. nats-py
    knows them but gives them only through `consumer_info()`, a request to the server: a watch that ends deletes
    its consumer by name without first asking a server that may not answer."""
    stream, consumer = getattr(sub, "_stream", None), getattr(sub, "_consumer", None)
    return (stream, consumer) if stream and consumer else None


def take_delivered(live: JetStreamContext.PushSubscription) -> Msg | None:
    """A message the server already delivered to a push subscription, taken as nats-py's `next_msg` takes it but
    without its task, timer and uuid per call (in a busy watch they were a tenth of the tracker's CPU,
    docs/benchmarks-history.md); None when none is waiting (then `next_msg` waits for the next)."""
    sub = live._sub
    try:
        msg: Msg = sub._pending_queue.get_nowait()
    except asyncio.QueueEmpty:
        return None
    sub._pending_size -= len(msg.data)
    sub._pending_queue.task_done()
    return msg


async def answer_flow_control(live: JetStreamContext.PushSubscription) -> None:
    """What the push subscription's `next_msg` does after each message: answer the server's flow control once
    the messages before it are taken (an ordered consumer stalls without it)."""
    jsi: Any = live._sub._jsi  # nats-py leaves its methods untyped
    if jsi is None:
        return
    jsi._active = True
    if jsi._fcr and jsi.get_js_delivered() >= jsi._fciseq:
        reply, jsi._fcr = jsi._fcr, None
        await live._conn.publish(reply)
