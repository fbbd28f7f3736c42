"""once()'s claim (jetcron.sdk.once.claim_key) on the twins of the idempotency bucket: a claim whose write landed while
its acknowledgement was lost is found again by its own nonce, not left to block every later attempt."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from jetcron.bus.idempotency import IdempotencyKeys, KeyRecord
from jetcron.bus.memory import MemoryPublisher, MemoryStreams
from jetcron.core.errors import Unavailable
from jetcron.sdk import once as once_module
from jetcron.sdk.once import claim_key
from jetcron.wire import subjects as s

AT = datetime(2026, 12, 5, tzinfo=UTC)


class AckLost(MemoryPublisher):
    """Stores each write, then says the storage did not answer for the first `lost` of them (the ack was lost)."""

    def __init__(self, streams: MemoryStreams, lost: int) -> None:
        super().__init__(streams)
        self.lost = lost

    async def publish(self, subject: str, data: Any, **kw: Any) -> int:
        seq = await super().publish(subject, data, **kw)
        if self.lost > 0:
            self.lost -= 1
            raise Unavailable(f"publish {subject}: storage did not answer (TimeoutError); outcome unknown, retry")
        return seq


def _keys(lost: int) -> IdempotencyKeys:
    streams = MemoryStreams(lambda: AT)
    streams.add(s.kv_stream(s.BUCKET_IDEMPOTENCY), [s.kv_subject(s.BUCKET_IDEMPOTENCY, ">")], per_subject=1)
    return IdempotencyKeys(AckLost(streams, lost), streams)


@pytest.fixture(autouse=True)
def _no_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(once_module, "OWN_CLAIM_READS", (0.0, 0.0))


async def test_a_claim_whose_ack_was_lost_is_found_by_its_nonce_and_held() -> None:
    keys = _keys(lost=1)
    mine = KeyRecord(state="claimed", at=AT, owner="n1")
    revision = await claim_key(keys, "once.k", mine, 600, None)
    stored = await keys.get("once.k")
    assert stored is not None and revision == stored[1] and stored[0].owner == "n1"
    # Another attempt's claim with another nonce finds it claimed, as before
    assert await claim_key(keys, "once.k", KeyRecord(state="claimed", at=AT, owner="n2"), 600, None) is None


async def test_a_claim_that_did_not_land_still_fails_as_it_said() -> None:
    # Given a key claimed by another attempt, and our write of it not stored while the storage does not answer
    keys = _keys(lost=0)
    assert await claim_key(keys, "once.k", KeyRecord(state="claimed", at=AT, owner="other"), 600, None)
    keys.publisher = Down()
    # Then the stored claim is not ours: the write's own error is raised, nothing is taken
    with pytest.raises(Unavailable, match="outcome unknown"):
        await claim_key(keys, "once.k", KeyRecord(state="claimed", at=AT, owner="mine"), 600, None)
    stored = await keys.get("once.k")
    assert stored is not None and stored[0].owner == "other"


class Down(MemoryPublisher):
    async def publish(self, subject: str, data: Any, **kw: Any) -> int:
        raise Unavailable(f"publish {subject}: storage did not answer (TimeoutError); outcome unknown, retry")
