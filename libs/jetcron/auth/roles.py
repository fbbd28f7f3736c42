"""Who may publish and subscribe to what: the permission table of every role, enforced by the NATS server.

Pure data and functions. Each role is a `Grant` (which buckets and streams it reads, which keys and subjects
it writes, which durable consumers it pulls from); `permissions()` turns a grant into the subject lists a user
JWT carries. docs/security.md prints the same table (`jetcron auth table`), and a test checks both against
the server.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace

from jetcron.core.lifecycle import join_marks
from jetcron.core.lifecycle.join_marks import Mark, mark_key
from jetcron.wire import subjects as s
from jetcron.wire.subjects import kv_stream


class Role(enum.StrEnum):
    API = "api"
    """Validates and stores jobs, answers queries: every tenant's verbs arrive here."""
    TRIGGER = "trigger"
    PLACEMENT = "placement"
    TRACKER = "run_tracker"
    GATEWAY = "gateway"
    """The HTTP front door: calls the API's subjects for the tenant of each token, nothing else."""
    NOTIFIER = "notifier"
    """Reads run records and jobs, writes the delivery log, publishes to tenants' notification subjects."""
    AGENT = "agent"
    """One user per agent id: only its own assignments, heartbeat and control subject."""
    TENANT = "tenant"
    """A tenant's client: its own tenant's API verbs, no stream or bucket."""
    ADMIN = "admin"
    """Operators: every API verb of every tenant, the admin verbs, read access to all state."""


@dataclass(frozen=True)
class Grant:
    reads: tuple[str, ...] = ()
    """Streams read (KV buckets as KV_<bucket>): info, get, watch or ordered consumers."""
    writes: tuple[str, ...] = ()
    """Subjects published, KV puts included ($KV.<bucket>.<key pattern>)."""
    consumes: tuple[tuple[str, str], ...] = ()
    """(stream, durable) pull consumers: fetch and ack."""
    listens: tuple[str, ...] = ()
    """Core subjects subscribed to (API verbs, control)."""
    watches: tuple[str, ...] = ()
    """Buckets watched (jetcron.bus.kv.Store.watch): their current values are pulled from an ephemeral consumer, so the
    role may pull from any consumer of their streams. Kept to the services that watch: an agent may read run
    records but not pull the notifier's messages."""
    manages: bool = False
    """Creates and updates jetcron's streams, buckets and consumers at start (ensure_topology)."""
    replies: bool = True
    """Publishes to _INBOX.> (answers requests): services do, tenants only make requests."""
    inbox: str = "_INBOX"
    """This identity's reply prefix: it may subscribe under it alone, so no one reads another's replies."""


@dataclass(frozen=True)
class Permissions:
    pub: tuple[str, ...]
    sub: tuple[str, ...]


ALL_BUCKETS = (s.BUCKET_JOBS, s.BUCKET_RUNS, s.BUCKET_CURSORS, s.BUCKET_LEASES, s.BUCKET_LEADERS, s.BUCKET_AGENTS,
               s.BUCKET_IDEMPOTENCY, s.BUCKET_TENANTS, s.BUCKET_SERVICES, s.BUCKET_PLACEMENT, s.BUCKET_CLUSTER,
               s.BUCKET_SECRETS, s.BUCKET_TOKENS, s.BUCKET_SUBMISSIONS, s.BUCKET_NOTIFY, s.BUCKET_FINISHED,
               s.BUCKET_CALENDARS, s.BUCKET_JOINS)
ALL_STREAMS = (s.STREAM_PLACE, s.STREAM_ASSIGN, s.STREAM_EVENTS, s.STREAM_LOGS, s.STREAM_DLQ, s.STREAM_SUBMIT,
               s.STREAM_NOTIFY, s.STREAM_REDELIVER, s.STREAM_CHECKPOINTS,
               *(kv_stream(b) for b in ALL_BUCKETS))


# Every core service that reads a monitor port records what it found (jetcron.bus.cluster.record_verdict); every role
# may read it (connect() falls back to it when no monitor port answers).
VERDICT = s.kv_subject(s.BUCKET_CLUSTER, s.STORAGE_VERDICT_KEY)

# Cancelling a run (jetcron.ops.control: the API's cancel, the trigger's cancel_previous overlap policy) revokes its
# lease and tells its agents, so they stop the process at once rather than at the run's end.
CANCELS = (s.lease_subject(s.run_lease_key(">"), s.LEASE_REVOKER), f"{s.PREFIX}.ctl.*")


def _kv(*buckets: str) -> tuple[str, ...]:
    return tuple(s.kv_subject(b, ">") for b in buckets)


def _kvr(*buckets: str) -> tuple[str, ...]:
    return tuple(kv_stream(b) for b in buckets)


# A `latest` join's marks (jetcron.core.lifecycle.join_marks): raised by the trigger and the run tracker, which record
# the runs they follow; the dependents of each job, written by the api alone (jetcron_services.api.dependents).
JOIN_MARKS = tuple(s.kv_subject(s.BUCKET_JOINS, mark_key(mark, ">")) for mark in Mark)
DEPENDENTS = s.kv_subject(s.BUCKET_JOINS, f"{join_marks.DEPENDENTS}.>")


def _registry(service: str) -> str:
    return s.kv_subject(s.BUCKET_SERVICES, f"{service}.>")


def inbox(role: Role, *, agent_id: str = "", tenant: str = "") -> str:
    """The reply-subject prefix of an identity (nats.connect(inbox_prefix=...)): `_INBOX.<who>`."""
    if role is Role.AGENT:
        return f"_INBOX.a-{agent_id}"
    if role is Role.TENANT:
        return f"_INBOX.t-{tenant}"
    return f"_INBOX.{role.value}"


def grant(role: Role, *, agent_id: str = "", tenant: str = "") -> Grant:
    """The grant of one role; an agent's names its own id, a tenant's its own tenant."""
    return replace(_grant(role, agent_id=agent_id, tenant=tenant), inbox=inbox(role, agent_id=agent_id,
                                                                                 tenant=tenant))


def _grant(role: Role, *, agent_id: str = "", tenant: str = "") -> Grant:
    if role is Role.API:
        return Grant(
            # The placement queue: its depth by priority (cluster.status, admin).
            reads=(*_kvr(*ALL_BUCKETS), s.STREAM_LOGS, s.STREAM_DLQ, s.STREAM_EVENTS, s.STREAM_PLACE),
            # The calendars: only the api writes them (calendars.* verbs, each on its caller's own tenant).
            writes=(*_kv(s.BUCKET_JOBS, s.BUCKET_RUNS, s.BUCKET_TENANTS, s.BUCKET_IDEMPOTENCY, s.BUCKET_SECRETS,
                         s.BUCKET_TOKENS, s.BUCKET_SUBMISSIONS, s.BUCKET_CALENDARS),
                    *CANCELS, s.PLACE_ALL, _registry("api"), s.TRACKER_RUNS, s.REDELIVER_ALL, VERDICT,
                    # The audit trail of a run moved to another priority (jetcron_services.api.priorities).
                    s.event_subject("reprioritized", "api"),
                    f"$JS.API.STREAM.PURGE.{kv_stream(s.BUCKET_SECRETS)}", DEPENDENTS),
            consumes=((s.STREAM_SUBMIT, s.CONSUMER_INTAKE),),
            # The finished runs per minute, read by time from an ephemeral consumer (runs.finished).
            watches=(s.BUCKET_FINISHED,),
            # Runs' credentials (jetcron_services.api.mint) and the idempotency bucket's fill for jobs' once()
            # (jetcron_services.api.room).
            listens=(f"{s.API_GROUP}.>", f"{s.ADMIN_GROUP}.>", s.MINT_ALL, s.IDEM_ROOM_ALL), manages=True)
    if role is Role.TRIGGER:
        return Grant(
            # The calendars: a warm view of every one, read as occurrences are planned
            # (jetcron_services.trigger.calendars).
            watches=(s.BUCKET_JOBS, s.BUCKET_CURSORS, s.BUCKET_CALENDARS),
            # The leases: cancelling a run (overlap policy) revokes its lease over the last claim, read first.
            # The tenants: a new run is stamped with its tenant's retention (libs/jetcron/ops/retention.py).
            reads=_kvr(s.BUCKET_JOBS, s.BUCKET_RUNS, s.BUCKET_CURSORS, s.BUCKET_LEADERS, s.BUCKET_LEASES,
                       s.BUCKET_CLUSTER, s.BUCKET_TENANTS, s.BUCKET_CALENDARS, s.BUCKET_JOINS),
            # The jobs: a fired one-shot job is given its end (jetcron_services.trigger.firing.Firer._end).
            writes=(*_kv(s.BUCKET_RUNS, s.BUCKET_CURSORS, s.BUCKET_LEADERS, s.BUCKET_CLUSTER, s.BUCKET_JOBS),
                    s.PLACE_ALL, *CANCELS, _registry("trigger"), *JOIN_MARKS),
            manages=True)
    if role is Role.PLACEMENT:
        # Preempting a run (jetcron.ops.control.preempt_run, docs/preemption.md) is fenced as a cancel is: it revokes
        # the lease over the last claim (read first) and tells the agents; the audit trail names who took its place.
        return Grant(
            watches=(s.BUCKET_AGENTS, s.BUCKET_TENANTS, s.BUCKET_PLACEMENT, s.BUCKET_RUNS),
            reads=(*_kvr(s.BUCKET_RUNS, s.BUCKET_AGENTS, s.BUCKET_TENANTS, s.BUCKET_PLACEMENT, s.BUCKET_LEADERS,
                         s.BUCKET_JOBS, s.BUCKET_CLUSTER, s.BUCKET_LEASES), s.STREAM_PLACE, s.STREAM_EVENTS),
            # The assignments: by the stream, or handed to the agent directly (the same messages, not stored).
            writes=(*_kv(s.BUCKET_RUNS, s.BUCKET_PLACEMENT, s.BUCKET_LEADERS), s.ASSIGN_ALL, s.HANDOFF_ALL, s.PLACE_ALL,
                    *CANCELS, s.event_subject("preempted", s.PLACEMENT_SOURCE), _registry("placement"), VERDICT),
            consumes=((s.STREAM_PLACE, s.CONSUMER_PLACEMENT),), manages=True)
    if role is Role.TRACKER:
        return Grant(
            # The agents: their heartbeats, to count those that die (jetcron_services.run_tracker.agents).
            watches=(s.BUCKET_JOBS, s.BUCKET_RUNS, s.BUCKET_AGENTS),
            reads=(*_kvr(s.BUCKET_RUNS, s.BUCKET_JOBS, s.BUCKET_AGENTS, s.BUCKET_LEASES, s.BUCKET_LEADERS,
                         s.BUCKET_TENANTS, s.BUCKET_CLUSTER, s.BUCKET_FINISHED, s.BUCKET_JOINS), s.STREAM_EVENTS,
                   s.STREAM_ASSIGN, s.STREAM_CHECKPOINTS),
            # The finished runs per minute: the leader raises each minute's record
            # (jetcron_services.run_tracker.finished).
            writes=(*_kv(s.BUCKET_RUNS, s.BUCKET_LEASES, s.BUCKET_LEADERS, s.BUCKET_FINISHED), *JOIN_MARKS,
                    s.DLQ_ALL, s.PLACE_ALL,
                    s.EVENTS_ALL, f"{s.PREFIX}.ctl.*", _registry("run_tracker"),
                    VERDICT,
                    f"$JS.API.STREAM.MSG.DELETE.{s.STREAM_ASSIGN}", f"$JS.API.STREAM.PURGE.{s.STREAM_ASSIGN}",
                    # A run's checkpoints after its retention (jetcron_services.run_tracker.checkpoints).
                    f"$JS.API.STREAM.PURGE.{s.STREAM_CHECKPOINTS}",
                    # History let go ahead of its TTL (jetcron_services.run_tracker.history): count limits, storage
                    # pressure; and the headroom of every stream (its info only, not its messages).
                    *(f"$JS.API.STREAM.PURGE.{x}" for x in (kv_stream(s.BUCKET_RUNS), s.STREAM_LOGS, s.STREAM_EVENTS)),
                    *(f"$JS.API.STREAM.INFO.{x}" for x in ALL_STREAMS)),
            # Finish reports handed over directly (the same reports as on JC_EVENTS, not stored).
            consumes=((s.STREAM_EVENTS, s.CONSUMER_TRACKER),), listens=(s.TRACKER_RUNS, s.REPORT_ALL), manages=True)
    if role is Role.NOTIFIER:
        # The secrets bucket: a webhook rule's `secret` signs its bodies (the notifier holds the secrets key).
        return Grant(
            watches=(s.BUCKET_JOBS,),
            reads=(*_kvr(s.BUCKET_RUNS, s.BUCKET_JOBS, s.BUCKET_NOTIFY, s.BUCKET_SECRETS, s.BUCKET_CLUSTER),
                   s.STREAM_REDELIVER),
            writes=(*_kv(s.BUCKET_NOTIFY), s.NOTIFY_ALL, _registry("notifier"), VERDICT),
            consumes=((kv_stream(s.BUCKET_RUNS), s.CONSUMER_NOTIFIER), (s.STREAM_REDELIVER, s.CONSUMER_REDELIVER)),
            manages=True)
    if role is Role.GATEWAY:
        # It reads the tokens (id -> tenant, hashed) to know whom each HTTP request is for; nothing else.
        return Grant(reads=_kvr(s.BUCKET_TOKENS, s.BUCKET_CLUSTER), watches=(s.BUCKET_TOKENS,),
                     writes=(f"{s.API_GROUP}.>", f"{s.ADMIN_GROUP}.>", _registry("gateway")))
    if role is Role.AGENT:
        if not agent_id:
            raise ValueError("an agent's grant names its agent id")
        consumer = s.assign_consumer(agent_id)
        return Grant(
            reads=(*_kvr(s.BUCKET_LEASES, s.BUCKET_RUNS, s.BUCKET_SECRETS, s.BUCKET_CLUSTER), s.STREAM_ASSIGN),
            # Lease claims under its own name only (subjects.lease_subject): it cannot renew, release or overwrite
            # another agent's; a claim on a run placed elsewhere is taken away by the tracker (reconcile_actions.py).
            writes=(s.kv_subject(s.BUCKET_AGENTS, agent_id), s.lease_subject(s.run_lease_key(">"), agent_id),
                    s.kv_subject(s.BUCKET_LEASES, s.gang_lease_key(">", agent_id)), f"{s.PREFIX}.event.*.{agent_id}",
                    s.report_subject("*", agent_id),
                    f"{s.PREFIX}.logs.*.*.{agent_id}", f"{s.PREFIX}.logs.*.*.*.{agent_id}", _registry("agent"),
                    f"$JS.API.CONSUMER.CREATE.{s.STREAM_ASSIGN}.{consumer}.{s.assign_subject(agent_id)}",
                    f"$JS.API.CONSUMER.DURABLE.CREATE.{s.STREAM_ASSIGN}.{consumer}", s.mint_subject(agent_id)),
            consumes=((s.STREAM_ASSIGN, consumer),),
            listens=(s.control_subject(agent_id), s.handoff_subject(agent_id)))
    if role is Role.TENANT:
        if not tenant:
            raise ValueError("a tenant's grant names its tenant")
        return Grant(writes=(f"{s.API_GROUP}.{tenant}.>", s.submit_subject(tenant)),
                     listens=(s.notify_subject(tenant, ">"),), replies=False)
    # $SRV.PING/INFO/STATS: `jetcron status` asks every instance whether it answers. It counts the last hour's runs
    # by pulling the run records written since then from a consumer of its own (ops.overview), hence the watch.
    return Grant(reads=ALL_STREAMS, writes=(f"{s.API_GROUP}.>", f"{s.ADMIN_GROUP}.>", s.SRV_PING, s.SUBMIT_ALL),
                 watches=(s.BUCKET_RUNS,), replies=False,
                 manages=True)


_READ = ("$JS.API.STREAM.INFO.{0}", "$JS.API.STREAM.MSG.GET.{0}", "$JS.API.DIRECT.GET.{0}",
         "$JS.API.DIRECT.GET.{0}.>", "$JS.API.CONSUMER.CREATE.{0}", "$JS.API.CONSUMER.CREATE.{0}.>",
         "$JS.API.CONSUMER.DELETE.{0}.>", "$JS.API.CONSUMER.INFO.{0}.>", "$JS.FC.{0}.>")
_CONSUME = ("$JS.API.CONSUMER.INFO.{0}.{1}", "$JS.API.CONSUMER.MSG.NEXT.{0}.{1}", "$JS.ACK.{0}.{1}.>")
_MANAGE = ("$JS.API.INFO", "$JS.API.STREAM.NAMES", "$JS.API.STREAM.CREATE.{0}", "$JS.API.STREAM.UPDATE.{0}",
           "$JS.API.STREAM.INFO.{0}", "$JS.API.CONSUMER.CREATE.{0}.>", "$JS.API.CONSUMER.DURABLE.CREATE.{0}.>",
           "$JS.API.CONSUMER.INFO.{0}.>")


def job_template() -> dict[str, object]:
    """What a job's own short-lived credential may do, whatever its JWT says: the scope of the job signing key.

    The minter (jetcron_services.api.mint) names the user JWT after the run's tenant (`{{name()}}`) and tags it with the
    run's checkpoint token (`{{tag(run)}}`, jetcron.wire.subjects.checkpoint_token). So a job writes and reads, by
    subject, its own tenant's once() keys and its own run's checkpoints, and asks the api how full the idempotency
    bucket is; it reads no message by sequence, no stream's info (which lists subjects), and purges nothing."""
    idem_keys = s.kv_subject(s.BUCKET_IDEMPOTENCY, "once.{{name()}}.>")
    checkpoints = f"{s.PREFIX}.ckpt.{{{{name()}}}}.{{{{tag(run)}}}}.>"
    pub = [idem_keys, f"$JS.API.DIRECT.GET.{kv_stream(s.BUCKET_IDEMPOTENCY)}.{idem_keys}",
           s.idem_room_subject("{{name()}}"),
           checkpoints, f"$JS.API.DIRECT.GET.{s.STREAM_CHECKPOINTS}.{checkpoints}"]
    return {"pub": {"allow": pub}, "sub": {"allow": [f"{JOB_INBOX}-{{{{name()}}}}.>"]}, "subs": -1, "data": -1,
            "payload": -1}


RUN_TAG = "run"
"""The user JWT tag (`run:<checkpoint token>`) that confines a run's credential to its own checkpoints."""


JOB_INBOX = "_INBOX.j"


def job_inbox(tenant: str) -> str:
    return f"{JOB_INBOX}-{tenant}"


def permissions(g: Grant) -> Permissions:
    """The subject lists of a grant, for a user JWT's pub.allow and sub.allow (everything else is denied)."""
    pub: list[str] = []
    for stream in g.reads:
        pub += [t.format(stream) for t in _READ]
    for stream, durable in g.consumes:
        pub += [t.format(stream, durable) for t in _CONSUME]
    for bucket in g.watches:
        pub.append(f"$JS.API.CONSUMER.MSG.NEXT.{kv_stream(bucket)}.*")
    if g.manages:
        for stream in ALL_STREAMS:
            pub += [t.format(stream) for t in _MANAGE]
    pub += list(g.writes)
    if g.replies:
        pub.append("_INBOX.>")
    sub = [f"{g.inbox}.>", *g.listens]
    if g.replies:
        sub.append("$SRV.>")  # nats.micro discovery: every service answers $SRV.PING/INFO/STATS
    return Permissions(pub=tuple(dict.fromkeys(pub)), sub=tuple(dict.fromkeys(sub)))


def for_role(role: Role, *, agent_id: str = "", tenant: str = "") -> Permissions:
    return permissions(grant(role, agent_id=agent_id, tenant=tenant))
