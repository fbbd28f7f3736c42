"""A tenant's policy: its weight, quotas, named queues, retention, priority ceiling and preemption."""

from __future__ import annotations

import msgspec

from jetcron.core.models.job_spec import HistoryPolicy
from jetcron.core.models.spec_choices import Priority
from jetcron.core.models.stored_format import Spec


class Preemption(Spec, frozen=True, kw_only=True):
    """Whether the running runs of a tenant, or of one of its named queues, may be preempted: stopped (SIGTERM, a
    grace period, SIGKILL) to give their place to a waiting run of strictly higher priority, and queued again as a
    new attempt that resumes from their own checkpoint (docs/preemption.md). A field left unset takes the
    cluster's setting (JETCRON_PREEMPTION_*)."""

    enabled: bool = True
    """False: never preempted (a queue that opts out inside a preemptible tenant)."""
    max_preemptions: int | None = None
    """A run preempted this many times is not preempted again (JETCRON_PREEMPTION_MAX_PER_RUN)."""
    min_runtime_seconds: float | None = None
    """A run is not preempted before its attempt has run this long (JETCRON_PREEMPTION_MIN_RUNTIME)."""
    grace_seconds: float | None = None
    """Seconds between SIGTERM and SIGKILL when it is preempted: time to save a checkpoint
    (JETCRON_PREEMPTION_GRACE)."""


class QueueQuota(Spec, frozen=True, kw_only=True):
    """What the running runs of one of a tenant's named queues (JobSpec.queue) may hold at once, inside the
    tenant's own quotas (both must hold for a run to be placed). A field left unset does not limit the queue."""

    max_cpu: float | None = None
    """CPU cores, summed over the queue's assigned and running runs (a gang counts every host)."""
    max_memory_mb: int | None = None
    """Memory in MB, summed the same way."""
    max_gpus: int | None = None
    """GPUs, summed the same way."""
    preemption: Preemption | None = None
    """Whether the queue's running runs may be preempted, in place of its tenant's setting (TenantPolicy.preemption);
    unset: the tenant's."""


class TenantPolicy(Spec, frozen=True, kw_only=True):
    """Quotas and weight for one tenant."""

    tenant: str
    weight: float = 1.0
    max_cpu: float | None = None
    max_memory_mb: int | None = None
    max_gpus: int | None = None
    max_submits_per_second: float | None = None
    """Creates, triggers, backfills and replays per second (bursts of as many), per api replica."""
    max_pending_runs: int | None = None
    """Runs waiting for placement at most; a submit beyond it is refused (rate_limited) until some start."""
    history: HistoryPolicy | None = None
    """How long the tenant's finished runs are kept, where a job says nothing; unset fields fall back to the
    cluster's. Applies to runs recorded after it is set."""
    max_priority: Priority | None = None
    """The highest priority the tenant's jobs and runs may ask for (created, updated or reprioritized); unset: any."""
    queues: dict[str, QueueQuota] = msgspec.field(default_factory=dict)
    """Quotas per named queue of the tenant (JobSpec.queue), e.g. {"batch": {"max_cpu": 8}}: a queue at its quota
    waits while the tenant's other queues go on. A queue not named here is capped by the tenant's quotas only."""
    preemption: Preemption | None = None
    """Whether the tenant's running runs may be preempted by waiting runs of strictly higher priority (any
    tenant's), and its guards (docs/preemption.md); a queue's own setting wins. Unset: never preempted."""
    allow_run_as_root: bool = False
    """Whether the tenant's jobs may ask to run as root (JobSpec.run_as_root): refused at create and update
    otherwise, and checked again when an attempt starts (an agent must allow root too, JETCRON_AGENT_ALLOW_ROOT).
    A job running as root reaches everything on its agent's host: the agent's credential, the secrets key, every
    other job."""
