"""What jetcron keeps on the server: every stream, bucket and durable consumer, with its limits."""

from __future__ import annotations

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

from jetcron.bus.ports import Durable
from jetcron.bus.topology._limits import DAY, DUPLICATE_WINDOW, HOUR, MAX_MSG, Limits
from jetcron.wire import subjects as s


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
        # (jetcron.core.lifecycle.retention.stream_ttl); max_age is the ceiling of every retention.
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
        # A job that ends (a fired one-shot job, a deleted one: jetcron.core.lifecycle.retention.job_ttl) leaves a
        # delete marker when the server removes it, so every watcher drops it from its index. (An ended job is no longer
        # planned whether or not the server has removed it: jetcron_services.trigger.warm.Warm.fireable.)
        KeyValueConfig(bucket=s.BUCKET_JOBS, history=16, max_bytes=limits.jobs_bytes,
                       limit_marker_ttl=limits.job_marker_age,
                       description="job definitions (history kept for audit)", **common),  # type: ignore[arg-type]
        # No max_age: a run that has not ended must stay however long it takes; an ended one is written with its
        # own TTL (jetcron.core.lifecycle.retention.record_ttl).
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
        # (jetcron.core.lifecycle.join_marks): no TTL, since a mark that aged out would be read again from a job's
        # newest runs only.
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


def stream_names(limits: Limits | None = None) -> list[str]:
    """Every stream jetcron makes, buckets and object stores by their streams' names (KV_..., OBJ_...)."""
    limits = limits or Limits()
    return ([c.name or "" for c in stream_configs(1, limits)]
            + [s.kv_stream(b.bucket or "") for b in bucket_configs(1, limits)])


def agent_durable(agent_id: str) -> Durable:
    """The agent's own durable consumer of its assignments."""
    return Durable(name=s.assign_consumer(agent_id), filter_subject=s.assign_subject(agent_id), ack_wait=30.0,
                   max_ack_pending=1000, inactive_threshold=7 * DAY)
