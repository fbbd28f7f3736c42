"""The one idempotent bootstrap of the topology, safe from every service at once, and an agent's own consumer."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from functools import partial

import nats.errors
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DiscardPolicy, KeyValueConfig, StreamConfig
from nats.js.errors import APIError, BadRequestError, NotFoundError, ServiceUnavailableError

from jetcron.bus.kv import translate
from jetcron.bus.ports import Durable
from jetcron.bus.topology._layout import bucket_configs, consumer_configs, stream_configs
from jetcron.bus.topology._limits import DUPLICATE_WINDOW, Limits
from jetcron.bus.topology._upgrade import BUCKET_LIMITS, Note, update_limits
from jetcron.core.errors import JetcronError, Misconfigured, Unavailable
from jetcron.core.lifecycle.leases import fencing_floor
from jetcron.wire import subjects as s


async def _ensure_stream(js: JetStreamContext, config: StreamConfig, notes: list[Note]) -> None:
    try:
        await js.stream_info(config.name or "")
    except NotFoundError:
        await js.add_stream(config)
        return
    await update_limits(js, config, notes)


FENCED_BUCKETS = (s.BUCKET_LEASES, s.BUCKET_LEADERS, s.BUCKET_RUNS)
"""Buckets whose revisions are fencing tokens (jetcron.bus.lease; a run's `assigned` write, wire AssignRun.token):
they must only grow, also across a bucket deleted and made again, which would otherwise start its sequence at 1
again under runs still holding tokens of the one before. A runs bucket made from the floor also hands out
revisions above every lease token of its cluster, so an attempt's token may be either
(jetcron.core.lifecycle.leases.claims_late); one made before (its sequence from 1) is left as it is, and its attempts
keep the claim's revision."""
_ALREADY_IN_USE = 10058  # "stream name already in use with a different configuration"
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
        await update_limits(js, bucket_stream(config), notes, BUCKET_LIMITS)
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
"""`error creating store for stream` (500): what services starting together may get when they make the same stream
at once; the next try finds the stream made."""
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
