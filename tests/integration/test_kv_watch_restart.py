"""A KV watch against the real server: one started before its bucket exists waits for it (the server answers
"stream not found" meanwhile), then loads each key's last value in stream order and follows what changes."""

from __future__ import annotations

import asyncio

import nats
from harness import wait_for
from nats.js.api import KeyValueConfig
from structlog.testing import capture_logs

from jetcron.bus.kv import Store
from jetcron.bus.server import EmbeddedNats
from jetcron.core.models import TenantPolicy
from jetcron.wire import subjects as s
from jetcron.wire.codec import encode

RETRIED = "watch not answered; trying again from where it stands"


async def test_a_watch_of_a_bucket_not_made_yet_waits_for_it_then_loads_and_follows_it(
        nats_server: EmbeddedNats) -> None:
    nc = await nats.connect(nats_server.url)
    seen: list[tuple[str, str | None, int]] = []
    try:
        js = nc.jetstream(timeout=5)
        store = Store(js, s.BUCKET_TENANTS, TenantPolicy)

        async def follow() -> None:
            async for key, value, revision in store.watch():
                seen.append((key, value.tenant if value else None, revision))

        with capture_logs() as logs:
            # Given a watch started before its bucket exists
            watching = asyncio.create_task(follow())
            await wait_for(lambda: any(e["event"] == RETRIED for e in logs), 10, what="the watch to be refused")
            refused = next(e for e in logs if e["event"] == RETRIED)
            # When the bucket is made and a, b, c written, then a again
            bucket = await js.create_key_value(KeyValueConfig(bucket=s.BUCKET_TENANTS, history=1))
            for key in ("a", "b", "c", "a"):
                await bucket.put(key, encode(TenantPolicy(tenant=f"{key}@{len(seen)}")))
            # Then the watch loads each key's last value, in stream order (the order its restart relies on)
            await wait_for(lambda: ("", None, 0) in seen, 15, what="the load")
            assert seen == [("b", "b@0", 2), ("c", "c@0", 3), ("a", "a@0", 4), ("", None, 0)]
            # and follows what changes after it
            await bucket.put("d", encode(TenantPolicy(tenant="d")))
            await bucket.delete("b")
            await wait_for(lambda: len(seen) == 6, 10, what="the live changes")
            assert seen[4:] == [("d", "d", 5), ("b", None, 6)]
        assert refused["bucket"] == s.BUCKET_TENANTS and refused["loaded"] is False
        assert "watch jc_tenants" in refused["error"] and "stream not found" in refused["error"]
        assert not watching.done()
        watching.cancel()
    finally:
        await nc.close()
