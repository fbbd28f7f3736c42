"""A watch's first load of a bucket (bus/kv.Store._current) through pulls the server may not answer yet."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import nats.js.errors as jse
import pytest

from jetcron.bus import kv
from jetcron.bus.kv import Store
from jetcron.core.errors import Unavailable
from jetcron.core.models import TenantPolicy
from jetcron.core.retry import OUTAGE_TRIES
from jetcron.wire import subjects as s
from jetcron.wire.codec import encode


def message(seq: int, key: str, pending: int) -> Any:
    """A delivery of the bucket's stream at `seq`, as nats-py's pull subscription gives it."""
    return SimpleNamespace(subject=s.kv_subject(s.BUCKET_TENANTS, key), data=encode(TenantPolicy(tenant=key)),
                           headers=None, reply=f"$JS.ACK.KV_jc_tenants.c.1.{seq}.{seq}.0.{pending}",
                           metadata=SimpleNamespace(sequence=SimpleNamespace(stream=seq), num_pending=pending))


class Pulls:
    """A pull subscription whose first `refusals` fetches are refused as a consumer with no leader yet is (503)."""

    def __init__(self, refusals: int, messages: list[Any]) -> None:
        self.refusals = refusals
        self.messages = messages
        self.fetches = 0

    async def consumer_info(self) -> Any:
        return SimpleNamespace(num_pending=len(self.messages))

    async def fetch(self, batch: int, timeout: float) -> list[Any]:
        self.fetches += 1
        if self.fetches <= self.refusals:
            raise jse.ServiceUnavailableError()
        return self.messages

    async def unsubscribe(self) -> None:
        pass


class Js:
    def __init__(self, pulls: Pulls) -> None:
        self.pulls = pulls

    async def pull_subscribe(self, subject: str, **_: Any) -> Pulls:
        return self.pulls


async def load(pulls: Pulls) -> list[str]:
    js = cast(Any, Js(pulls))
    store = Store(js, s.BUCKET_TENANTS, TenantPolicy)
    return [key async for key, _, _ in store._current(js, s.kv_subject(s.BUCKET_TENANTS, ">"), snapshot=2)]


@pytest.fixture(autouse=True)
def no_pauses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kv, "outage_wait", lambda tries: 0.0)


async def test_pulls_not_answered_yet_are_asked_again_and_the_load_completes() -> None:
    # Given a bucket of two keys whose new consumer refuses the first three pulls (no leader yet)
    pulls = Pulls(3, [message(1, "acme", 1), message(2, "globex", 0)])
    # Then the watch's load asks again and yields both, in order
    assert await load(pulls) == ["acme", "globex"]
    assert pulls.fetches == 4


async def test_a_consumer_that_never_answers_ends_the_load_saying_so() -> None:
    pulls = Pulls(100, [message(1, "acme", 0)])
    with pytest.raises(Unavailable) as refused:
        await load(pulls)
    assert str(refused.value) == ("watch jc_tenants: no server answered (503: a stream or consumer with no leader "
                                  "yet); retry later")
    assert pulls.fetches == OUTAGE_TRIES  # each a stream leader election's worth of waits apart (core/retry)
