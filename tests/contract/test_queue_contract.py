"""A work queue's delivery contract (consume.PullQueue on a real stream, memory.MemoryQueue), and settle()'s
mapping of handler outcomes onto it."""

from __future__ import annotations

import pytest
from contract_support import ACK_WAIT, Queue

from jetcron.bus.consume import Drop, Hold, Retry, settle
from jetcron.bus.ports import Message


async def _nothing_within(queue: Queue, seconds: float) -> None:
    with pytest.raises(TimeoutError):
        await queue.fetch(1, timeout=seconds)


async def test_messages_come_oldest_first_once_each(queue: Queue) -> None:
    seqs = [await queue.publish(f"{queue.subject}.{i}", f"m{i}".encode()) for i in range(3)]
    assert seqs == sorted(seqs)
    got = await queue.fetch(10, timeout=2)
    assert [m.data for m in got] == [b"m0", b"m1", b"m2"]
    assert [m.metadata.sequence.stream for m in got] == seqs
    assert {m.metadata.num_delivered for m in got} == {1}
    for m in got:
        await m.ack()
    await _nothing_within(queue, ACK_WAIT + 0.5)


async def test_a_message_id_is_stored_once(queue: Queue) -> None:
    first = await queue.publish(f"{queue.subject}.a", b"x", msg_id="same")
    assert await queue.publish(f"{queue.subject}.a", b"x", msg_id="same") == first
    got = await queue.fetch(10, timeout=2)
    assert [m.data for m in got] == [b"x"]
    await got[0].ack()
    await _nothing_within(queue, 0.3)


async def test_nak_with_delay_redelivers_after_it_counting_deliveries(queue: Queue) -> None:
    await queue.publish(f"{queue.subject}.a", b"x")
    (m,) = await queue.fetch(1, timeout=2)
    await m.nak(delay=0.6)
    await _nothing_within(queue, 0.2)
    (again,) = await queue.fetch(1, timeout=3)
    assert again.data == b"x" and again.metadata.num_delivered == 2
    await again.ack()


async def test_term_is_never_redelivered(queue: Queue) -> None:
    await queue.publish(f"{queue.subject}.a", b"x")
    (m,) = await queue.fetch(1, timeout=2)
    await m.term()
    await _nothing_within(queue, ACK_WAIT + 0.5)


async def test_an_unacked_message_comes_back_after_ack_wait(queue: Queue) -> None:
    await queue.publish(f"{queue.subject}.a", b"x")
    (m,) = await queue.fetch(1, timeout=2)
    (again,) = await queue.fetch(1, timeout=ACK_WAIT + 3)
    assert again.metadata.sequence.stream == m.metadata.sequence.stream
    assert again.metadata.num_delivered == 2
    await again.ack()


@pytest.mark.parametrize(("outcome", "back_within"), [
    (None, None),           # handled: acked, gone
    (Drop("bad payload"), None),    # terminated, gone
    (Retry(0.3), 2.0),      # nak'd with its delay: back soon
    (Hold(), ACK_WAIT + 3),         # left in progress: back after ack_wait unless the handler acks it
])
async def test_settle_maps_handler_outcomes_onto_the_queue(queue: Queue, outcome: Exception | None,
                                                           back_within: float | None) -> None:
    await queue.publish(f"{queue.subject}.a", b"x")
    (m,) = await queue.fetch(1, timeout=2)

    async def handler(msg: Message) -> None:
        if outcome is not None:
            raise outcome

    await settle(m, handler)
    if back_within is None:
        await _nothing_within(queue, ACK_WAIT + 0.5)
    else:
        (again,) = await queue.fetch(1, timeout=back_within)
        assert again.metadata.num_delivered == 2
        await again.ack()
