"""Settings fixed when the cluster was created (jc_cluster): the first writer sets them, everyone else agrees."""

from __future__ import annotations

import asyncio
from datetime import datetime

from nats.js import JetStreamContext

from jetcron.bus.connect import StorageVerdict
from jetcron.bus.kv import Store
from jetcron.bus.ports import Records
from jetcron.core.errors import Misconfigured, WriteConflict
from jetcron.core.models import ShardLayout
from jetcron.wire import subjects as s

LAGGING_READS = 20
LAGGING_WAIT = 0.1
"""Seconds between reads of a setting that a create refused as written already but a read did not find yet."""


async def shard_layout(store: Records[ShardLayout], *, wanted: int, by: str, now: datetime) -> ShardLayout:
    """The cluster's trigger shard count, set by the first replica ever started (a create in jc_cluster);
    Misconfigured if `wanted` differs. Replicas with different counts would map jobs to shards that nobody holds."""
    try:
        await store.create(s.SHARDS_KEY, ShardLayout(shards=wanted, set_at=now, set_by=by))
    except WriteConflict:
        pass  # set before: by this replica's earlier life, or another replica
    for _ in range(LAGGING_READS):
        # Set a moment ago by another replica, it may not be on the replica that answers the read yet.
        if (found := await store.maybe(s.SHARDS_KEY)) is not None:
            break
        await asyncio.sleep(LAGGING_WAIT)
    layout, _ = found if found is not None else await store.get(s.SHARDS_KEY)
    if layout.shards != wanted:
        raise Misconfigured(
            f"JETCRON_TRIGGER_SHARDS is {wanted}, but this cluster was created with {layout.shards} shards "
            f"(set by {layout.set_by} at {layout.set_at.isoformat()}): start every trigger replica with "
            f"JETCRON_TRIGGER_SHARDS={layout.shards}")
    return layout


async def pinned_shards(store: Records[ShardLayout]) -> int | None:
    """The cluster's trigger shard count (from jc_cluster), or None before any trigger replica started."""
    found = await store.maybe(s.SHARDS_KEY)
    return None if found is None else found[0].shards


async def record_verdict(js: JetStreamContext, verdict: StorageVerdict) -> None:
    """Keep what a monitor port said where every process can read it (connect() falls back to it): an agent or
    a service in a container need not reach a node's monitor port, and no single node's port is needed."""
    store = await Store.open(js, s.BUCKET_CLUSTER, StorageVerdict)
    await store.put(s.STORAGE_VERDICT_KEY, verdict)
