"""The topology check: the streams, buckets and durable consumers the server no longer has."""

from __future__ import annotations

import json

from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError, ServiceUnavailableError

from jetcron.bus.topology._layout import consumer_configs, stream_names
from jetcron.wire import subjects as s


async def stream_names_on_server(nc: Client) -> set[str]:
    """The names of every stream of the account ($JS.API.STREAM.NAMES, a page of 1024 at a time)."""
    have: set[str] = set()
    while True:
        reply = await nc.request(s.JS_STREAM_NAMES, json.dumps({"offset": len(have)}).encode(), timeout=5)
        body = json.loads(reply.data)
        if "error" in body:
            raise ServiceUnavailableError(description=str(body["error"]))
        page = body.get("streams") or []
        have.update(page)
        if not page or len(have) >= int(body.get("total", 0)):
            return have


async def missing_parts(nc: Client, js: JetStreamContext) -> list[str]:
    """The streams, buckets and durable consumers of the topology the server no longer has (an operator or a
    script deleted them): `STREAM` or `STREAM/CONSUMER`. Empty when everything is there."""
    have = await stream_names_on_server(nc)
    missing = [name for name in stream_names() if name not in have]
    for stream, consumer in consumer_configs():
        if stream not in have:
            continue  # the stream's own entry says it; its consumers went with it
        try:
            await js.consumer_info(stream, consumer.durable_name or "")
        except NotFoundError:
            missing.append(f"{stream}/{consumer.durable_name}")
    return missing
