"""Messages between services: commands are imperative, events past tense; tolerant of new fields."""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar, Literal

import msgspec

from jetcron.core.models import JobSpec, Priority, Resources, Run
from jetcron.wire.api import ErrorBody


class _Msg(msgspec.Struct, frozen=True, kw_only=True, gc=False, omit_defaults=True):
    """Inter-service messages ignore unknown fields so services can be upgraded one at a time.

    Untracked by the cycle collector and sent without the fields at their defaults, like the records
    (jetcron.core.models): plain data, held in bulk."""

    stored_compact: ClassVar[bool] = True


class PlaceRun(_Msg, frozen=True, kw_only=True):
    """Command to placement: find an agent for this attempt."""

    run_id: str
    attempt: int
    job: str
    tenant: str
    priority: Priority
    resources: Resources
    require: dict[str, str] = msgspec.field(default_factory=dict)
    needs: list[str] = msgspec.field(default_factory=list)
    due_at: datetime
    staged: bool = False
    queue: str = "default"
    """A first attempt the trigger recorded ahead of its due time (a herd may be staged minutes ahead):
    assign it as soon as it fits, not `lead` seconds before it is due."""


class AssignRun(_Msg, frozen=True, kw_only=True):
    """Command to one agent: run this attempt."""

    run_id: str
    attempt: int
    job: str
    agent: str
    spec: JobSpec
    scheduled_at: datetime
    due_at: datetime
    gpu_indices: list[int] = msgspec.field(default_factory=list)
    gang: list[str] = msgspec.field(default_factory=list)
    """Every agent of a gang, this one included; empty for a single-host run."""
    keep_seconds: float | None = None
    """The run's retention (Run.keep_seconds): its events and output are written to live that long."""
    token: int = 0
    """The attempt's fencing token: the revision of its run record's `assigned` write, where the runs bucket's
    revisions lie above every lease token (made from the fencing floor: jetcron.bus.topology.FENCED_BUCKETS). 0 where
    they do not, or from a placement before it: the attempt's token is then its claim's revision."""
    root_allowed: bool = False
    """Whether the run's tenant policy allowed run_as_root (TenantPolicy.allow_run_as_root) when placement sent
    this: the agent runs the attempt as root only if it asks, this says so and the agent allows root itself. False
    from a placement before it: refused."""


class MintRunCredential(_Msg, frozen=True, kw_only=True):
    """Request from an agent (core NATS, on its own jc.mint.<agent>): a credential for a run it holds."""

    run_id: str
    attempt: int
    public_key: str
    """The user nkey the agent made for this attempt; its seed never leaves the agent."""


class RunCredential(_Msg, frozen=True, kw_only=True):
    """The api's answer: the signed user JWT (or why not)."""

    jwt: str = ""
    inbox: str = ""
    error: str = ""


class IdempotencyRoom(_Msg, frozen=True, kw_only=True):
    """The api's answer to a job's once() (core NATS, on jc.room.<tenant>): how full the idempotency bucket is.
    Only these counts, never its keys: a job's credential may not read the bucket's stream info."""

    bytes: int = 0
    max_bytes: int = 0
    max_age: float = 0.0
    """Seconds the bucket keeps a key at most: the longest TTL a key may have."""
    error: str = ""


class CancelRun(_Msg, frozen=True, kw_only=True):
    """Command to one agent (core NATS): stop this attempt now."""

    run_id: str
    attempt: int
    reason: str = "cancelled"
    grace_seconds: float | None = None
    """Seconds between SIGTERM and SIGKILL (a preemption's, docs/preemption.md); None: the agent's kill grace."""


class RunPreempted(_Msg, frozen=True, kw_only=True):
    """Event (the audit trail; it changes no run: placement already wrote the record): a running attempt was stopped
    to give its place to a run of strictly higher priority, and who that was."""

    run_id: str
    attempt: int
    """The attempt that was preempted (the run goes on as attempt + 1)."""
    job: str
    tenant: str
    queue: str
    priority: Priority
    agents: list[str]
    by_run: str
    """The waiting run that takes its place."""
    by_tenant: str
    by_priority: Priority
    freed: str
    """What the preemption frees and where: "8 GPUs on leaf l1"."""
    grace_seconds: float
    reason: str
    at: datetime


class RunStarted(_Msg, frozen=True, kw_only=True):
    """Event: an agent holds the run lease (token) and started the process."""

    run_id: str
    attempt: int
    token: int
    agent: str
    pid: int = 0
    at: datetime


class RunFinished(_Msg, frozen=True, kw_only=True):
    """Event: the attempt's process ended (or never started)."""

    run_id: str
    attempt: int
    token: int
    agent: str
    outcome: str
    """succeeded | failed | timed_out | start_failed | cancelled"""
    exit_code: int | None = None
    reason: str = ""
    at: datetime
    started_at: datetime | None = None
    """When the process started; a run that ends quickly reports only this finish, which carries its start."""
    pid: int = 0
    traceparent: str = ""
    """The attempt's trace context (W3C), where the report is handed over with others in one request, whose
    headers carry none of theirs (services/jetcron_services/agent/reports.FinishBatches)."""


class RunHandedBack(_Msg, frozen=True, kw_only=True):
    """Event: a draining agent stopped the attempt and gives it back for re-dispatch."""

    run_id: str
    attempt: int
    token: int
    agent: str
    reason: str = ""
    at: datetime
    started: bool = True
    """False: given back before it started (a staged attempt waiting for its due time), so no start report
    will come; the tracker re-dispatches it at once. True (and from older agents): it may have started."""


class RunReprioritized(_Msg, frozen=True, kw_only=True):
    """Event (the audit trail; it changes no run: the record was already written): a waiting run moved to another
    priority or queue, and who asked."""

    run_id: str
    job: str
    tenant: str
    priority_from: Priority
    priority_to: Priority
    queue_from: str
    queue_to: str
    by: str
    """`tenant:<name>` or `admin`: the API subject the request came in on."""
    at: datetime


class DeadLettered(_Msg, frozen=True, kw_only=True):
    """A run that exhausted its attempts, with its history; replayable."""

    run_id: str
    job: str
    reason: str
    run: bytes
    """The run record as stored (JSON)."""
    at: datetime


EVENT_KINDS: dict[str, type[msgspec.Struct]] = {
    "started": RunStarted,
    "finished": RunFinished,
    "handed_back": RunHandedBack,
    "blocked": Run,
    "missed": Run,
    "reprioritized": RunReprioritized,
    "preempted": RunPreempted,
}
"""Every kind of event on jc.event.<kind>.<source> and the body it carries. An agent's reports (started, finished,
handed_back) change a run (services/jetcron_services/run_tracker/events.py); the others are for operators and the audit
trail and change none: blocked and missed carry the run record as written, reprioritized and preempted say who moved
it."""


class Cursor(_Msg, frozen=True, kw_only=True):
    """The trigger's resume point for one job: the last nominal fire time it recorded. Under a shard's mark key
    (jetcron.core.timing.fire_marks.mark_key), the shard's fire mark instead: `fired_through`."""

    job: str
    last: datetime | None = None
    version: int = 0
    """The job version the cursor was computed for."""
    last_run: str = ""
    """The run id of the last occurrence that was started (for the overlap policy)."""
    fired_through: int = 0
    """A shard's mark: every `now` job of the shard made with its end (JobRecord.fired_by_mark) at a revision up to
    this one has had its occurrence recorded."""


class ServiceInstance(_Msg, frozen=True, kw_only=True):
    """One running service instance as it announces itself in the services bucket (heartbeated)."""

    service: str
    instance: str
    host: str = ""
    pid: int = 0
    metrics_url: str = ""
    """Where Prometheus scrapes it; /livez and /readyz are on the same port."""
    ready: bool = False
    started_at: datetime
    heartbeat_at: datetime


HandBy = Literal["direct", "stream"]
"""How a message reaches its taker: `direct`, a core request answered once what the taker did with it is stored
(the stream only when it is not answered so); `stream`, always by its stream."""

HANDOFF_TAKEN = b"taken"
"""A taker's answer to a direct hand-off it has acted on (stored what it does with it, or knew it already)."""
HANDOFF_REFUSED = b"refused"
"""Its answer to one it has not (an agent with no free slot, a finish ahead of its start): the stream carries it."""


def place_run_for(run: Run) -> PlaceRun:
    """The placement command for a run's current attempt."""
    spec = run.spec
    assert spec is not None, "skipped records are never placed"
    return PlaceRun(
        run_id=run.run_id,
        attempt=run.attempt,
        job=run.job,
        tenant=run.tenant,
        priority=spec.priority,
        resources=spec.resources,
        require=dict(spec.require),
        needs=["container"] if spec.image else [],
        due_at=run.due_at,
        staged=run.attempt == 1 and run.due_at > run.created_at,
        queue=spec.queue,
    )


class Submission(_Msg, frozen=True, kw_only=True):
    """The outcome of one request published to the intake (`jc.submit.<tenant>`), kept a day under its request id
    (the request's Nats-Msg-Id) in jc_submissions; `submissions.get` answers it."""

    request_id: str
    tenant: str
    outcome: str
    """created (the job is stored; a retried request names the same job) or rejected (nothing stored)."""
    job: str = ""
    version: int = 0
    error: ErrorBody | None = None
    at: datetime


class Redeliver(_Msg, frozen=True, kw_only=True):
    delivery_id: str
    tenant: str
    at: datetime


class QueueDepths(_Msg, frozen=True, kw_only=True):
    """Runs waiting for placement, per tenant, as the placement leader last counted them (jc_placement key
    `pending`, rewritten every few seconds while it changes): what the api's pending-runs cap reads."""

    at: datetime
    by_tenant: dict[str, int] = msgspec.field(default_factory=dict)


class ActiveRunsQuery(_Msg, frozen=True, kw_only=True):
    """The api asks the trackers (jc.tracker.runs) for a page of the non-terminal runs in one state."""

    state: str
    tenant: str | None = None
    """Only this tenant's (None: the admin, every tenant's)."""
    queue: str | None = None
    cursor: str = ""
    limit: int = 100
