"""Reading an ordered consumer's push deliveries with less work per message than nats-py's iterators: the KV
watch and `ServerStreams.tail` take every message through here."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import nats.errors

from jetcron.bus.natspy import answer_flow_control, take_delivered


def stream_sequence(reply: str) -> int:
    """The stream sequence of a JetStream delivery, from its reply subject: `$JS.ACK.<stream>.<consumer>.
    <delivered>.<stream seq>...` (9 tokens), or with a domain and an account hash after `ACK` (12). It is what
    nats-py's `msg.metadata.sequence.stream` gives, without the frozen dataclasses and the datetime that
    `metadata` builds for each message (a twentieth of a busy watcher's CPU)."""
    tokens = reply.split(".")
    if len(tokens) < 9 or tokens[0] != "$JS" or tokens[1] != "ACK":
        raise ValueError(f"not a JetStream delivery: reply subject {reply!r}")
    return int(tokens[5] if len(tokens) == 9 else tokens[7])


async def in_order(live: Any) -> AsyncIterator[Any]:
    """The messages of an ordered consumer's push subscription, for ever: those already delivered are taken at
    once (natspy.take_delivered), and `next_msg` waits only when none is. (nats-py's `sub.messages` iterator costs
    a task and an asyncio.wait per message.)"""
    while True:
        if (msg := take_delivered(live)) is None:
            try:
                msg = await live.next_msg(timeout=3600)
            except (TimeoutError, nats.errors.TimeoutError):
                continue
        else:
            await answer_flow_control(live)
        yield msg
