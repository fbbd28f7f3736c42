"""Listing a bucket's keys past the server's page: nats-server answers at most 100,000 subjects to one stream
info request, so a tenant with more jobs, or a day of a million runs, would be listed short without paging."""

from __future__ import annotations

import asyncio
import json

import nats
from nats.js.api import StorageType, StreamConfig

from jetcron.bus.kv import scan_keys
from jetcron.bus.server import EmbeddedNats
from jetcron.wire import subjects as s

BUCKET = "paged"
MANY = 100_020
"""Past the server's page of 100,000 subjects."""


async def test_keys_past_the_servers_page_are_all_listed(nats_server: EmbeddedNats) -> None:
    nc = await nats.connect(nats_server.url)
    try:
        js = nc.jetstream(timeout=30)
        # Given a bucket (in memory: the server's paging is the point, not fsync) with 100,020 keys of tenant a
        # and 5 of tenant b
        await js.add_stream(StreamConfig(name=s.kv_stream(BUCKET), subjects=[s.kv_subject(BUCKET, ">")],
                                         storage=StorageType.MEMORY, max_msgs_per_subject=1))
        keys = [f"a.k{i:06d}" for i in range(MANY)] + [f"b.k{i}" for i in range(5)]
        for start in range(0, len(keys), 2000):
            await asyncio.gather(*(js.publish(s.kv_subject(BUCKET, key), b"v") for key in keys[start:start + 2000]))
        # (the server itself answers one page short of them)
        info = json.loads((await nc.request(f"$JS.API.STREAM.INFO.{s.kv_stream(BUCKET)}",
                                            json.dumps({"subjects_filter": s.kv_subject(BUCKET, "a.*")}).encode(),
                                            timeout=30)).data)
        assert len(info["state"]["subjects"]) == 100_000 and info["total"] == MANY
        # When they are listed, all of them, and by a tenant's pattern
        every = await scan_keys(js, BUCKET, ">")
        of_a = await scan_keys(js, BUCKET, "a.*")
        of_b = await scan_keys(js, BUCKET, "b.*")
        # Then every key is there once
        assert len(every) == len(keys) and set(every) == set(keys)
        assert sorted(of_a) == keys[:MANY]
        assert sorted(of_b) == [f"b.k{i}" for i in range(5)]
        assert await scan_keys(js, BUCKET, "c.*") == []
    finally:
        await nc.close()
