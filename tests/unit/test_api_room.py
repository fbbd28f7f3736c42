"""The api's answer to once()'s "how full is the key store": from its last reading while young, so that a job's
question never waits on the api's own round trip to the stream leader (a slow link would time the job out)."""

from __future__ import annotations

import asyncio

from jetcron.bus.ports import StreamState
from jetcron.core.errors import Unavailable
from jetcron_services.api.room import FRESH, STALE, RoomGauge


class SlowStreams:
    """A stream whose state() answers only when the test lets it, counting the readings."""

    def __init__(self) -> None:
        self.reads = 0
        self.fill = 100
        self.fail = False
        self.gate = asyncio.Event()
        self.gate.set()

    async def state(self, stream: str) -> StreamState:
        self.reads += 1
        await self.gate.wait()
        if self.fail:
            raise Unavailable("stream info timed out")
        return StreamState(messages=1, bytes=self.fill, first_seq=1, last_seq=1, max_bytes=10_000, max_age=60.0)


class Ticks:
    def __init__(self) -> None:
        self.at = 1000.0

    def __call__(self) -> float:
        return self.at


async def test_questions_within_a_second_are_answered_from_one_reading() -> None:
    streams, ticks = SlowStreams(), Ticks()
    gauge = RoomGauge(streams, ticks)  # type: ignore[arg-type]
    answers = [await gauge.answer() for _ in range(50)]
    ticks.at += FRESH / 2
    answers.append(await gauge.answer())
    assert streams.reads == 1
    assert {(a.bytes, a.max_bytes, a.max_age, a.error) for a in answers} == {(100, 10_000, 60.0, "")}


async def test_a_young_reading_is_answered_at_once_while_a_fresh_one_is_taken() -> None:
    streams, ticks = SlowStreams(), Ticks()
    gauge = RoomGauge(streams, ticks)  # type: ignore[arg-type]
    await gauge.answer()
    # Given a reading past FRESH but within STALE, and a stream leader that does not answer yet
    ticks.at += FRESH + 0.5
    streams.gate.clear()
    streams.fill = 700
    # When jobs ask, they get the last reading without waiting, and one new reading is under way for all of them
    first = await asyncio.wait_for(gauge.answer(), 1)
    second = await asyncio.wait_for(gauge.answer(), 1)
    assert (first.bytes, second.bytes, streams.reads) == (100, 100, 2)
    # Then once it lands, the next question gets it
    streams.gate.set()
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert (await gauge.answer()).bytes == 700
    assert streams.reads == 2


async def test_an_old_reading_is_not_answered_the_question_waits_for_a_new_one() -> None:
    streams, ticks = SlowStreams(), Ticks()
    gauge = RoomGauge(streams, ticks)  # type: ignore[arg-type]
    await gauge.answer()
    ticks.at += STALE
    streams.fill = 9_990
    assert (await gauge.answer()).bytes == 9_990
    assert streams.reads == 2


async def test_a_failed_reading_is_told_to_those_who_waited_and_never_kept() -> None:
    streams, ticks = SlowStreams(), Ticks()
    gauge = RoomGauge(streams, ticks)  # type: ignore[arg-type]
    streams.fail = True
    failed = await gauge.answer()
    assert failed.error == "stream info timed out"
    streams.fail = False
    assert (await gauge.answer()).error == ""
    assert streams.reads == 2
