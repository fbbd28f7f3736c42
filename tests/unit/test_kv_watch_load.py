"""A KV watch (jetcron.bus.kv.Store.watch) that the server stops answering: it starts again from where it stands, for
ever, yielding nothing twice and skipping nothing; only a closed connection ends it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any, cast

import nats.errors
import nats.js.errors as jse
import pytest
from structlog.testing import capture_logs

from jetcron.bus.kv import Store
from jetcron.bus.kv import _watch as watch_module
from jetcron.core.lifecycle.retry import OUTAGE_TRIES
from jetcron.core.models import TenantPolicy
from jetcron.wire import subjects as s
from jetcron.wire.codec import encode

STREAM = s.kv_stream(s.BUCKET_TENANTS)


class Exhausted(BaseException):
    """Not an Exception, so that the watch does not take it for a fault to try again."""


class Bucket:
    """A bucket's stream as the server keeps it (one value per key), and the faults it is told to make: each a
    countdown of the calls (stream info, pulls, live deliveries) to answer before the next refusal."""

    def __init__(self) -> None:
        self.log: list[tuple[int, str, str | None]] = []
        """(sequence, key, tenant name or None for a delete marker): only each key's last message is kept."""
        self.seq = 0
        self.refuse_info = 0
        self.pulls_before_refusal: int | None = None
        self.live_before_refusal: int | None = None
        self.starts: list[int] = []
        """The sequence each live subscription was asked to start at."""
        self.closed = False

    def put(self, key: str, tenant: str | None = None) -> int:
        self.seq += 1
        self.log = [e for e in self.log if e[1] != key] + [(self.seq, key, tenant)]
        return self.seq

    def delete(self, key: str) -> int:
        return self.put(key, None)


def delivery(seq: int, key: str, tenant: str | None, pending: int = 0) -> Any:
    """A message of the bucket's stream as nats-py delivers it."""
    return SimpleNamespace(subject=s.kv_subject(s.BUCKET_TENANTS, key),
                           data=encode(TenantPolicy(tenant=tenant)) if tenant else b"",
                           headers=None if tenant else {"KV-Operation": "DEL"},
                           reply=f"$JS.ACK.{STREAM}.c.1.{seq}.{seq}.0.{pending}",
                           metadata=SimpleNamespace(sequence=SimpleNamespace(stream=seq), num_pending=pending))


class Pulls:
    """The load's consumer: the last message of every key, in stream order, one per pull."""

    def __init__(self, bucket: Bucket) -> None:
        self.bucket = bucket
        self.left = list(bucket.log)

    async def consumer_info(self) -> Any:
        return SimpleNamespace(num_pending=len(self.left))

    async def fetch(self, batch: int, timeout: float) -> list[Any]:
        if self.bucket.pulls_before_refusal == 0:
            self.bucket.pulls_before_refusal = None
            raise jse.ServiceUnavailableError()  # a consumer with no leader yet
        if self.bucket.pulls_before_refusal is not None:
            self.bucket.pulls_before_refusal -= 1
        seq, key, tenant = self.left.pop(0)
        return [delivery(seq, key, tenant, pending=len(self.left))]

    async def unsubscribe(self) -> None:
        pass


class Live:
    """The ordered consumer: every message from its start on, then it waits (the test ends the watch)."""

    def __init__(self, bucket: Bucket, start: int) -> None:
        self.bucket = bucket
        self.start = start

    async def messages(self) -> AsyncIterator[Any]:
        for seq, key, tenant in [e for e in self.bucket.log if e[0] >= self.start]:
            if self.bucket.live_before_refusal == 0:
                self.bucket.live_before_refusal = None
                raise nats.errors.TimeoutError()  # what a consumer lost under it looks like to next_msg
            if self.bucket.live_before_refusal is not None:
                self.bucket.live_before_refusal -= 1
            yield delivery(seq, key, tenant)
        raise Exhausted  # the watch asked for more than the test gave it

    async def unsubscribe(self) -> None:
        pass


class Js:
    def __init__(self, bucket: Bucket) -> None:
        self.bucket = bucket
        self._nc = SimpleNamespace(is_closed=False, is_connected=True)

    async def stream_info(self, stream: str) -> Any:
        assert stream == STREAM
        if self.bucket.refuse_info:
            self.bucket.refuse_info -= 1
            raise jse.ServiceUnavailableError()
        if self.bucket.closed:
            self._nc.is_closed = True
            raise nats.errors.ConnectionClosedError()
        return SimpleNamespace(state=SimpleNamespace(last_seq=self.bucket.seq))

    async def pull_subscribe(self, subject: str, **_: Any) -> Pulls:
        return Pulls(self.bucket)

    async def subscribe(self, subject: str, *, config: Any, **_: Any) -> Live:
        self.bucket.starts.append(config.opt_start_seq)
        return Live(self.bucket, config.opt_start_seq)


@pytest.fixture(autouse=True)
def no_pauses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watch_module, "outlasting_wait", lambda tries: 0.0)
    monkeypatch.setattr(watch_module, "in_order", lambda live: live.messages())


async def watched(bucket: Bucket, count: int, between: Any = None) -> list[tuple[str, str | None, int]]:
    """The first `count` items of a watch: (key, tenant or None, revision); `between(items)` runs after each."""
    store = Store(cast(Any, Js(bucket)), s.BUCKET_TENANTS, TenantPolicy)
    items: list[tuple[str, str | None, int]] = []
    watch = store.watch()
    async for key, value, revision in watch:
        items.append((key, value.tenant if value else None, revision))
        if between is not None:
            between(items)
        if len(items) == count:
            break
    await watch.aclose()
    return items


async def test_a_bucket_that_does_not_answer_past_an_election_is_waited_for_and_then_loaded() -> None:
    # Given two keys, and a stream that does not answer for twice the tries an election takes
    bucket = Bucket()
    bucket.put("acme", "acme"), bucket.put("globex", "globex")
    bucket.refuse_info = 2 * OUTAGE_TRIES
    # Then the watch keeps asking, saying so each time, and loads both once
    with capture_logs() as logs:
        assert await watched(bucket, 3) == [("acme", "acme", 1), ("globex", "globex", 2), ("", None, 0)]
    warnings = [e for e in logs if e["event"] == "watch not answered; trying again from where it stands"]
    assert [w["failures"] for w in warnings] == list(range(1, 2 * OUTAGE_TRIES + 1))
    assert warnings[0]["bucket"] == s.BUCKET_TENANTS and warnings[0]["loaded"] is False
    assert warnings[0]["error"] == ("watch jc_tenants: no server answered (503: a stream or consumer with no leader "
                                    "yet); retry later")


async def test_a_load_cut_short_starts_again_after_what_it_yielded_with_the_deletes_in_between() -> None:
    # Given three keys, and a load whose second pull is refused
    bucket = Bucket()
    for key in ("a", "b", "c"):
        bucket.put(key, key)
    bucket.pulls_before_refusal = 1

    def meanwhile(items: list[Any]) -> None:
        if len(items) == 1:  # a, yielded before the refusal, is deleted and c changes before the load starts again
            bucket.delete("a"), bucket.put("c", "c2")

    # Then the second load yields a's delete and the newer c, b once, and the live changes start after them
    assert await watched(bucket, 5, meanwhile) == [
        ("a", "a", 1), ("b", "b", 2), ("a", None, 4), ("c", "c2", 5), ("", None, 0)]
    assert bucket.starts == []


async def test_a_live_watch_cut_short_starts_again_after_the_last_change_it_saw() -> None:
    # Given a loaded watch of one key, then three changes, the live consumer failing after the first
    bucket = Bucket()
    bucket.put("a", "a")
    bucket.live_before_refusal = 1

    def meanwhile(items: list[Any]) -> None:
        if items[-1] == ("", None, 0):
            bucket.put("b", "b"), bucket.put("c", "c"), bucket.delete("b")

    # Then every change comes once, the second subscription starting after the one seen
    assert await watched(bucket, 4, meanwhile) == [("a", "a", 1), ("", None, 0), ("c", "c", 3), ("b", None, 4)]
    assert bucket.starts == [2, 4]


async def test_a_closed_connection_ends_the_watch() -> None:
    bucket = Bucket()
    bucket.closed = True
    with pytest.raises(nats.errors.ConnectionClosedError):
        await watched(bucket, 1)
