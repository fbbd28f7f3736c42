"""Making the topology on a cluster that is still forming: transient refusals are retried until the
deadline, anything else is raised at once."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from functools import partial

import pytest
from nats.js.errors import BadRequestError, BucketNotFoundError, ServerError, ServiceUnavailableError

from jetcron.bus.topology import Limits, bucket_configs
from jetcron.bus.topology._ensure import _ensure_bucket, _until_answered
from jetcron.wire import subjects as s


def _failing(errors: list[Exception]) -> tuple[Callable[[], Awaitable[None]], list[int]]:
    calls = [0]

    async def step() -> None:
        calls[0] += 1
        if errors:
            raise errors.pop(0)

    return step, calls


def _no_peers() -> BadRequestError:
    return BadRequestError(code=400, err_code=10005, description="no suitable peers for placement, peer offline")


async def test_a_peer_not_known_yet_and_a_busy_meta_leader_are_retried() -> None:
    step, calls = _failing([_no_peers(), ServiceUnavailableError(code=503), _no_peers()])
    await _until_answered(step, asyncio.get_running_loop().time() + 5, delay=0.001)
    assert calls[0] == 4


async def test_a_store_not_made_while_another_service_made_the_same_stream_is_retried() -> None:
    racing = ServerError(code=500, err_code=10049, description="error creating store for stream")
    step, calls = _failing([racing])
    await _until_answered(step, asyncio.get_running_loop().time() + 5, delay=0.001)
    assert calls[0] == 2


async def test_any_other_refusal_is_raised_at_once() -> None:
    step, calls = _failing([BadRequestError(code=400, err_code=10058, description="stream name already in use")])
    with pytest.raises(BadRequestError, match="10058"):
        await _until_answered(step, asyncio.get_running_loop().time() + 5, delay=0.001)
    assert calls[0] == 1


async def test_a_refusal_that_lasts_past_the_deadline_is_raised() -> None:
    step, calls = _failing([_no_peers() for _ in range(1000)])
    with pytest.raises(BadRequestError, match="no suitable peers"):
        await _until_answered(step, asyncio.get_running_loop().time() + 0.05, delay=0.01)
    assert 2 <= calls[0] < 1000


class _Racing:
    """A cluster where another service made the fenced bucket a moment ago: the create says it is in use, and
    the node asked does not know the stream for `unseen` looks."""

    def __init__(self, unseen: int) -> None:
        self.unseen = unseen
        self.looks = 0

    async def key_value(self, bucket: str) -> object:
        self.looks += 1
        if self.looks <= self.unseen:
            raise BucketNotFoundError()
        return object()

    async def add_stream(self, config: object) -> None:
        raise BadRequestError(code=400, err_code=10058, description="stream name already in use")


async def test_a_fenced_bucket_made_by_another_and_not_yet_seen_is_looked_for_again() -> None:
    (config,) = [c for c in bucket_configs(1, Limits()) if c.bucket == s.BUCKET_LEASES]
    js = _Racing(unseen=3)
    step = partial(_ensure_bucket, js, config, [])
    await _until_answered(step, asyncio.get_running_loop().time() + 5, delay=0.001)
    # a look, the create in use, a look not finding it; again: a look, the create, a look that finds it
    assert js.looks == 4
