"""ports.Rpc: request/reply and one-way messages as jetcron.bus.rpc.NatsRpc gives them on a real server and
memory.MemoryRpc must give them too: an answer, no responders, no answer in time (each a NoAnswer naming the
subject and why), one member of a queue group per request, and a notice to whoever serves its subject."""

from __future__ import annotations

import asyncio
import itertools

import pytest
from harness import wait_for

from jetcron.bus.ports import Handler, Message, Request, Rpc
from jetcron.bus.rpc import NoAnswer

subjects = (f"ct.rpc{n}" for n in itertools.count(1))


async def first_answer(asker: Rpc, subject: str, data: bytes) -> Request:
    """The first reply once the subscription is known: a server under load was seen to answer "no responders"
    to a request sent right after another connection's flushed subscribe, so the first ask may be repeated."""
    reply: Request = await wait_for(lambda: asker.request(subject, data, timeout=5), 10, ignore=(NoAnswer,),
                                    what=f"an answer on {subject}")
    return reply


async def once_heard(asker: Rpc, subject: str, data: bytes, timeout: float) -> NoAnswer | Request:
    """A request's outcome once the subscription is known (asked again while the answer is "no responders", as
    first_answer does): its reply, or the NoAnswer it ended in."""
    async def ask() -> NoAnswer | Request | None:
        try:
            return await asker.request(subject, data, timeout=timeout)
        except NoAnswer as exc:
            return exc if exc.responders else None

    outcome: NoAnswer | Request = await wait_for(ask, 10, what=f"a subscriber on {subject}")
    return outcome


async def test_a_request_gets_the_answer_of_the_one_serving_its_subject(rpc_pair: tuple[Rpc, Rpc]) -> None:
    asker, answerer = rpc_pair
    subject = next(subjects)

    async def echo(msg: Message) -> None:
        await msg.respond(b"re: " + msg.data)

    served = await answerer.serve(f"{subject}.*", echo, flush=True)
    reply = await first_answer(asker, f"{subject}.a", b"hello")
    assert reply.data == b"re: hello"
    # A subject nobody serves has no responders
    with pytest.raises(NoAnswer, match=rf"^{subject}x\.a: no responders$") as nobody:
        await asker.request(f"{subject}x.a", b"hello", timeout=5)
    assert nobody.value.responders is False
    # Once unsubscribed, it answers no more
    await served.unsubscribe()
    await answerer.flush()
    with pytest.raises(NoAnswer, match=rf"^{subject}\.a: no "):
        await asker.request(f"{subject}.a", b"hello", timeout=1)


async def test_a_served_request_that_gets_no_answer_in_time_says_so(rpc_pair: tuple[Rpc, Rpc]) -> None:
    asker, answerer = rpc_pair
    subject = next(subjects)

    async def silent(msg: Message) -> None:
        return None

    await answerer.serve(subject, silent, flush=True)
    late = await once_heard(asker, subject, b"?", timeout=0.3)
    assert isinstance(late, NoAnswer) and late.responders is True
    assert str(late) == f"{subject}: no answer within 0.3s"


async def test_one_member_of_a_queue_group_answers_each_request(rpc_pair: tuple[Rpc, Rpc]) -> None:
    asker, answerer = rpc_pair
    subject = next(subjects)
    asked: list[str] = []

    def member(name: str) -> object:
        async def handle(msg: Message) -> None:
            asked.append(name)
            await msg.respond(name.encode())
        return handle

    for name in ("one", "two"):
        await answerer.serve(subject, member(name), queue="q", flush=True)  # type: ignore[arg-type]
    replies = [(await first_answer(asker, subject, b"?")).data]
    replies += [(await asker.request(subject, b"?", timeout=5)).data for _ in range(5)]
    assert len(asked) == 6 and all(reply in (b"one", b"two") for reply in replies)


async def test_a_notice_reaches_whoever_serves_its_subject(rpc_pair: tuple[Rpc, Rpc]) -> None:
    asker, answerer = rpc_pair
    subject = next(subjects)
    got: asyncio.Queue[bytes] = asyncio.Queue()

    async def take(msg: Message) -> None:
        await got.put(msg.data)

    await answerer.serve(subject, take, flush=True)
    await asker.notify(f"{subject}.elsewhere", b"nobody listens")  # gone, and no error
    # A notice is at most once (a lost one is covered by the lease it stands for): sent until one lands
    for _ in range(20):
        await asker.notify(subject, b"cancel r1")
        await asker.flush()
        try:
            assert await asyncio.wait_for(got.get(), 0.5) == b"cancel r1"
            break
        except TimeoutError:
            continue
    else:
        raise AssertionError("no notice reached the subscriber in 20 tries")


async def test_a_service_answers_each_of_its_endpoints_until_stopped(rpc_pair: tuple[Rpc, Rpc]) -> None:
    asker, answerer = rpc_pair
    subject = next(subjects)

    def answer(word: bytes) -> Handler:
        async def handle(msg: Request) -> None:
            await msg.respond(word + b": " + msg.data)
        return handle

    service = await answerer.endpoints(name="ct_service", version="1.0.0", description="a test", queue="ct_q",
                                       endpoints=[("one", f"{subject}.one", answer(b"one")),
                                                  ("two", f"{subject}.two", answer(b"two"))])
    assert answerer.connected and asker.connected
    assert (await first_answer(asker, f"{subject}.one", b"a")).data == b"one: a"
    assert (await first_answer(asker, f"{subject}.two", b"b")).data == b"two: b"
    await service.stop()
    await answerer.flush()
    with pytest.raises(NoAnswer, match=rf"^{subject}\.one: no "):
        await asker.request(f"{subject}.one", b"a", timeout=1)
