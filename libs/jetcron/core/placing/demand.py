"""What a run waiting for a place asks for: the one input of placement (jetcron.core.placing.placement) and of the
reasons it gives when there is none (jetcron.core.placing.placement_reasons)."""

from __future__ import annotations

from datetime import datetime

import msgspec

from jetcron.core.models import Priority, Resources


class Demand(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One run waiting for a place (untracked by the cycle collector: plain data, held in bulk;
    jetcron.core.models.stored_format)."""

    run_id: str
    tenant: str
    priority: Priority
    resources: Resources
    require: dict[str, str] = msgspec.field(default_factory=dict)
    """Agent labels that must all match."""
    needs: list[str] = msgspec.field(default_factory=list)
    """Agent capabilities that must all be present, e.g. docker."""
    enqueued_at: datetime
    """When the run began to wait: when it was queued, or its due time if that is later (a run staged ahead of
    its due time is not waiting yet). Its ageing and its place in its queue count from it."""
    queue: str = "default"
    """The tenant's named queue: a tenant's queues take turns inside its share (jetcron.core.placing.fairness)."""


def waits_from(now: datetime, due_at: datetime) -> datetime:
    """A run's `enqueued_at`: it waits, and ages towards a higher priority level, from when it is due, not from
    when it was staged. A midnight herd recorded over the 500 s before its instant had its first runs two ageing
    periods up at the instant, and the levels, served oldest first, overrode the tenants' weights (100,000 runs,
    weights 1 : 2 : 1, started 0.30 : 0.39 : 0.30; bench/scale.py). As Slurm's age factor counts from
    eligibility."""
    return max(now, due_at)
