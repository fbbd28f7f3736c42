"""Settings: what the streams and buckets hold at most, and for how long (retention)."""

from __future__ import annotations

from typing import Self

from pydantic import Field, model_validator

from jetcron.bus.topology import Limits
from jetcron.config.group import SettingsGroup
from jetcron.core.lifecycle.retention import ClusterHistory

_MiB = 1024 * 1024
_GiB = 1024 * _MiB


class StorageSettings(SettingsGroup):
    """Every stream's and bucket's size and age, the cluster's retention of finished runs, and when the run tracker
    sheds them early."""

    agents_max: int = Field(default=20_000, ge=1)
    """Agents the cluster takes at most: each has a durable consumer of its own on the assignment stream, whose
    max_consumers this is (left unset, nats-server takes 1,000 and refuses the next agent). An existing stream is
    raised in place at start."""
    place_queue_max: int = Field(default=2_000_000, ge=10)
    """Messages the placement and assignment queue streams hold at most, and runs the placement leader holds
    waiting (their records are the hand-off); submits are refused (unavailable, retry) once any is 90 % full."""
    history_keep_seconds: float = Field(default=3 * 86400.0, gt=0)
    """Seconds a finished run is kept after it ended (its record with every attempt, its events and output), where
    neither its job nor its tenant says otherwise (HistoryPolicy); then the server removes it (per-message TTL)."""
    history_min_seconds: float = Field(default=3600.0, ge=1)
    """The least any finished run is kept, whatever a job or tenant asks: watchers and the notifier read its last
    change first. A run is also kept at least its job's misfire catch-up window (its record is its occurrence's
    fire gate)."""
    history_max_seconds: float = Field(default=90 * 86400.0, gt=0)
    """The most a job or tenant may ask to keep runs; also the events and output streams' max_age."""
    history_keep_succeeded: int | None = Field(default=None, ge=0)
    """At most this many succeeded runs kept per job (the newest), where no job or tenant says; unset: no limit."""
    history_keep_failed: int | None = Field(default=None, ge=0)
    """The same for failed, dead and blocked runs."""
    dlq_keep_seconds: float = Field(default=30 * 86400.0, gt=0)
    """Seconds a dead letter is kept (JC_DLQ's max_age); a dead run's record is kept at least as long."""
    idempotency_max_seconds: float = Field(default=30 * 86400.0, gt=0)
    """The longest lifetime an idempotency key may ask for (once(key, ttl), a request's Idempotency-Key): the
    idempotency bucket's max_age, which would otherwise cut a longer TTL short."""
    request_key_seconds: float = Field(default=86400.0, gt=0)
    """Seconds an api request's idempotency key (and an intake request's outcome) is remembered."""
    runs_max_bytes: int = Field(default=0, ge=0)
    """Bytes the run records' bucket may hold; 0 (the default): no limit of its own, so it shares the server's
    JetStream store (max_file_store) with every stream without one, and JetStream reserves nothing for it. Ended
    runs age out by their retention; near a limit (its own or the store's) the run tracker lets the oldest go
    (JETCRON_STORAGE_SHED_AT). docs/operations.md, "Sizing the streams"."""
    jobs_max_bytes: int = Field(default=_GiB, ge=_MiB)
    """Bytes the job definitions' bucket (16 revisions kept per job) holds at most."""
    events_max_bytes: int = Field(default=0, ge=0)
    """Bytes the run events stream (the tracker's input and the audit trail) may hold; 0: no limit of its own, as
    for the run records."""
    logs_max_bytes: int = Field(default=0, ge=0)
    """Bytes of run output kept at most (the oldest goes first when full); 0: no limit of its own, as for the run
    records."""
    dlq_max_bytes: int = Field(default=_GiB, ge=_MiB)
    """Bytes of dead letters kept at most."""
    idempotency_max_bytes: int = Field(default=_GiB, ge=_MiB)
    """Bytes of idempotency keys kept at most; full, new keys are refused (fail closed), never old ones forgotten."""
    checkpoints_max_bytes: int = Field(default=_GiB, ge=_MiB)
    """Bytes of run checkpoints (jetcron.checkpoint) kept at most."""
    notify_max_bytes: int = Field(default=256 * _MiB, ge=_MiB)
    """Bytes of each of the notification delivery log and the subject targets' stream."""
    redeliver_queue_max: int = Field(default=100_000, ge=10)
    """Requests to try a parked notification again that may wait at most (JC_REDELIVER)."""
    agent_entry_seconds: float = Field(default=30.0, gt=0)
    """How long an agent's entry in jc_agents outlives its last heartbeat (the bucket's max_age)."""
    service_entry_seconds: float = Field(default=15.0, gt=0)
    """How long a service instance's entry in jc_services outlives its last heartbeat."""
    notify_keep_seconds: float = Field(default=7 * 86400.0, gt=0)
    """Seconds a notice for a rule with a `subject` target waits in JC_NOTIFY for its service to read it."""
    deliveries_keep_seconds: float = Field(default=30 * 86400.0, gt=0)
    """Seconds the delivery log (jc_notify) keeps each notification delivery and its tries."""
    finished_counts_keep_seconds: float = Field(default=7 * 86400.0, ge=3600)
    """Seconds the finished runs per minute (jc_finished, the dashboard's chart) are kept: each minute's record
    ages out this long after its last write."""
    calendars_max_bytes: int = Field(default=64 * _MiB, ge=_MiB)
    """Bytes the named calendars' bucket (jc_calendars, 16 revisions kept per calendar) holds at most."""
    storage_shed_at: float = Field(default=0.9, gt=0, le=1)
    """Used share of a stream's limit (or of the server's JetStream store) at which the run tracker lets the oldest
    finished runs go ahead of their time, so that new occurrences are still recorded."""
    storage_check_seconds: float = Field(default=15.0, gt=0)
    """Seconds between the run tracker's looks at every stream's and the server's storage (headroom metrics)."""

    @model_validator(mode="after")
    def _history_in_bounds(self) -> Self:
        """The cluster's retention lies between its own floor and ceiling (a job's or tenant's must too); a request
        key is kept no longer than the idempotency bucket keeps any key."""
        if not self.history_min_seconds <= self.history_keep_seconds <= self.history_max_seconds:
            raise ValueError(
                f"JETCRON_HISTORY_KEEP_SECONDS ({self.history_keep_seconds:.0f}) must lie between "
                f"JETCRON_HISTORY_MIN_SECONDS ({self.history_min_seconds:.0f}) and JETCRON_HISTORY_MAX_SECONDS "
                f"({self.history_max_seconds:.0f})")
        if self.request_key_seconds > self.idempotency_max_seconds:
            raise ValueError(f"JETCRON_REQUEST_KEY_SECONDS ({self.request_key_seconds:.0f}) must not exceed "
                             f"JETCRON_IDEMPOTENCY_MAX_SECONDS ({self.idempotency_max_seconds:.0f})")
        return self

    @property
    def limits(self) -> Limits:
        """Every stream's and bucket's limits, from these settings (jetcron.bus.topology)."""
        return Limits(place_msgs=self.place_queue_max, runs_bytes=self.runs_max_bytes, jobs_bytes=self.jobs_max_bytes,
                      events_age=self.history_max_seconds, events_bytes=self.events_max_bytes,
                      logs_age=self.history_max_seconds, logs_bytes=self.logs_max_bytes,
                      dlq_age=self.dlq_keep_seconds, dlq_bytes=self.dlq_max_bytes,
                      idempotency_age=self.idempotency_max_seconds, idempotency_bytes=self.idempotency_max_bytes,
                      requests_age=self.request_key_seconds, job_marker_age=self.history_min_seconds,
                      checkpoints_bytes=self.checkpoints_max_bytes,
                      notify_bytes=self.notify_max_bytes, notify_age=self.notify_keep_seconds,
                      deliveries_age=self.deliveries_keep_seconds, redeliver_msgs=self.redeliver_queue_max,
                      agents_ttl=self.agent_entry_seconds, services_ttl=self.service_entry_seconds,
                      finished_age=self.finished_counts_keep_seconds, calendars_bytes=self.calendars_max_bytes,
                      agents_max=self.agents_max)

    @property
    def history(self) -> ClusterHistory:
        """The cluster's retention (jetcron.core.lifecycle.retention)."""
        return ClusterHistory(keep_seconds=self.history_keep_seconds, min_seconds=self.history_min_seconds,
                              max_seconds=self.history_max_seconds, keep_succeeded=self.history_keep_succeeded,
                              keep_failed=self.history_keep_failed, dead_letter_seconds=self.dlq_keep_seconds)
