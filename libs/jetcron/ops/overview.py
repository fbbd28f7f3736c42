"""What `jetcron status` shows, gathered from JetStream: instances, leases, agents, queue, recent runs, DLQ."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import Counter
from collections.abc import Mapping
from datetime import datetime, timedelta

import msgspec

from jetcron.bus import lease as lease_store
from jetcron.bus import rpc
from jetcron.bus.cluster import pinned_shards
from jetcron.bus.handles import Connection, JetStream
from jetcron.bus.kv import ServerBuckets, Store
from jetcron.bus.lease import Leases
from jetcron.bus.ports import Buckets, Streams
from jetcron.bus.registry import Registry
from jetcron.bus.storage import Usage, server_usage, stream_usages
from jetcron.bus.streams import ServerStreams
from jetcron.bus.topology import stream_names
from jetcron.core.models import AgentInfo, Priority, Run, RunState, ShardLayout
from jetcron.wire import subjects as s
from jetcron.wire.api import ClusterStatus
from jetcron.wire.codec import decode

RECENT = timedelta(hours=1)
RUNS_CAP = 20_000
"""At most this many run records are read for the last hour's counts (`runs_truncated` says when more)."""
PING_WINDOW = 0.5
AGENTS_SHOWN = 20
"""Agents `jetcron status` shows by default, the first by id (their count is always whole): at 10,000 agents a
screen of every one reads 10,000 records and helps nobody; `jetcron agents list` pages through them all."""


class InstanceView(msgspec.Struct, kw_only=True):
    service: str
    instance: str
    host: str
    pid: int
    metrics_url: str
    ready: bool
    answers_ping: bool
    heartbeat_at: datetime


class AgentView(msgspec.Struct, kw_only=True):
    agent_id: str
    host: str
    cpu: float
    memory_mb: int
    gpus: int
    free_cpu: float | None
    free_memory_mb: int | None
    free_gpus: int | None
    running: int
    draining: bool
    heartbeat_at: datetime


class Overview(msgspec.Struct, kw_only=True):
    at: datetime
    services: list[InstanceView]
    placement_leader: str | None
    tracker_leader: str | None
    shard_holders: dict[str, str]
    """Trigger shard number -> the replica holding it (a shard missing here is unheld)."""
    trigger_shards: int | None = None
    """How many shards the cluster was created with (None: no trigger replica has started yet)."""
    agents: list[AgentView]
    """The first `agents_shown` agents by id (gather's `agents_shown`)."""
    agents_total: int = 0
    """Every agent registered."""
    queue_depth: dict[str, int]
    """Runs waiting for placement, by priority."""
    runs_last_hour: dict[str, int]
    """Runs created in the last hour, by state."""
    runs_truncated: bool
    dlq: int
    """Messages in the dead-letter stream."""
    storage: list[Usage] = msgspec.field(default_factory=list)
    """Each stream's and bucket's bytes against its limit, the fullest first, and the server's store when a monitor
    port answers (`stream` "server")."""


async def _holder(leases: Leases, key: str) -> str | None:
    lease = await leases.read(key)
    return lease.value.holder if lease is not None and lease.value.holder else None


def _instances(replies: list[bytes]) -> set[str]:
    """"name/instance" of each `$SRV.PING` reply that names its instance."""
    answered: set[str] = set()
    for data in replies:
        with contextlib.suppress(ValueError, AttributeError):
            reply = json.loads(data)
            meta = reply.get("metadata") or {}
            if meta.get("instance"):
                answered.add(f"{reply.get('name', '')}/{meta['instance']}")
    return answered


async def _pings(nc: Connection, expected: int) -> set[str]:
    """Instances answering `$SRV.PING` within a short window (or as soon as every expected one did)."""
    return _instances(await rpc.replies(nc, s.SRV_PING, window=PING_WINDOW,
                                        enough=lambda got: len(_instances(got)) >= expected))


async def not_ready(nc: Connection, expected: Mapping[str, int]) -> list[str]:
    """The services of `expected` (name -> instances) with fewer instances that both say they are ready in the
    registry and answer `$SRV.PING`, each as `name (k of n)`: empty once all of them answer, as `jetcron status`
    shows them (what `jetcron up` waits for before it says it is ready)."""
    js = rpc.jetstream(nc, timeout=5)
    instances = [i for i in await (await Registry.open(js)).instances() if i.ready]
    pinged = await _pings(nc, len(instances))
    answering = Counter(i.service for i in instances
                        if f"{s.health_service_name(i.service)}/{i.instance}" in pinged)
    return [f"{name} ({answering[name]} of {n})" for name, n in expected.items() if answering[name] < n]


async def _queue_depth(streams: Streams) -> dict[str, int]:
    # A work queue keeps every message until placement acks it: what is in the stream is what waits.
    by_subject = await streams.counts(s.STREAM_PLACE, s.PLACE_ALL)
    return {p.value: by_subject.get(s.place_subject(p), 0) for p in Priority}


async def _recent_runs(streams: Streams, now: datetime) -> tuple[dict[str, int], bool]:
    """Runs by state among those written in the last hour and created in it (bounded by RUNS_CAP)."""
    since = now - RECENT
    written, truncated = await streams.written_since(s.kv_stream(s.BUCKET_RUNS), s.RUN_CHANGES, since, RUNS_CAP)
    counts: Counter[str] = Counter()
    for msg in written:
        if not (data := msg.data):  # a delete marker
            continue
        with contextlib.suppress(msgspec.DecodeError, msgspec.ValidationError):
            run = decode(data, Run)
            if run.created_at >= since:
                counts[run.state.value] += 1
    return {state.value: counts.get(state.value, 0) for state in RunState}, truncated


async def cluster_status(leases: Leases, buckets: Buckets, streams: Streams) -> ClusterStatus:
    """Leaders, shard holders and the placement queue: what the API's cluster.status answers (the dashboard's
    overview) and part of `jetcron status`."""
    shards: dict[str, str] = {}
    for key in await leases.keys(s.SHARD_LEASES):
        holder = await _holder(leases, key)
        if holder:
            shards[str(s.parse_shard_lease_key(key))] = holder
    return ClusterStatus(placement_leader=await _holder(leases, s.PLACEMENT_LEADER_KEY),
                         tracker_leader=await _holder(leases, s.TRACKER_LEADER_KEY),
                         shard_holders=dict(sorted(shards.items(), key=lambda kv: int(kv[0]))),
                         trigger_shards=await pinned_shards(await buckets.open(s.BUCKET_CLUSTER, ShardLayout)),
                         queue_depth=await _queue_depth(streams),
                         agents=len(await (await buckets.open(s.BUCKET_AGENTS, AgentInfo)).keys()))


async def storage_view(streams: Streams, nats_url: str, monitor_url: str | None) -> list[Usage]:
    """The fullest first (by share of a limit, then by bytes), the server's store first of all."""
    usages = await stream_usages(streams, stream_names())
    server = await server_usage(nats_url, monitor_url, usages)
    ranked = sorted(usages, key=lambda u: (-u.ratio, -u.used))
    return ([server] if server is not None else []) + ranked


async def _agents(js: JetStream, shown: int) -> tuple[list[AgentView], int]:
    """The first `shown` agents by id, read, and how many there are (counted from the bucket's keys, none read)."""
    store = await Store.open(js, s.BUCKET_AGENTS, AgentInfo)
    keys = sorted(await store.keys())
    agents: list[AgentView] = []
    for found in await asyncio.gather(*(store.maybe(key) for key in keys[:max(0, shown)])):
        if found is not None:
            a = found[0]
            agents.append(AgentView(agent_id=a.agent_id, host=a.host, cpu=a.cpu, memory_mb=a.memory_mb, gpus=a.gpus,
                                    free_cpu=a.free_cpu, free_memory_mb=a.free_memory_mb, free_gpus=a.free_gpus,
                                    running=a.running, draining=a.draining, heartbeat_at=a.heartbeat_at))
    return agents, len(keys)


async def gather(nc: Connection, now: datetime, monitor_url: str | None = None,
                 agents_shown: int = AGENTS_SHOWN) -> Overview:
    js = rpc.jetstream(nc, timeout=5)
    instances = await (await Registry.open(js)).instances()
    agents, agents_total = await _agents(js, agents_shown)
    streams = ServerStreams(js)
    status = await cluster_status(lease_store.on_server(js), ServerBuckets(js), streams)
    pinged = await _pings(nc, len(instances))
    runs, truncated = await _recent_runs(streams, now)
    dlq = await streams.state(s.STREAM_DLQ)
    return Overview(
        at=now,
        services=[InstanceView(service=i.service, instance=i.instance, host=i.host, pid=i.pid,
                               metrics_url=i.metrics_url, ready=i.ready, heartbeat_at=i.heartbeat_at,
                               answers_ping=f"{s.health_service_name(i.service)}/{i.instance}" in pinged)
                  for i in instances],
        placement_leader=status.placement_leader,
        tracker_leader=status.tracker_leader,
        shard_holders=status.shard_holders,
        trigger_shards=status.trigger_shards,
        agents=agents,
        agents_total=agents_total,
        queue_depth=status.queue_depth,
        runs_last_hour=runs,
        runs_truncated=truncated,
        dlq=dlq.messages,
        storage=await storage_view(streams, nc.connected_url.geturl() if nc.connected_url else "", monitor_url),
    )
