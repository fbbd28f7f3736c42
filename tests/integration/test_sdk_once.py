"""once(key): a job's own side effect happens once per key, and a full key store refuses rather than forgets."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import nats
import pytest
from nats.aio.msg import Msg
from nats.js.api import KeyValueConfig

from jetcron.bus.server import EmbeddedNats
from jetcron.bus.streams import ServerStreams
from jetcron.bus.topology import Limits, ensure_topology
from jetcron.core.errors import IdempotencyStoreFull, InvalidSpec
from jetcron.sdk.once import AlreadyClaimed, once, once_async
from jetcron.wire import subjects as s
from jetcron.wire.codec import encode
from jetcron_services.api.room import room


@pytest.fixture(autouse=True)
async def room_answered(nats_server: EmbeddedNats) -> AsyncIterator[None]:
    """The api's answer to once()'s question how full the key store is (jetcron_services.api.room), without the rest of
    the api: these tests make the store with limits of their own, which a whole api would raise to its settings."""
    nc = await nats.connect(nats_server.url)
    streams = ServerStreams(nc.jetstream(timeout=5))

    async def answer(msg: Msg) -> None:
        await msg.respond(encode(await room(streams)))

    await nc.subscribe(s.IDEM_ROOM_ALL, cb=answer)
    await nc.flush()
    yield
    await nc.close()


@pytest.fixture
async def topology(nats_server: EmbeddedNats) -> AsyncIterator[str]:
    nc = await nats.connect(nats_server.url)
    await ensure_topology(nc.jetstream(timeout=5))
    await nc.close()
    yield nats_server.url


async def test_the_effect_runs_for_the_first_caller_only(topology: str) -> None:
    effects: list[str] = []
    for attempt in (1, 2, 3):
        # Each attempt of one run asks with the run's idempotency key
        async with once_async("run:job.1:email", nats_url=topology) as first:
            if first:
                effects.append(f"email from attempt {attempt}")
    assert effects == ["email from attempt 1"]


async def test_a_failed_effect_releases_its_claim_so_a_later_attempt_does_it(topology: str) -> None:
    # Given an attempt whose effect raised
    with pytest.raises(RuntimeError, match="smtp down"):
        async with once_async("run:job.2:email", nats_url=topology) as first:
            assert first
            raise RuntimeError("smtp down")

    # Then the next attempt gets to do it
    async with once_async("run:job.2:email", nats_url=topology) as first:
        assert first


async def test_a_claim_in_progress_is_not_taken_by_another_attempt(topology: str) -> None:
    # Given an attempt holding the claim (its effect is under way)
    holding = asyncio.Event()
    release = asyncio.Event()

    async def slow_attempt() -> None:
        async with once_async("run:job.3:email", nats_url=topology) as first:
            assert first
            holding.set()
            await release.wait()

    task = asyncio.create_task(slow_attempt())
    await holding.wait()

    # Then a concurrent attempt is told so, rather than doing the effect a second time
    with pytest.raises(AlreadyClaimed, match="claimed by another attempt"):
        async with once_async("run:job.3:email", nats_url=topology):
            pytest.fail("the body must not run")
    release.set()
    await task


async def test_the_sync_form_works_from_a_plain_script(topology: str) -> None:
    done = []

    def script() -> None:  # a plain script's thread, while this loop answers for the api
        for _ in range(2):
            with once("run:job.4:report", nats_url=topology) as first:
                if first:
                    done.append(1)

    await asyncio.to_thread(script)
    assert done == [1]


async def test_a_full_key_store_refuses_new_keys_and_keeps_the_old_ones(nats_server: EmbeddedNats) -> None:
    # Given an idempotency bucket of 4 KiB (JETCRON_IDEMPOTENCY_MAX_BYTES)
    nc = await nats.connect(nats_server.url)
    try:
        await ensure_topology(nc.jetstream(timeout=5), limits=Limits(idempotency_bytes=4096))
    finally:
        await nc.close()

    # When keys are used until it is full
    effects: list[int] = []
    refused_at = None
    for n in range(200):
        try:
            async with once_async(f"run:job.{n}:email", nats_url=nats_server.url) as first:
                if first:
                    effects.append(n)
        except IdempotencyStoreFull as exc:
            refused_at = n
            assert "refusing new key" in str(exc)
            break
    assert refused_at is not None and refused_at > 3, "a 4 KiB bucket holds a few keys, not 200"

    # Then the refused key's effect did not run (the helper raised before the body), ...
    assert effects == list(range(refused_at))
    # ... and every old key is still remembered: a retry of an earlier run still skips its effect
    for n in (0, refused_at - 1):
        async with once_async(f"run:job.{n}:email", nats_url=nats_server.url) as first:
            assert not first, f"key {n} was forgotten to make room"


# The idempotency bucket's max_age used to be a day while once()'s default TTL is seven: the server cut every key at
# a day, and an attempt on day two repeated the effect. At a short scale (seconds for days): the bucket's max_age is
# now the longest TTL a key may ask for (JETCRON_IDEMPOTENCY_MAX_SECONDS), and a key lives its own TTL.
OLD_MAX_AGE = 2.0  # "a day"
KEY_TTL = 6.0  # "seven days"


async def _topology_keeping_keys(url: str, max_age: float) -> None:
    nc = await nats.connect(url)
    try:
        await ensure_topology(nc.jetstream(timeout=5), limits=Limits(idempotency_age=max_age))
    finally:
        await nc.close()


async def _effects_over(url: str, key: str, at: list[float]) -> list[float]:
    """Ask once(key, KEY_TTL) at each of the `at` seconds from now; the moments the effect ran."""
    ran: list[float] = []
    start = asyncio.get_running_loop().time()
    for moment in at:
        await asyncio.sleep(max(0.0, start + moment - asyncio.get_running_loop().time()))
        async with once_async(key, ttl=KEY_TTL, nats_url=url) as first:
            if first:
                ran.append(moment)
    return ran


async def test_a_done_key_is_kept_past_the_old_bucket_age_until_its_own_ttl(nats_server: EmbeddedNats) -> None:
    # Given the bucket keeps keys up to twice the key's TTL
    await _topology_keeping_keys(nats_server.url, max_age=2 * KEY_TTL)
    # When the same side effect is retried past the old cut (2 s) but inside its TTL (6 s)
    ran = await _effects_over(nats_server.url, "run:job.ttl:charge", [0.0, OLD_MAX_AGE + 1.5, KEY_TTL - 1.5])
    # Then it ran once
    assert ran == [0.0]


async def test_a_key_outlives_its_ttl_only_briefly_and_then_the_effect_may_run_again(
        nats_server: EmbeddedNats) -> None:
    # The other side: a key is not kept for ever (the server removes it after its TTL, within seconds)
    await _topology_keeping_keys(nats_server.url, max_age=2 * KEY_TTL)
    async with once_async("run:job.gone:charge", ttl=2, nats_url=nats_server.url) as first:
        assert first

    async def again() -> bool:
        async with once_async("run:job.gone:charge", ttl=2, nats_url=nats_server.url) as first:
            return first

    ran = False
    for _ in range(60):
        if ran := await again():
            break
        await asyncio.sleep(0.5)
    assert ran, "the key was never removed after its TTL"


async def test_a_ttl_longer_than_the_bucket_keeps_keys_is_refused_and_stores_nothing(
        nats_server: EmbeddedNats) -> None:
    # Given a bucket that keeps keys 6 s at most
    await _topology_keeping_keys(nats_server.url, max_age=KEY_TTL)
    # When once() asks for 7 s
    with pytest.raises(InvalidSpec, match=r"ttl: is longer than the idempotency store keeps a key \(6 s, "
                                          "JETCRON_IDEMPOTENCY_MAX_SECONDS\\)") as refused:
        async with once_async("run:job.long:charge", ttl=KEY_TTL + 1, nats_url=nats_server.url):
            pytest.fail("the effect must not run")
    assert refused.value.value == KEY_TTL + 1
    # Then no key was stored: a TTL that fits runs the effect
    async with once_async("run:job.long:charge", ttl=KEY_TTL, nats_url=nats_server.url) as first:
        assert first


async def test_the_old_bucket_age_cut_keys_short(nats_server: EmbeddedNats) -> None:
    # The defect this guards against, shown on the server: a bucket whose max_age is below the key's TTL removes
    # the key at its max_age (and ensure_room now refuses such a TTL before anything is stored).
    nc = await nats.connect(nats_server.url)
    try:
        js = nc.jetstream(timeout=5)
        await js.create_key_value(KeyValueConfig(bucket="old_idem", history=1, ttl=OLD_MAX_AGE))
        await js.publish(s.kv_subject("old_idem", "k"), b"done", headers={s.HDR_TTL: str(int(KEY_TTL))})

        async def gone() -> bool:
            state = (await js.stream_info("KV_old_idem")).state
            return not state.messages

        for _ in range(int(KEY_TTL * 10)):
            if await gone():
                break
            await asyncio.sleep(0.1)
        else:
            pytest.fail("a key outlived the bucket's max_age")
    finally:
        await nc.close()
