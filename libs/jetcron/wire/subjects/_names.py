"""Streams, buckets, durable consumers and headers, and the subjects of a bucket's stream."""

from __future__ import annotations

PREFIX = "jc"

# Streams
STREAM_PLACE = "JC_PLACE"
STREAM_ASSIGN = "JC_ASSIGN"
STREAM_EVENTS = "JC_EVENTS"
STREAM_LOGS = "JC_LOGS"
STREAM_DLQ = "JC_DLQ"
STREAM_SUBMIT = "JC_SUBMIT"
STREAM_NOTIFY = "JC_NOTIFY"
STREAM_REDELIVER = "JC_REDELIVER"
STREAM_CHECKPOINTS = "JC_CKPT"

# KV buckets
BUCKET_JOBS = "jc_jobs"
BUCKET_RUNS = "jc_runs"
BUCKET_CURSORS = "jc_cursors"
BUCKET_LEASES = "jc_leases"
BUCKET_LEADERS = "jc_leaders"
BUCKET_AGENTS = "jc_agents"
BUCKET_IDEMPOTENCY = "jc_idem"
BUCKET_TENANTS = "jc_tenants"
BUCKET_SERVICES = "jc_services"
BUCKET_PLACEMENT = "jc_placement"
BUCKET_CLUSTER = "jc_cluster"
BUCKET_SECRETS = "jc_secrets"
BUCKET_TOKENS = "jc_tokens"
BUCKET_SUBMISSIONS = "jc_submissions"
BUCKET_NOTIFY = "jc_notify"
BUCKET_FINISHED = "jc_finished"
BUCKET_CALENDARS = "jc_calendars"
BUCKET_JOINS = "jc_joins"
"""What flows read in one step (jetcron.core.lifecycle.join_marks): each `latest` join's marks, and each job's
dependents."""
OBJECT_CHECKPOINTS = "jc_checkpoints"
"""The object store checkpoints were kept in before JC_CKPT: no longer written or read (docs/security.md)."""

JS_STREAM_NAMES = "$JS.API.STREAM.NAMES"
"""JetStream's list of stream names (the topology check: jetcron.bus.topology.missing_parts)."""


def kv_stream(bucket: str) -> str:
    """The stream behind a KV bucket."""
    return f"KV_{bucket}"


def obj_stream(bucket: str) -> str:
    """The stream behind an object store."""
    return f"OBJ_{bucket}"


def kv_subject(bucket: str, key: str) -> str:
    """The subject of `key` (or a pattern of keys: `run.*.x`, `>`) in a KV bucket."""
    return f"$KV.{bucket}.{key}"


# Durable consumers
CONSUMER_PLACEMENT = "placement"
CONSUMER_TRACKER = "run_tracker"
CONSUMER_INTAKE = "api_intake"
CONSUMER_NOTIFIER = "notifier"
"""On the run records' own stream (KV_jc_runs): every committed change of every run, from the bucket's start."""
CONSUMER_REDELIVER = "notifier_redeliver"

# Headers
HDR_MSG_ID = "Nats-Msg-Id"
HDR_TTL = "Nats-TTL"
HDR_EXPECTED_LAST_SUBJECT_SEQ = "Nats-Expected-Last-Subject-Sequence"
HDR_EXPECTED_LAST_SUBJECT_SEQ_SUBJECT = "Nats-Expected-Last-Subject-Sequence-Subject"
"""Makes the revision check above apply to the last message on a subject filter (nats-server 2.11+)."""
HDR_ROLLUP = "Nats-Rollup"
ROLLUP_SUBJECT = "sub"
"""Nats-Rollup: sub: the message replaces every earlier message of its subject (a key's history)."""
HDR_TRACEPARENT = "traceparent"
HDR_LOG_STREAM = "Jc-Log-Stream"
HDR_LOG_END = "Jc-Log-End"
