"""once(key, ttl): a job's guard for its own side effects, on the idempotency bucket (claim, then commit).

    from jetcron import once
    with once(os.environ["JETCRON_IDEMPOTENCY_KEY"] + ":welcome-email") as first:
        if first:
            send_email()

The body runs only for the first attempt that claims the key; a later attempt of the same run (a
retry, a re-dispatch after an agent died) sees the committed key and skips it. If the body raises,
the claim is dropped so a later attempt can try again. If the bucket is full, IdempotencyStoreFull
is raised before the body runs: the store never forgets old keys to make room, because forgetting would
allow a second email (docs/guarantees.md). A key already done still answers False when the store is full.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from jetcron.core.errors import Conflict, JetcronError, Unavailable, WriteConflict
from jetcron.sdk._sync import in_private_loop

if TYPE_CHECKING:  # imported where used: a job that imports jetcron to call once() pays for nats-py only then
    from jetcron.bus.idempotency import IdempotencyKeys, KeyRecord

DEFAULT_TTL = 7 * 86400.0
CLAIM_TTL = 600.0
STORAGE_PATIENCE = (0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0)
"""Waits between tries while the storage does not answer: about a minute in all, longer than a partition's
election, a node's restart or a full store's relief takes."""
OWN_CLAIM_READS = (0.0, *STORAGE_PATIENCE)
"""Waits before each read for our own claim after its write's outcome was unknown (claim_key)."""
COMMIT_RETRIES = STORAGE_PATIENCE
"""Waits before each new try of a commit the storage did not answer (commit_key)."""


class AlreadyClaimed(Conflict):
    """Another attempt holds the claim right now (it has not committed or given up yet)."""


class EffectNotRecorded(JetcronError):
    """The body ran but its commit failed (storage unavailable): the claim alone now guards the key."""


@asynccontextmanager
async def once_async(key: str, ttl: float = DEFAULT_TTL, *, nats_url: str | None = None,
                     claim_ttl: float = CLAIM_TTL) -> AsyncIterator[bool]:
    """Yield True if this caller should perform the effect, False if it was already done."""
    from jetcron.bus import rpc
    from jetcron.bus.connect import Identity, connect
    from jetcron.bus.idempotency import IdempotencyKeys, KeyRecord
    from jetcron.bus.publish import StreamPublisher
    from jetcron.bus.scoped import ScopedReads
    from jetcron.core.ids import DEFAULT_TENANT

    # A run's credential may write only its own tenant's once.<tenant>.* keys (jetcron.auth.roles.job_template).
    tenant = os.environ.get("JETCRON_TENANT", "")
    scope = f"once.{tenant}." if tenant else "once."
    safe = scope + "".join(c if c.isalnum() or c in "-_=" else "_" for c in key)[:200]
    url = nats_url or os.environ.get("JETCRON_NATS_URL", "nats://127.0.0.1:4222")
    nc = (await connect(url, name="jetcron-once", check=False, identity=Identity.from_env(os.environ))).nc
    try:
        # Keys read by subject and the bucket's fill asked of the api: all a run's credential may do
        # (jetcron.bus.scoped).
        keys = IdempotencyKeys(StreamPublisher(rpc.jetstream(nc, timeout=5)),
                               ScopedReads(nc, tenant or DEFAULT_TENANT, timeout=5))
        now = datetime.now(UTC)
        claim = KeyRecord(state="claimed", at=now, owner=secrets.token_hex(8))
        existing = await keys.get(safe)
        if existing is not None and existing[0].state == "done":
            yield False  # done already: no write, so this answers even when the store is full
            return
        if existing is not None and existing[0].state == "claimed":
            raise AlreadyClaimed(f"once({key!r}): claimed by another attempt; retry after it ends")
        await keys.ensure_room(ttl)
        revision = await claim_key(keys, safe, claim, claim_ttl, existing)
        if revision is None:
            again = await keys.get(safe)
            if again is not None and again[0].state == "done":
                yield False
                return
            raise AlreadyClaimed(f"once({key!r}): claimed by another attempt; retry after it ends")
        try:
            yield True
        except BaseException:
            await keys.forget(safe, revision)
            raise
        try:
            await commit_key(keys, safe, KeyRecord(state="done", at=datetime.now(UTC)), ttl, revision)
        except JetcronError as exc:
            raise EffectNotRecorded(
                f"once({key!r}): the effect was done but recording it failed ({exc}); the claim blocks other "
                f"attempts for {claim_ttl:g}s, after which one may repeat the effect") from exc
    finally:
        await rpc.close(nc, drain=None)


async def claim_key(keys: IdempotencyKeys, key: str, claim: KeyRecord, claim_ttl: float,
                    existing: tuple[KeyRecord, int] | None) -> int | None:
    """Write `claim` (a create, or over a released record); its revision, None if another attempt wrote first.

    A claim whose write landed while its acknowledgement was lost (a connection reset, a store that filled: the
    outcome is unknown) would otherwise stand against every later attempt for `claim_ttl`, though no effect was
    done under it. So the key is read again, for about a minute while the storage does not answer: carrying
    this claim's nonce, it is ours."""
    try:
        if existing is not None:  # released by an attempt whose effect failed: take over from its record
            return await keys.take_over(key, claim, claim_ttl, existing[1])
        return await keys.claim(key, claim, claim_ttl)
    except Unavailable as unknown:
        for wait in OWN_CLAIM_READS:
            await asyncio.sleep(wait)
            try:
                found = await keys.get(key)
            except Unavailable:
                continue
            if found is not None and found[0].state == "claimed" and found[0].owner == claim.owner:
                return found[1]
            raise  # it did not land (or another attempt's did): the write failed, as it said
        raise unknown from None


async def commit_key(keys: IdempotencyKeys, key: str, done: KeyRecord, ttl: float, revision: int) -> int:
    """Record the effect as done over our claim at `revision`; tried again while the storage does not answer.

    The effect is done already: until its record lands, every later attempt finds the claim and waits for it to
    lapse (`claim_ttl`), or repeats the effect once it has. A partition or a restarting node answers again
    within seconds, so the commit is tried again for about a minute (COMMIT_RETRIES) before it gives up. A try
    that was stored while its acknowledgement was lost makes the next one conflict; the key then reads `done`
    (no other attempt may write over a live claim), and that is our commit."""
    unknown: Unavailable | None = None
    for wait in (0.0, *COMMIT_RETRIES):
        await asyncio.sleep(wait)
        try:
            return await keys.commit(key, done, ttl, revision)
        except Unavailable as exc:
            unknown = exc
        except WriteConflict:
            found = await keys.get(key) if unknown is not None else None
            if found is not None and found[0].state == "done":
                return found[1]
            raise
    assert unknown is not None
    raise unknown


@contextmanager
def once(key: str, ttl: float = DEFAULT_TTL, *, nats_url: str | None = None,
         claim_ttl: float = CLAIM_TTL) -> Iterator[bool]:
    """The synchronous form of once_async(), for plain job scripts."""
    with in_private_loop(once_async(key, ttl, nats_url=nats_url, claim_ttl=claim_ttl)) as (first, _loop):
        yield first
