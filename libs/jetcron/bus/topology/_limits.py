"""Every stream's and bucket's size and age, and the units they are counted in."""

from __future__ import annotations

from dataclasses import dataclass

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
