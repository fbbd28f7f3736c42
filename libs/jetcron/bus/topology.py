"""One idempotent bootstrap of every stream, KV bucket and durable consumer, with explicit limits."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import partial
from typing import Any

import nats.errors
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    DiscardPolicy,
    KeyValueConfig,
    RetentionPolicy,
    StorageType,
    StreamConfig,
)
from nats.js.errors import APIError, BadRequestError, NotFoundError, ServiceUnavailableError

from jetcron.bus.kv import translate
from jetcron.bus.ports import Durable
from jetcron.core.errors import JetcronError, Misconfigured, Unavailable
from jetcron.core.leases import fencing_floor
from jetcron.wire import subjects as s

MiB = 1024 * 1024
GiB = 1024 * MiB
DAY = 86400.0
HOUR = 3600.0
DUPLICATE_WINDOW = 120.0
MAX_MSG = 1 * MiB


@dataclass(frozen=True)
class Limits:
    """Every stream's and bucket's size and age; config.Settings.limits builds them from JETCRON_* settings
    (docs/settings.md). The defaults hold the design's load (docs/operations.md, "Sizing the streams"): JetStream
    reserves each stream's max_bytes from the server's max_file_store, so their sum (4.5 GiB) must fit it; the
    history streams (runs, events, output) have none by default (0) and share what the store has left."""

    runs_bytes: int = 0
    jobs_bytes: int = GiB
    place_msgs: int = 2_000_000
    events_age: float = 90 * DAY
    """The events stream's max_age: the ceiling of any run's retention; each event carries its run's own TTL."""
    events_bytes: int = 0
    logs_age: float = 90 * DAY
    logs_bytes: int = 0
    dlq_age: float = 30 * DAY
    dlq_bytes: int = GiB
    idempotency_age: float = 30 * DAY
    """The idempotency bucket's max_age: the longest TTL a key may have (the server cuts a key's own TTL there)."""
    idempotency_bytes: int = GiB
    requests_age: float = DAY
    """How long an intake request's outcome is kept (jc_submissions)."""
    job_marker_age: float = HOUR
    """How long the delete marker of a job the server removed stays (watchers see the job go by it). The server
    keeps no message with a TTL shorter than this in that bucket, so it is the history floor."""
    agents_ttl: float = 30.0
    """How long an agent's entry outlives its last heartbeat (jc_agents' max_age)."""
    services_ttl: float = 15.0
    """How long a service instance's entry outlives its last heartbeat (jc_services' max_age)."""
    redeliver_msgs: int = 100_000
    checkpoints_bytes: int = GiB
    notify_bytes: int = 256 * MiB
    """Each of the delivery log and the subject targets' stream."""
    notify_age: float = 7 * DAY
    """How long a notice for a `subject` rule waits for its service (JC_NOTIFY's max_age)."""
    deliveries_age: float = 30 * DAY
    """How long the delivery log keeps each delivery and its tries (jc_notify)."""
    finished_age: float = 7 * DAY
    """How long the finished runs per minute are kept (jc_finished's max_age: each minute's record ages out this
    long after its last write)."""
    calendars_bytes: int = 64 * MiB
    """The named calendars' bucket (jc_calendars, 16 revisions kept per calendar)."""
    agents_max: int = 20_000
    """The assignment stream's max_consumers: every agent has a durable consumer of its own there. Left unset, a
    stream takes 1,000 (nats-server 2.15.1 refuses the next: docs/decisions-nats.md)."""


def stream_configs(replicas: int, limits: Limits) -> list[StreamConfig]:
    common = dict(storage=StorageType.FILE, num_replicas=replicas, discard=DiscardPolicy.NEW,
                  duplicate_window=DUPLICATE_WINDOW, max_msg_size=MAX_MSG)
    return [
        StreamConfig(name=s.STREAM_PLACE, subjects=[s.PLACE_ALL], retention=RetentionPolicy.WORK_QUEUE,
                     max_msgs=limits.place_msgs, description="runs waiting for placement", **common),  # type: ignore[arg-type]
        StreamConfig(name=s.STREAM_ASSIGN, subjects=[s.ASSIGN_ALL], retention=RetentionPolicy.WORK_QUEUE,
                     max_msgs=limits.place_msgs, max_consumers=limits.agents_max,
                     description="assignments, one subject and one durable consumer per agent", **common),  # type: ignore[arg-type]
        # Each event and output chunk carries its run's retention as a per-message TTL
        # (jetcron.core.retention.stream_ttl); max_age is the ceiling of every retention.
        StreamConfig(name=s.STREAM_EVENTS, subjects=[s.EVENTS_ALL], retention=RetentionPolicy.LIMITS,
                     max_age=limits.events_age, max_bytes=limits.events_bytes or -1, allow_msg_ttl=True,
                     description="run events and audit trail", **common),  # type: ignore[arg-type]
        StreamConfig(name=s.STREAM_LOGS, subjects=[s.LOGS_ALL], retention=RetentionPolicy.LIMITS,
                     max_age=limits.logs_age, max_bytes=limits.logs_bytes or -1, allow_msg_ttl=True,
                     description="run output chunks", **{**common, "discard": DiscardPolicy.OLD}),  # type: ignore[arg-type]
        StreamConfig(name=s.STREAM_DLQ, subjects=[s.DLQ_ALL], retention=RetentionPolicy.LIMITS,
                     max_age=limits.dlq_age, max_bytes=limits.dlq_bytes, description="dead-lettered runs",
                     **common),  # type: ignore[arg-type]
        # Requests leave once the api settled them; a publisher retrying within the hour is deduplicated here by
        # its Nats-Msg-Id, and later by the outcome kept under the same id in jc_submissions.
        StreamConfig(name=s.STREAM_SUBMIT, subjects=[s.SUBMIT_ALL], retention=RetentionPolicy.WORK_QUEUE,
                     max_msgs=limits.place_msgs, description="job requests published by services (the intake)",
                     **{**common, "duplicate_window": HOUR}),  # type: ignore[arg-type]
        StreamConfig(name=s.STREAM_NOTIFY, subjects=[s.NOTIFY_ALL], retention=RetentionPolicy.LIMITS,
                     max_age=limits.notify_age, max_bytes=limits.notify_bytes,
                     description="notifications for services (rules with a `subject` target)",
                     **{**common, "discard": DiscardPolicy.OLD}),  # type: ignore[arg-type]
        StreamConfig(name=s.STREAM_REDELIVER, subjects=[s.REDELIVER_ALL], retention=RetentionPolicy.WORK_QUEUE,
                     max_msgs=limits.redeliver_msgs,
                     description="parked notification deliveries asked to be tried again", **common),  # type: ignore[arg-type]
        # One message per subject: a run's record and each chunk of its files (jetcron.bus.checkpoints). Direct gets
        # by subject are how a run's own credential reads them (jetcron.bus.scoped).
        StreamConfig(name=s.STREAM_CHECKPOINTS, subjects=[s.CHECKPOINTS_ALL], retention=RetentionPolicy.LIMITS,
                     max_bytes=limits.checkpoints_bytes, max_msgs_per_subject=1, allow_direct=True,
                     description="run checkpoints (jetcron.checkpoint); removed after the run's retention",
                     **common),  # type: ignore[arg-type]
    ]


def bucket_configs(replicas: int, limits: Limits) -> list[KeyValueConfig]:
    common = dict(storage=StorageType.FILE, replicas=replicas, max_value_size=MAX_MSG)
    return [
        # A job that ends (a fired one-shot job, a deleted one: jetcron.core.retention.job_ttl) leaves a delete marker
        # when the server removes it, so every watcher drops it from its index. (An ended job is no longer planned
        # whether or not the server has removed it: jetcron_services.trigger.warm.Warm.fireable.)
        KeyValueConfig(bucket=s.BUCKET_JOBS, history=16, max_bytes=limits.jobs_bytes,
                       limit_marker_ttl=limits.job_marker_age,
                       description="job definitions (history kept for audit)", **common),  # type: ignore[arg-type]
        # No max_age: a run that has not ended must stay however long it takes; an ended one is written with its
        # own TTL (jetcron.core.retention.record_ttl).
        KeyValueConfig(bucket=s.BUCKET_RUNS, history=1, max_bytes=limits.runs_bytes or -1,
                       description="one record per run; ended runs age out by their own TTL", **common),  # type: ignore[arg-type]
        KeyValueConfig(bucket=s.BUCKET_CURSORS, history=1, description="last recorded fire time per job",
                       **common),  # type: ignore[arg-type]
        KeyValueConfig(bucket=s.BUCKET_LEASES, history=1, description="run and gang leases (per-message TTL)",
                       **common),  # type: ignore[arg-type]
        KeyValueConfig(bucket=s.BUCKET_LEADERS, history=1,
                       description="leader, trigger shard and member leases (per-message TTL)",
                       **common),  # type: ignore[arg-type]
        KeyValueConfig(bucket=s.BUCKET_AGENTS, history=1, ttl=limits.agents_ttl,
                       description="live agents; a key ages out when its agent stops heartbeating",
                       **common),  # type: ignore[arg-type]
        # Direct gets: a run's own credential reads its tenant's once() keys by subject (jetcron.bus.scoped).
        KeyValueConfig(bucket=s.BUCKET_IDEMPOTENCY, history=1, ttl=limits.idempotency_age,
                       max_bytes=limits.idempotency_bytes, direct=True,
                       description="idempotency keys; refuses new keys when full", **common),  # type: ignore[arg-type]
        KeyValueConfig(bucket=s.BUCKET_TENANTS, history=8, description="tenant quotas and weights",
                       **common),  # type: ignore[arg-type]
        KeyValueConfig(bucket=s.BUCKET_SERVICES, history=1, ttl=limits.services_ttl,
                       description="running service instances and their metrics URLs, heartbeated",
                       **common),  # type: ignore[arg-type]
        KeyValueConfig(bucket=s.BUCKET_PLACEMENT, history=1,
                       description="placement's capacity summary (submit-time checks) and suspect GPU hosts",
                       **common),  # type: ignore[arg-type]
        KeyValueConfig(bucket=s.BUCKET_SECRETS, history=1,
                       description="tenants' secrets, bound to tenant and name (only the api and agents hold the key)",
                       **common),  # type: ignore[arg-type]
        KeyValueConfig(bucket=s.BUCKET_SUBMISSIONS, history=1, ttl=limits.requests_age,
                       description="the outcome of each intake request, by tenant and request id",
                       **common),  # type: ignore[arg-type]
        KeyValueConfig(bucket=s.BUCKET_NOTIFY, history=1, ttl=limits.deliveries_age, max_bytes=limits.notify_bytes,
                       description="notification deliveries and every try at each, by delivery id (30 days)",
                       **common),  # type: ignore[arg-type]
        KeyValueConfig(bucket=s.BUCKET_TOKENS, history=1,
                       description="the HTTP gateway's bearer tokens, by id: their tenant and a SHA-256 of the secret",
                       **common),  # type: ignore[arg-type]
        # Written by the tracker leader once a second (only the minutes that changed); read by time, for the last
        # hour, by the api (jetcron.bus.finished). Bounded by its age: minutes x (1 + tenants with runs that minute).
        KeyValueConfig(bucket=s.BUCKET_FINISHED, history=1, ttl=limits.finished_age,
                       description="finished runs per minute by outcome, the cluster's and each tenant's",
                       **common),  # type: ignore[arg-type]
        # Keyed as jobs are (`tenant.name`); read by the api and watched by every trigger replica, written by the api.
        KeyValueConfig(bucket=s.BUCKET_CALENDARS, history=16, max_bytes=limits.calendars_bytes,
                       description="named calendars (dates, rules, windows) jobs skip or keep to; history kept",
                       **common),  # type: ignore[arg-type]
        # A few keys per job of a flow, each written when its value changes and read in one step
        # (jetcron.core.join_marks): no TTL, since a mark that aged out would be read again from a job's newest runs
        # only.
        KeyValueConfig(bucket=s.BUCKET_JOINS, history=1,
                       description="flows: each latest join's marks (an upstream's last success, when a dependent "
                                   "last ran, its waiting run) and each job's dependents",
                       **common),  # type: ignore[arg-type]
        KeyValueConfig(bucket=s.BUCKET_CLUSTER, history=1,
                       description="settings fixed when the cluster was created (the trigger's shard count)",
                       **common),  # type: ignore[arg-type]
    ]


def consumer_configs(limits: Limits | None = None) -> list[tuple[str, ConsumerConfig]]:
    limits = limits or Limits()
    return [
        # Placement holds every run it cannot place yet unacked (waiting for capacity, a quota, its due time). Were
        # its consumer capped below the queue's own limit, the held runs would keep every later one, of any
        # priority or tenant, from ever being seen; capped at the queue's size, a full queue is refused at submit.
        (s.STREAM_PLACE, ConsumerConfig(durable_name=s.CONSUMER_PLACEMENT, ack_policy=AckPolicy.EXPLICIT,
                                        ack_wait=30.0, max_ack_pending=limits.place_msgs,
                                        filter_subject=s.PLACE_ALL)),
        (s.STREAM_EVENTS, ConsumerConfig(durable_name=s.CONSUMER_TRACKER, ack_policy=AckPolicy.EXPLICIT,
                                         ack_wait=30.0, max_ack_pending=20_000, filter_subject=s.EVENTS_ALL)),
        (s.STREAM_SUBMIT, ConsumerConfig(durable_name=s.CONSUMER_INTAKE, ack_policy=AckPolicy.EXPLICIT,
                                         ack_wait=30.0, max_ack_pending=1000, filter_subject=s.SUBMIT_ALL)),
        # From the consumer's creation on (the first start): runs recorded before were never promised a notice.
        (s.kv_stream(s.BUCKET_RUNS), ConsumerConfig(
            durable_name=s.CONSUMER_NOTIFIER, ack_policy=AckPolicy.EXPLICIT, deliver_policy=DeliverPolicy.NEW,
            ack_wait=60.0, max_ack_pending=20_000, filter_subject=s.RUN_CHANGES)),
        (s.STREAM_REDELIVER, ConsumerConfig(durable_name=s.CONSUMER_REDELIVER, ack_policy=AckPolicy.EXPLICIT,
                                            ack_wait=60.0, max_ack_pending=1000, filter_subject=s.REDELIVER_ALL)),
    ]


_LIMITS = ("max_bytes", "max_msgs", "max_age", "max_msg_size", "max_msgs_per_subject", "allow_msg_ttl",
           "description", "discard", "duplicate_window", "max_consumers")
"""What ensure_topology keeps current on a stream that exists: its limits and what they mean. Retention and
storage cannot change in place; subjects and replicas are the operator's."""
_BUCKET_LIMITS = ("max_bytes", "max_age", "max_msg_size", "max_msgs_per_subject", "allow_msg_ttl", "description",
                  "subject_delete_marker_ttl", "allow_direct")
"""The same for a bucket's stream (the rest of it is nats-py's)."""
_SIZES = (("max_bytes", "bytes"), ("max_msgs", "messages"))


@dataclass(frozen=True)
class Note:
    """A limit ensure_topology changed in place, or left as it was (`refused`) and why."""

    text: str
    refused: bool = False


def upgrade(current: StreamConfig, desired: StreamConfig, held_bytes: int, held_msgs: int,
            fields: tuple[str, ...] = _LIMITS) -> tuple[StreamConfig | None, list[Note]]:
    """The config to update an existing stream to (None: nothing to change) and a line per change or refusal.

    A size limit is never set below what the stream holds: the server would make room by removing its oldest
    messages, which for a queue or a bucket of live records is data jetcron still needs. Such a limit stays as it
    is, and the line says so; shed history first (the run tracker does, near a limit) and start again.
    """
    changes: dict[str, Any] = {}
    notes: list[Note] = []
    held = {"bytes": held_bytes, "messages": held_msgs}
    for field in fields:
        want, have = getattr(desired, field), getattr(current, field)
        if field in ("max_age", "duplicate_window"):
            want, have = float(want or 0), float(have or 0)
        if want is None or want == have:
            continue
        unit = dict(_SIZES).get(field)
        if unit is not None and 0 < want < held[unit]:
            notes.append(Note(f"{current.name}: {field} stays {have}: it holds {held[unit]} {unit}, more than the "
                              f"{want} asked (never shrunk below what it holds)", refused=True))
            continue
        changes[field] = want
        if field != "description":
            notes.append(Note(f"{current.name}: {field} {have} -> {want}"))
    if not changes:
        return None, notes
    return replace(current, **changes), notes


async def _update(js: JetStreamContext, desired: StreamConfig, notes: list[Note],
                  fields: tuple[str, ...] = _LIMITS) -> None:
    info = await js.stream_info(desired.name or "")
    config, lines = upgrade(info.config, desired, int(info.state.bytes or 0), int(info.state.messages or 0), fields)
    if config is not None:
        try:
            await js.update_stream(config)
        except BadRequestError as exc:
            # A cluster refuses a few changes in place (a replica count it cannot place): the stream stays usable.
            notes.append(Note(f"{desired.name}: limits not changed ({exc.description})", refused=True))
            return
        except APIError as exc:
            if exc.err_code != _NO_STORAGE:
                raise
            notes.append(Note(f"{desired.name}: limits not changed: the server's JetStream store cannot reserve "
                              f"them ({exc.description}); raise max_file_store or lower the JETCRON_*_MAX_BYTES "
                              "settings", refused=True))
            return
    notes.extend(lines)


async def _ensure_stream(js: JetStreamContext, config: StreamConfig, notes: list[Note]) -> None:
    try:
        await js.stream_info(config.name or "")
    except NotFoundError:
        await js.add_stream(config)
        return
    await _update(js, config, notes)


FENCED_BUCKETS = (s.BUCKET_LEASES, s.BUCKET_LEADERS, s.BUCKET_RUNS)
"""Buckets whose revisions are fencing tokens (jetcron.bus.lease; a run's `assigned` write, wire AssignRun.token):
they must only grow, also across a bucket deleted and made again, which would otherwise start its sequence at 1
again under runs still holding tokens of the one before. A runs bucket made from the floor also hands out
revisions above every lease token of its cluster, so an attempt's token may be either (jetcron.core.leases.claims_late);
one made before (its sequence from 1) is left as it is, and its attempts keep the claim's revision."""
_ALREADY_IN_USE = 10058  # "stream name already in use with a different configuration"
_NO_STORAGE = 10047  # "insufficient storage resources available": max_bytes beyond the server's store
_MAX_CONSUMERS = 10026  # "maximum consumers limit reached"


def fenced_stream(config: KeyValueConfig, first_seq: int) -> StreamConfig:
    """The stream nats-py's `create_key_value` makes for `config`, starting at `first_seq` (which it cannot
    set): a lease bucket made again continues above every token handed out before."""
    return StreamConfig(
        name=s.kv_stream(config.bucket), description=config.description, subjects=[f"$KV.{config.bucket}.>"],
        allow_direct=config.direct, allow_rollup_hdrs=True, allow_msg_ttl=True, deny_delete=True,
        discard=DiscardPolicy.NEW, duplicate_window=min(DUPLICATE_WINDOW, config.ttl or DUPLICATE_WINDOW),
        max_age=config.ttl, max_bytes=config.max_bytes, max_consumers=-1, max_msg_size=config.max_value_size,
        max_msgs=-1, max_msgs_per_subject=config.history, num_replicas=config.replicas, storage=config.storage,
        republish=config.republish, first_seq=first_seq)


def bucket_stream(config: KeyValueConfig) -> StreamConfig:
    """The limits of the stream behind a bucket, as ensure_topology keeps them (the rest is nats-py's)."""
    return StreamConfig(name=s.kv_stream(config.bucket), description=config.description,
                        max_age=config.ttl or 0, max_bytes=config.max_bytes or -1, max_msg_size=config.max_value_size,
                        max_msgs_per_subject=config.history, allow_msg_ttl=True, discard=DiscardPolicy.NEW,
                        subject_delete_marker_ttl=config.limit_marker_ttl, allow_direct=config.direct or None)


async def _ensure_bucket(js: JetStreamContext, config: KeyValueConfig, notes: list[Note]) -> None:
    try:
        await js.key_value(config.bucket)
    except Exception:
        if config.bucket not in FENCED_BUCKETS:
            await js.create_key_value(config)
            return
    else:
        await _update(js, bucket_stream(config), notes, _BUCKET_LIMITS)
        return
    try:
        await js.add_stream(fenced_stream(config, fencing_floor(datetime.now(UTC))))
    except BadRequestError as exc:
        # Another service made it first, a moment earlier (so from another floor): that one is as good.
        if exc.err_code != _ALREADY_IN_USE:
            raise
        try:
            await js.key_value(config.bucket)
        except Exception:
            # Made by another, and not yet known to the node this asks (a cluster answers the create before
            # every node has the stream): the same step, a moment later, finds it.
            raise _NotYet(config.bucket) from None


# A cluster leaves all but one of several concurrent creators of the same R3 stream without any reply,
# and answers 503 around a meta leader election: every service starting at once on a fresh cluster hits
# this. A node not yet known to the meta leader (a cluster just formed, or one node restarting) makes an R3
# create fail with 10005, "no suitable peers for placement": it is there a moment later. Each step checks
# before it creates, so repeating it is safe.
class _NotYet(Unavailable):
    """A stream another service has just made, not yet seen from here (retried by _until_answered)."""


_TRANSIENT = (asyncio.TimeoutError, nats.errors.TimeoutError, nats.errors.NoRespondersError, ServiceUnavailableError,
              _NotYet)
_NO_PEERS_YET = 10005
_STORE_NOT_MADE = 10049
"""`error creating store for stream` (500): seen when services starting together made the same stream at once (a
trigger exited at start under make test's load); the next try finds the stream made."""
SETUP_DEADLINE = 60.0


def _transient(exc: Exception) -> bool:
    return (isinstance(exc, _TRANSIENT) or (isinstance(exc, BadRequestError) and exc.err_code == _NO_PEERS_YET)
            or (isinstance(exc, APIError) and exc.err_code == _STORE_NOT_MADE))


async def _until_answered(step: Callable[[], Awaitable[object]], deadline: float, *, delay: float = 0.2) -> None:
    """Run `step` until it is answered, retrying transient refusals with a growing pause until `deadline`."""
    loop = asyncio.get_running_loop()
    while True:
        try:
            await step()
            return
        except Exception as exc:
            if not _transient(exc) or loop.time() + delay > deadline:
                raise
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)


async def ensure_topology(js: JetStreamContext, *, replicas: int = 1, limits: Limits | None = None) -> list[Note]:
    """Create everything missing and bring the limits of what exists up to `limits`, in place (never by deleting
    data: see `upgrade`); safe to run from every service at every start, all at once. Returns a line per limit
    changed or left as it was, for the caller to log.

    Give it a JetStream context with a short request timeout: an unanswered request is retried.
    """
    limits = limits or Limits()
    notes: list[Note] = []
    deadline = asyncio.get_running_loop().time() + SETUP_DEADLINE
    for stream in stream_configs(replicas, limits):
        await _until_answered(partial(_ensure_stream, js, stream, notes), deadline)
    for bucket in bucket_configs(replicas, limits):
        await _until_answered(partial(_ensure_bucket, js, bucket, notes), deadline)
    for stream_name, consumer in consumer_configs(limits):
        await _until_answered(partial(js.add_consumer, stream_name, consumer), deadline)
    return list(dict.fromkeys(notes))  # a retried step notes its lines again


def stream_names(limits: Limits | None = None) -> list[str]:
    """Every stream jetcron makes, buckets and object stores by their streams' names (KV_..., OBJ_...)."""
    limits = limits or Limits()
    return ([c.name or "" for c in stream_configs(1, limits)]
            + [s.kv_stream(b.bucket or "") for b in bucket_configs(1, limits)])


async def stream_names_on_server(nc: Client) -> set[str]:
    """The names of every stream of the account ($JS.API.STREAM.NAMES, a page of 1024 at a time)."""
    have: set[str] = set()
    while True:
        reply = await nc.request(s.JS_STREAM_NAMES, json.dumps({"offset": len(have)}).encode(), timeout=5)
        body = json.loads(reply.data)
        if "error" in body:
            raise ServiceUnavailableError(description=str(body["error"]))
        page = body.get("streams") or []
        have.update(page)
        if not page or len(have) >= int(body.get("total", 0)):
            return have


async def missing_parts(nc: Client, js: JetStreamContext) -> list[str]:
    """The streams, buckets and durable consumers of the topology the server no longer has (an operator or a
    script deleted them): `STREAM` or `STREAM/CONSUMER`. Empty when everything is there."""
    have = await stream_names_on_server(nc)
    missing = [name for name in stream_names() if name not in have]
    for stream, consumer in consumer_configs():
        if stream not in have:
            continue  # the stream's own entry says it; its consumers went with it
        try:
            await js.consumer_info(stream, consumer.durable_name or "")
        except NotFoundError:
            missing.append(f"{stream}/{consumer.durable_name}")
    return missing


def agent_durable(agent_id: str) -> Durable:
    """The agent's own durable consumer of its assignments."""
    return Durable(name=s.assign_consumer(agent_id), filter_subject=s.assign_subject(agent_id), ack_wait=30.0,
                   max_ack_pending=1000, inactive_threshold=7 * DAY)


async def ensure_durable(js: JetStreamContext, stream: str, durable: Durable) -> str:
    """Make a durable consumer (the same config again changes nothing). Agents do not make the topology: on a fresh
    server this waits (at most SETUP_DEADLINE) for a core service or `jetcron up` to make the stream."""
    config = ConsumerConfig(durable_name=durable.name, ack_policy=AckPolicy.EXPLICIT, ack_wait=durable.ack_wait,
                            max_ack_pending=durable.max_ack_pending, filter_subject=durable.filter_subject,
                            inactive_threshold=durable.inactive_threshold or None)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + SETUP_DEADLINE
    while True:
        try:
            await _until_answered(partial(js.add_consumer, stream, config), deadline)
            return durable.name
        except NotFoundError as exc:
            if loop.time() > deadline:
                raise translate(exc, f"make consumer {stream}/{durable.name}") from exc
            await asyncio.sleep(0.5)
        except JetcronError:
            raise
        except APIError as exc:
            if exc.err_code == _MAX_CONSUMERS:
                raise Misconfigured(
                    f"make consumer {stream}/{durable.name}: {stream} takes no more consumers (its max_consumers; "
                    "each agent has one on the assignment stream: raise JETCRON_AGENTS_MAX)") from None
            raise translate(exc, f"make consumer {stream}/{durable.name}") from exc
        except Exception as exc:
            raise translate(exc, f"make consumer {stream}/{durable.name}") from exc
