"""once(key): a job's own side effect happens once per key, and a full key store refuses rather than forgets."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import nats
import pytest
from nats.js.api import KeyValueConfig, StorageType

from jetcron.bus.server import EmbeddedNats
from jetcron.bus.topology import ensure_topology
from jetcron.core.errors import IdempotencyStoreFull
from jetcron.sdk.once import AlreadyClaimed, once, once_async
from jetcron.wire import subjects as s


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


def test_the_sync_form_works_from_a_plain_script(topology: str) -> None:
    done = []
    for _ in range(2):
        with once("run:job.4:report", nats_url=topology) as first:
            if first:
                done.append(1)
    assert done == [1]


async def test_a_full_key_store_refuses_new_keys_and_keeps_the_old_ones(nats_server: EmbeddedNats) -> None:
    # Given an idempotency bucket of 4 KiB (created before the topology, which keeps an existing bucket as is)
    nc = await nats.connect(nats_server.url)
    try:
        js = nc.jetstream(timeout=5)
        await js.create_key_value(KeyValueConfig(bucket=s.BUCKET_IDEMPOTENCY, history=1, ttl=86400,
                                                 max_bytes=4096, storage=StorageType.FILE))
        await ensure_topology(js)
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
