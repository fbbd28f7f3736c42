"""Publishing to JetStream (ports.Publisher): a Nats-Msg-Id on every command, trace context in headers, errors
translated."""

from __future__ import annotations

from typing import Any

from nats.js import JetStreamContext

from jetcron.bus.acks import publish_acked
from jetcron.bus.kv import translate
from jetcron.telemetry.tracing import inject_headers
from jetcron.wire import subjects as s
from jetcron.wire.codec import encode


async def publish(js: JetStreamContext, subject: str, message: Any, *, msg_id: str | None = None,
                  headers: dict[str, str] | None = None, ttl: int | None = None) -> int:
    """Publish and wait for the JetStream ack (durable before acknowledged); returns the stream sequence. `ttl`:
    whole seconds the server keeps the message (a run's event or output:
    jetcron.core.lifecycle.retention.stream_ttl)."""
    hdrs = inject_headers(dict(headers or {}))
    if msg_id is not None:
        hdrs[s.HDR_MSG_ID] = msg_id
    if ttl is not None:
        hdrs[s.HDR_TTL] = str(ttl)
    payload = message if isinstance(message, bytes) else encode(message)
    try:
        return await publish_acked(js, subject, payload, hdrs or None)
    except Exception as exc:
        raise translate(exc, f"publish {subject}") from exc


class StreamPublisher:
    """ports.Publisher on JetStream."""

    def __init__(self, js: JetStreamContext) -> None:
        self.js = js

    async def publish(self, subject: str, message: Any, *, msg_id: str | None = None,
                      headers: dict[str, str] | None = None, ttl: int | None = None) -> int:
        return await publish(self.js, subject, message, msg_id=msg_id, headers=headers, ttl=ttl)
