"""A stream, bucket or durable consumer deleted under a running system is made again by the core services'
topology check, and said loudly (an error naming it, jetcron_topology_recreated_total). The fault under load,
on a cluster, with the invariants: tests/chaos/test_chaos_topology.py."""

from __future__ import annotations

import asyncio

from harness import Services, wait_for
from metrics_support import samples
from nats.js.api import DiscardPolicy
from nats.js.errors import NotFoundError
from test_runs import now_job, state_is, the_run

from jetcron.bus import lease as lease_store
from jetcron.bus.registry import Registry
from jetcron.bus.topology import (
    FENCED_BUCKETS,
    Limits,
    bucket_configs,
    consumer_configs,
    ensure_topology,
    missing_parts,
    stream_names,
)
from jetcron.sdk.client import Client
from jetcron.wire import subjects as s


async def test_nothing_is_missing_on_a_fresh_topology_and_each_deleted_part_is_named(client: Client) -> None:
    js = client.nc.jetstream(timeout=5)
    await ensure_topology(js)
    assert await missing_parts(client.nc, js) == []
    assert len(stream_names()) == len(set(stream_names())) >= 20
    await js.delete_consumer(s.STREAM_EVENTS, s.CONSUMER_TRACKER)
    await js.delete_key_value(s.BUCKET_CURSORS)
    await js.delete_stream(s.STREAM_PLACE)
    assert await missing_parts(client.nc, js) == [s.STREAM_PLACE, f"KV_{s.BUCKET_CURSORS}",
                                                   f"{s.STREAM_EVENTS}/{s.CONSUMER_TRACKER}"]


async def test_a_deleted_queue_is_made_again_loudly_and_a_job_still_runs(services: Services,
                                                                        client: Client) -> None:
    # Given the services running, the api looking for deleted parts twice a second
    await services.start_system(agents=1, JETCRON_TOPOLOGY_CHECK="0.5", JETCRON_METRICS_PORT="0")
    js = client.nc.jetstream(timeout=5)
    # When the placement queue is deleted, its consumer with it
    await js.delete_stream(s.STREAM_PLACE)

    async def made_again() -> bool:
        try:
            await js.consumer_info(s.STREAM_PLACE, s.CONSUMER_PLACEMENT)
            return True
        except NotFoundError:
            return False

    # Then it is made again, with its consumer, and an error names it in a core service's log
    await wait_for(made_again, 20, what="the placement queue made again")

    def logged() -> list[str]:  # said once the whole repair is done, a moment after the queue is back
        return [name for name in ("api", "placement", "run_tracker", "trigger-1")
                if name in services.procs and "were deleted" in services[name].output()
                and s.STREAM_PLACE in services[name].output()]

    await wait_for(logged, 30, what="a core service to say the placement queue was deleted")
    registry = await Registry.open(js)

    async def counted() -> list[float] | None:  # a scrape can miss under load: counted once read, not at one read
        found = [(await samples(i)).get(("jetcron_topology_recreated_total", frozenset({("part", s.STREAM_PLACE)})),
                                        0) for i in await registry.instances()]
        return found if max(found, default=0) >= 1 else None

    await wait_for(counted, 30, what="a service to count the placement queue made again")
    # And a job submitted now runs to the end
    await client.call("jobs.create", now_job("after", "true"))
    run = await the_run(client, "after", when=state_is("succeeded", "dead", "failed"), what="the job to end")
    assert run["state"] == "succeeded", run


def test_the_placement_consumer_sees_as_many_runs_as_its_queue_holds() -> None:
    """Placement holds runs it cannot place yet unacked: capped below the queue's limit, those held would keep
    every later run (of any priority or tenant) from being delivered to it."""
    limits = Limits(place_msgs=1234)
    consumer = dict(consumer_configs(limits))[s.STREAM_PLACE]
    assert consumer.max_ack_pending == limits.place_msgs


async def test_a_lease_bucket_made_again_hands_out_tokens_above_every_earlier_one(client: Client) -> None:
    """Lease revisions are fencing tokens: a bucket deleted and made again must not start again at 1 under
    runs still holding tokens of the one before (the chaos test of a deleted KV_jc_leases caught that)."""
    js = client.nc.jetstream(timeout=5)
    await ensure_topology(js)
    leases = lease_store.on_server(js)
    earlier = []
    for bucket_key in (s.run_lease_key("job.20261204T000000000Z"), "leader.placement"):
        for attempt in (1, 2, 3):  # a few writes, so that a restart at any small number would be below
            lease = await leases.acquire(f"{bucket_key}.{attempt}", "agent-1", 30, attempt=attempt)
            assert lease is not None
            earlier.append(lease.token)
    for bucket in FENCED_BUCKETS:
        await js.delete_key_value(bucket)
    assert sorted(await missing_parts(client.nc, js)) == sorted(s.kv_stream(b) for b in FENCED_BUCKETS)

    # Made again by several services at once, each from its own floor: one wins, the others accept it
    await asyncio.gather(*(ensure_topology(client.nc.jetstream(timeout=5)) for _ in range(3)))
    assert await missing_parts(client.nc, js) == []
    for bucket_key in (s.run_lease_key("job.20261204T000000000Z"), "leader.placement"):
        lease = await leases.acquire(f"{bucket_key}.1", "agent-2", 30, attempt=1)
        assert lease is not None and lease.token > max(earlier), (bucket_key, lease.token, earlier)
    for bucket in FENCED_BUCKETS:  # and they are the buckets nats-py would make, but for where they start
        kv_config = {c.bucket: c for c in bucket_configs(1, Limits())}[bucket]
        info = await js.stream_info(s.kv_stream(bucket))
        assert info.config.allow_msg_ttl and info.config.deny_delete and info.config.allow_rollup_hdrs
        assert info.config.max_msgs_per_subject == kv_config.history and info.config.discard == DiscardPolicy.NEW
        assert info.config.first_seq is not None and info.config.first_seq > max(earlier)
