"""Reading an ordered consumer's push deliveries with less work per message than nats-py's iterators: the KV
watch and `rpc.tail` take every message through here."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import nats.errors


def stream_sequence(reply: str) -> int:
    """The stream sequence of a JetStream delivery, from its reply subject: `$JS.ACK.<stream>.<consumer>.
    <delivered>.<stream seq>...` (9 tokens), or with a domain and an account hash after `ACK` (12). It is what
    nats-py's `msg.metadata.sequence.stream` gives, without the frozen dataclasses and the datetime that
    `metadata` builds for each message (a twentieth of a busy watcher's CPU)."""
    tokens = reply.split(".")
    if len(tokens) < 9 or tokens[0] != "$JS" or tokens[1] != "ACK":
        raise ValueError(f"not a JetStream delivery: reply subject {reply!r}")
    return int(tokens[5] if len(tokens) == 9 else tokens[7])


def _delivered(live: Any) -> Any | None:
    """A message the server already delivered, taken as nats-py's `next_msg` takes it but without its task, timer
    and uuid per call (in a busy watch they were a tenth of the tracker's CPU, docs/benchmarks.md); None when none
    is waiting (then `next_msg` waits for the next)."""
    sub = live._sub
    try:
        msg = sub._pending_queue.get_nowait()
    except asyncio.QueueEmpty:
        return None
    sub._pending_size -= len(msg.data)
    sub._pending_queue.task_done()
    return msg


async def _answer_flow_control(live: Any) -> None:
    """What the push subscription's `next_msg` does after each message: answer the server's flow control once
    the messages before it are taken (an ordered consumer stalls without it)."""
    jsi = live._sub._jsi
    if jsi is None:
        return
    jsi._active = True
    if jsi._fcr and jsi.get_js_delivered() >= jsi._fciseq:
        reply, jsi._fcr = jsi._fcr, None
        await live._conn.publish(reply)


async def in_order(live: Any) -> AsyncIterator[Any]:
    """The messages of an ordered consumer's push subscription, for ever: those already delivered are taken at
    once (_delivered), and `next_msg` waits only when none is. (nats-py's `sub.messages` iterator costs a task
    and an asyncio.wait per message.)"""
    while True:
        if (msg := _delivered(live)) is None:
            try:
                msg = await live.next_msg(timeout=3600)
            except (TimeoutError, nats.errors.TimeoutError):
                continue
        else:
            await _answer_flow_control(live)
        yield msg
