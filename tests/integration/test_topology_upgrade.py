"""A cluster made by an earlier jetcron (a one-day idempotency bucket, a 7-day, 1 GiB events stream without
per-message TTLs, a jobs bucket without delete markers) is brought to today's limits in place when a service
starts: every change said, nothing it held lost, and no limit set below what a stream holds."""

from __future__ import annotations

import nats
from harness import Services, wait_for
from nats.js.api import DiscardPolicy, KeyValueConfig, RetentionPolicy, StorageType, StreamConfig

from jetcron.bus.server import EmbeddedNats
from jetcron.bus.topology import Limits, ensure_topology
from jetcron.wire import subjects as s

GiB = 2**30
DAY = 86400.0


async def _earlier_cluster(url: str) -> None:
    """The parts whose limits changed, as the earlier topology made them, each holding data."""
    nc = await nats.connect(url)
    try:
        js = nc.jetstream(timeout=5)
        await js.add_stream(StreamConfig(
            name=s.STREAM_EVENTS, subjects=[s.EVENTS_ALL], retention=RetentionPolicy.LIMITS, max_age=7 * DAY,
            max_bytes=GiB, discard=DiscardPolicy.NEW, storage=StorageType.FILE, duplicate_window=120))
        for i in range(50):
            await js.publish(s.event_subject("finished", "agent-1"), f'{{"n": {i}}}'.encode())
        await js.create_key_value(KeyValueConfig(bucket=s.BUCKET_IDEMPOTENCY, history=1, ttl=DAY,
                                                 max_bytes=128 * 2**20, storage=StorageType.FILE))
        await js.publish(s.kv_subject(s.BUCKET_IDEMPOTENCY, "once.k"), b'{"state":"done"}',
                         headers={s.HDR_TTL: "3600"})
        jobs = await js.create_key_value(KeyValueConfig(bucket=s.BUCKET_JOBS, history=16, max_bytes=256 * 2**20,
                                                        storage=StorageType.FILE))
        for i in range(20):
            await jobs.put(f"job{i}", b'{"spec": {}}')
        await js.create_key_value(KeyValueConfig(bucket=s.BUCKET_RUNS, history=1, max_bytes=GiB,
                                                 storage=StorageType.FILE))
        await js.add_stream(StreamConfig(
            name=s.STREAM_ASSIGN, subjects=[s.ASSIGN_ALL], retention=RetentionPolicy.WORK_QUEUE, max_msgs=2_000_000,
            discard=DiscardPolicy.NEW, storage=StorageType.FILE, duplicate_window=120,
            description="assignments, one subject per agent"))
    finally:
        await nc.close()


async def test_an_earlier_clusters_limits_are_raised_in_place_and_nothing_it_held_is_lost(
        nats_server: EmbeddedNats) -> None:
    # Given streams and buckets made by an earlier jetcron, holding data
    await _earlier_cluster(nats_server.url)
    nc = await nats.connect(nats_server.url)
    try:
        js = nc.jetstream(timeout=5)
        # When the topology is ensured with today's limits
        notes = [n.text for n in await ensure_topology(js)]
        # Then each changed limit is said
        assert f"{s.STREAM_EVENTS}: max_age {7 * DAY} -> {90 * DAY}" in notes
        assert f"{s.STREAM_EVENTS}: max_bytes {GiB} -> -1" in notes
        assert f"{s.STREAM_EVENTS}: allow_msg_ttl False -> True" in notes
        assert f"KV_{s.BUCKET_IDEMPOTENCY}: max_age {DAY} -> {30 * DAY}" in notes
        assert f"KV_{s.BUCKET_JOBS}: subject_delete_marker_ttl None -> 3600.0" in notes
        assert f"KV_{s.BUCKET_RUNS}: max_bytes {GiB} -> -1" in notes
        assert f"{s.STREAM_ASSIGN}: max_consumers -1 -> 20000" in notes
        # and the streams carry them
        events = await js.stream_info(s.STREAM_EVENTS)
        assert (events.config.max_age, events.config.max_bytes, events.config.allow_msg_ttl) == (90 * DAY, -1, True)
        assert (await js.stream_info(f"KV_{s.BUCKET_IDEMPOTENCY}")).config.max_age == 30 * DAY
        assert (await js.stream_info(f"KV_{s.BUCKET_JOBS}")).config.subject_delete_marker_ttl == 3600
        # and nothing they held is lost
        assert events.state.messages == 50
        assert (await js.stream_info(f"KV_{s.BUCKET_JOBS}")).state.messages == 20
        assert (await js.get_last_msg(f"KV_{s.BUCKET_IDEMPOTENCY}",
                                      s.kv_subject(s.BUCKET_IDEMPOTENCY, "once.k"))).data == b'{"state":"done"}'
        # and an event can now carry its run's retention
        await js.publish(s.event_subject("finished", "agent-1"), b"{}", headers={s.HDR_TTL: "60"})
        assert (await js.stream_info(s.STREAM_ASSIGN)).config.max_consumers == 20_000
        # A second start finds nothing to change
        assert [n.text for n in await ensure_topology(js)] == []
    finally:
        await nc.close()


async def test_a_limit_below_what_a_stream_holds_is_refused_and_the_data_kept(nats_server: EmbeddedNats) -> None:
    # Given a jobs bucket holding about 100 KiB
    nc = await nats.connect(nats_server.url)
    try:
        js = nc.jetstream(timeout=5)
        await ensure_topology(js)
        jobs = await js.key_value(s.BUCKET_JOBS)
        for i in range(100):
            await jobs.put(f"job{i}", b"x" * 1024)
        held = (await js.stream_info(f"KV_{s.BUCKET_JOBS}")).state.bytes
        # When the settings ask for a 64 KiB limit
        notes = await ensure_topology(js, limits=Limits(jobs_bytes=64 * 1024))
        # Then the limit stays, the refusal is said, and every job is still there
        refused = [n for n in notes if n.refused]
        assert [n.text for n in refused] == [
            f"KV_{s.BUCKET_JOBS}: max_bytes stays {GiB}: it holds {held} bytes, more than the 65536 asked (never "
            "shrunk below what it holds)"]
        info = await js.stream_info(f"KV_{s.BUCKET_JOBS}")
        assert info.config.max_bytes == GiB and info.state.messages == 100
    finally:
        await nc.close()


async def test_a_service_starting_on_an_earlier_cluster_says_what_it_changed(
        services: Services, nats_server: EmbeddedNats) -> None:
    await _earlier_cluster(nats_server.url)
    api = services.start("api", "api")
    await api.wait_logged("api ready", 30)

    def said() -> bool:
        return f"{s.STREAM_EVENTS}: max_age {7 * DAY} -> {90 * DAY}" in api.output()

    await wait_for(said, 10, what="the api's log to name the events stream's new max_age")
    assert '"topology limits"' in api.output()
