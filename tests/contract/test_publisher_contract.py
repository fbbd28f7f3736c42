"""ports.Publisher: what jetcron.bus.publish.StreamPublisher does on a real stream and memory.MemoryPublisher must do
the same: sequences in order, a struct stored encoded and bytes as they are, a message id storing a retry once, the
headers and TTL kept."""

from __future__ import annotations

from contract_support import Item, PublisherSide

from jetcron.wire.codec import encode


async def test_each_message_is_stored_in_order_a_struct_encoded_and_bytes_as_they_are(
        publisher_side: PublisherSide) -> None:
    publisher, subject = publisher_side.publisher, publisher_side.subject
    first = await publisher.publish(f"{subject}.a", Item("a", 1))
    second = await publisher.publish(f"{subject}.b", b"raw bytes")
    assert second == first + 1
    assert (await publisher_side.stored(first))[:2] == (f"{subject}.a", encode(Item("a", 1)))
    assert (await publisher_side.stored(second))[:2] == (f"{subject}.b", b"raw bytes")


async def test_a_retry_with_the_same_message_id_is_stored_once_and_answered_with_its_sequence(
        publisher_side: PublisherSide) -> None:
    publisher, subject = publisher_side.publisher, publisher_side.subject
    seq = await publisher.publish(f"{subject}.place", Item("r1"), msg_id="r1:1:place")
    assert await publisher.publish(f"{subject}.place", Item("r1"), msg_id="r1:1:place") == seq
    # Another id is another message, even with the same body
    other = await publisher.publish(f"{subject}.place", Item("r1"), msg_id="r1:1:place1")
    assert other == seq + 1 and await publisher_side.count() == 2


async def test_headers_and_the_ttl_are_kept_with_the_message(publisher_side: PublisherSide) -> None:
    publisher, subject = publisher_side.publisher, publisher_side.subject
    seq = await publisher.publish(f"{subject}.log", b"line\n", headers={"Jc-Stream": "stdout"}, ttl=60,
                                  msg_id="r1:1:log1")
    _, data, headers = await publisher_side.stored(seq)
    assert data == b"line\n"
    assert {k: headers.get(k) for k in ("Jc-Stream", "Nats-TTL", "Nats-Msg-Id")} == {
        "Jc-Stream": "stdout", "Nats-TTL": "60", "Nats-Msg-Id": "r1:1:log1"}
