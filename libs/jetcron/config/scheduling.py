"""Settings: how long leases live, when the trigger fires, where placement sends a run, how often the
parts check on each other."""

from __future__ import annotations

from pydantic import Field

from jetcron.config.group import SettingsGroup
from jetcron.wire.messages import HandBy


class LeaseSettings(SettingsGroup):
    """How long run, claim and leader leases live, and how a finish report or a hand-off reaches its taker."""

    run_lease_ttl: float = Field(default=10.0, gt=1)
    """Seconds a run lease lives without renewal (judged by the server): each agent's own lease, which fences every
    attempt it holds, and a run claim of its own (a gang member's); each is renewed at a third of it."""
    report_by: HandBy = "direct"
    """How an agent's finish report reaches the run trackers: `direct`, a core NATS request a tracker answers once
    it has written the run record, so no RunFinished is stored (one acknowledged write less per run); a report not
    answered so within `handoff_timeout` (no tracker answering, a finish ahead of its start, the storage slow)
    goes to JC_EVENTS. `stream`, every finish to JC_EVENTS: for a cluster where every finish must be on the events
    stream's trail of each run's reports, at one stored write per run. Trackers take both."""
    handoff_timeout: float = Field(default=0.5, gt=0, le=30)
    """Seconds placement waits for an agent's answer to a direct hand-off (an agent for a tracker's) before it sends
    the message to its stream; a taker that let one pass is sent to the stream only for `handoff_timeout` × 20
    after."""
    run_claim_ttl: float = Field(default=600.0, gt=1)
    """Seconds a run claim bound to its agent's lease lives without renewal: the agent renews it at a third of
    this, so that it outlives no run by much once the run has ended; its liveness is the agent lease's, not this."""
    leader_lease_ttl: float = Field(default=5.0, gt=1)
    """Seconds a placement or tracker leader lease lives without renewal."""


class TriggerSettings(SettingsGroup):
    """The trigger: its shards, their leases, and how far ahead it stages an occurrence (herds)."""

    trigger_shards: int = Field(default=16, ge=1, le=4096)
    """Shards of the job schedules (fixed by the first trigger replica; a replica configured otherwise refuses
    to start)."""
    trigger_lease_ttl: float = Field(default=2.0, gt=0.5)
    """Trigger shard lease TTL: a dead replica's shards are taken over within about TTL + TTL/3."""
    trigger_horizon: float = Field(default=2.0, ge=0)
    """Seconds ahead an occurrence is recorded and handed to placement (herd staging)."""
    trigger_herd_rate: float = Field(default=200.0, gt=0)
    """Runs per second the cluster can record, place and lease ahead of their due time. A second holding more
    occurrences than horizon x rate is staged earlier: each one beyond that 1/rate s before the previous."""
    trigger_herd_max_lead: float = Field(default=900.0, ge=0)
    """The most seconds beyond the horizon a herd's occurrence is staged ahead (a herd larger than
    rate x this starts late by the rest)."""


class PlacementSettings(SettingsGroup):
    """Placement: how early it assigns a run, how a waiting run ages, and when a run may be preempted."""

    placement_lead: float | None = Field(default=None, ge=0)
    """Seconds before its due time placement assigns a later attempt (a retry after its backoff); default: the
    trigger horizon. A first attempt the trigger staged ahead is assigned as soon as placement has it."""
    placement_ageing_seconds: float = Field(default=300.0, gt=0)
    """Seconds a waiting run takes to be promoted one priority level (low -> normal -> high -> critical) in
    placement's order, so low-priority work behind a steady stream of higher work still starts."""
    preemption_max_per_run: int = Field(default=3, ge=0, le=1000)
    """A run preempted this many times is not preempted again, where its tenant's or queue's policy does not say
    (TenantPolicy.preemption; docs/preemption.md). Read by placement."""
    preemption_min_runtime: float = Field(default=60.0, ge=0)
    """Seconds an attempt must have run before it may be preempted, where its policy does not say."""
    preemption_grace: float = Field(default=30.0, ge=0)
    """Seconds between SIGTERM and SIGKILL when a run is preempted (time to save a checkpoint), where its policy
    does not say; its next attempt is due once they have passed."""


class LivenessSettings(SettingsGroup):
    """How often the cluster's parts show that they live and look for what went missing; and the shortest schedule
    interval a job may have, kept here where docs/settings.md lists it."""

    min_interval: float = Field(default=1.0, gt=0)
    """The shortest schedule interval a job may have, in seconds."""
    redrive_after: float = Field(default=30.0, gt=0)
    """A run scheduled but not placed this long after its due time is handed to placement again (a PlaceRun), and
    again at ages that double, at most every 16 minutes (jetcron.core.lifecycle.reconcile.REDRIVE_GAP_MAX); the tracker
    re-drives at most 64 runs a second (jetcron_services.run_tracker.reconciler.REDRIVES_PER_SWEEP), the rest a period
    later."""
    topology_check: float = Field(default=10.0, gt=0)
    """Seconds between a core service's checks that every stream, bucket and durable consumer still exists: one
    deleted under the running system is made again, empty, and logged as an error."""
    assign_stall: float = Field(default=30.0, gt=0)
    """An assignment not started after this many seconds is re-dispatched."""
    heartbeat: float = Field(default=2.0, gt=0)
    """Seconds between an agent's heartbeats (and services' registry updates)."""
