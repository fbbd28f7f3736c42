"""once()'s claim and commit (jetcron.sdk.once.claim_key, commit_key) on the twins of the idempotency bucket: a claim
whose write landed while its acknowledgement was lost is found again by its own nonce, and a commit the storage did
not answer is tried again, so that neither is left to block every later attempt for the claim's TTL."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

import pytest

from jetcron.bus.idempotency import IdempotencyKeys, KeyRecord
from jetcron.bus.memory import MemoryPublisher, MemoryStreams
from jetcron.core.errors import Unavailable, WriteConflict
from jetcron.sdk import once as once_module
from jetcron.sdk.once import claim_key, commit_key
from jetcron.wire import subjects as s

AT = datetime(2026, 12, 5, tzinfo=UTC)
PATIENCE = {"reads": once_module.OWN_CLAIM_READS, "commits": once_module.COMMIT_RETRIES}
"""As the module has them, before any test makes them zeros."""


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
    monkeypatch.setattr(once_module, "COMMIT_RETRIES", (0.0, 0.0, 0.0))


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


class DownFor(MemoryPublisher):
    """Stores nothing and says the storage did not answer for the first `down` writes (a partition, a restart)."""

    def __init__(self, streams: MemoryStreams, down: int) -> None:
        super().__init__(streams)
        self.down = down

    async def publish(self, subject: str, data: Any, **kw: Any) -> int:
        if self.down > 0:
            self.down -= 1
            raise Unavailable(f"publish {subject}: storage did not answer (TimeoutError); outcome unknown, retry")
        return await super().publish(subject, data, **kw)


DONE = KeyRecord(state="done", at=AT)


async def _claimed(keys: IdempotencyKeys) -> int:
    revision = await claim_key(keys, "once.k", KeyRecord(state="claimed", at=AT, owner="n1"), 600, None)
    assert revision is not None
    return revision


async def test_a_commit_the_storage_did_not_answer_is_tried_again_until_it_lands() -> None:
    keys = _keys(lost=0)
    revision = await _claimed(keys)
    keys.publisher = DownFor(cast(MemoryStreams, keys.streams), down=3)
    assert await commit_key(keys, "once.k", DONE, 3600, revision) > revision
    stored = await keys.get("once.k")
    assert stored is not None and stored[0].state == "done"
    # A later attempt now sees the effect done, not a claim to wait on
    assert await claim_key(keys, "once.k", KeyRecord(state="claimed", at=AT, owner="n2"), 600, None) is None
    assert await keys.get("once.k") == stored


async def test_a_commit_stored_while_its_ack_was_lost_is_ours_on_the_next_try() -> None:
    keys = _keys(lost=0)
    revision = await _claimed(keys)
    keys.publisher = AckLost(cast(MemoryStreams, keys.streams), lost=1)
    landed = await commit_key(keys, "once.k", DONE, 3600, revision)
    stored = await keys.get("once.k")
    assert stored is not None and stored[0].state == "done" and landed == stored[1]


async def test_a_commit_over_a_claim_taken_since_is_a_conflict_not_ours() -> None:
    keys = _keys(lost=0)
    revision = await _claimed(keys)
    await keys.forget("once.k", revision)  # the claim is gone: another attempt may claim the key
    with pytest.raises(WriteConflict):
        await commit_key(keys, "once.k", DONE, 3600, revision)


async def test_a_commit_the_storage_never_answers_fails_as_it_said() -> None:
    keys = _keys(lost=0)
    revision = await _claimed(keys)
    keys.publisher = DownFor(cast(MemoryStreams, keys.streams), down=100)
    with pytest.raises(Unavailable, match="outcome unknown"):
        await commit_key(keys, "once.k", DONE, 3600, revision)
    stored = await keys.get("once.k")
    assert stored is not None and stored[0].state == "claimed"


class ReadsDown(MemoryStreams):
    """Reads that the storage does not answer for the first `down` of them (a store that filled, a partition)."""

    down = 0

    async def last(self, stream: str, subject: str) -> Any:
        if self.down > 0:
            self.down -= 1
            raise Unavailable(f"read {stream} {subject}: storage did not answer (TimeoutError)")
        return await super().last(stream, subject)


def test_unknown_outcomes_are_waited_on_for_about_a_minute() -> None:
    # Shorter, a store that fills for a few seconds leaves a claim nobody holds, and every later attempt of the
    # run waits on it for claim_ttl (600 s): what a chaos run saw as a run `running` at its fourth attempt.
    assert {what: 45 <= sum(waits) <= 120 for what, waits in PATIENCE.items()} == {"reads": True, "commits": True}


async def test_a_claim_whose_ack_was_lost_is_found_after_the_reads_come_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(once_module, "OWN_CLAIM_READS", (0.0,) * 8)
    streams = ReadsDown(lambda: AT)
    streams.add(s.kv_stream(s.BUCKET_IDEMPOTENCY), [s.kv_subject(s.BUCKET_IDEMPOTENCY, ">")], per_subject=1)
    keys = IdempotencyKeys(AckLost(streams, lost=1), streams)
    # Given a claim stored while its ack was lost, and the next six reads unanswered
    streams.down = 6
    revision = await claim_key(keys, "once.k", KeyRecord(state="claimed", at=AT, owner="n1"), 600, None)
    # Then it is still found as ours once a read answers
    stored = await keys.get("once.k")
    assert stored is not None and revision == stored[1] and stored[0].owner == "n1"
