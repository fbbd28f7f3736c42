"""The only home of subjects, streams, consumers, buckets and headers: build_*/parse_* pairs."""

from __future__ import annotations

import hashlib

from jetcron.core.ids import DEFAULT_TENANT
from jetcron.core.models import Priority

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
"""What flows read in one step (jetcron.core.join_marks): each `latest` join's marks, and each job's dependents."""
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

API_SERVICE = "jetcron"
API_GROUP = f"{PREFIX}.api"
"""Tenant verbs: jc.api.<tenant>.<verb>. A tenant's credential may publish under its own tenant only, so the
API takes the tenant from the subject a request came in on, never from its body."""
ADMIN_GROUP = f"{PREFIX}.admin"
"""Admin verbs and every tenant's data: jc.admin.<verb>, open to the admin credential alone."""
API_QUEUE = "jetcron-api"


def place_subject(priority: Priority) -> str:
    return f"{PREFIX}.place.{priority.value}"


PLACE_ALL = f"{PREFIX}.place.>"


def assign_subject(agent_id: str) -> str:
    return f"{PREFIX}.assign.{agent_id}"


ASSIGN_ALL = f"{PREFIX}.assign.>"


def handoff_subject(agent_id: str) -> str:
    """Core NATS request/reply (not stored): an assignment handed to its agent directly, answered once the agent
    has stored its claim; one not answered so goes to the agent's stream (`assign_subject`). Outside ASSIGN_ALL,
    so that the stream does not store it."""
    return f"{PREFIX}.handoff.{agent_id}"


HANDOFF_ALL = f"{PREFIX}.handoff.*"


def report_subject(kind: str, agent_id: str) -> str:
    """Core NATS request/reply (not stored): an agent's report handed to the trackers directly, answered once the
    run record is written; one not answered so goes to the events stream (`event_subject`, the same shape)."""
    return f"{PREFIX}.report.{kind}.{agent_id}"


REPORT_ALL = f"{PREFIX}.report.>"
REPORT_BATCH = "finishes"
"""The kind of a request that hands the trackers several finish reports at once (a JSON array of RunFinished),
answered with one `1` or `0` per report (jetcron.core.handoff.answer_each)."""


def assign_consumer(agent_id: str) -> str:
    return f"agent_{agent_id}"


def event_subject(kind: str, source: str) -> str:
    """jc.event.<kind>.<source>: `source` is the agent that reports (its credential may publish under its own id
    only), or `tracker` for the tracker's own events."""
    return f"{PREFIX}.event.{kind}.{source}"


def parse_event_subject(subject: str) -> tuple[str, str]:
    """(kind, source) of an event subject."""
    parts = subject.split(".")
    return parts[2], parts[3] if len(parts) > 3 else ""


TRACKER_SOURCE = "tracker"
PLACEMENT_SOURCE = "placement"
"""The source of placement's own events (`preempted`: docs/preemption.md)."""


EVENTS_ALL = f"{PREFIX}.event.>"


def logs_subject(run_id: str, agent_id: str) -> str:
    """Output of one run written by one agent: an agent's credential may publish under its own id only."""
    return f"{PREFIX}.logs.{run_id}.{agent_id}"


def logs_filter(run_id: str) -> str:
    """Every chunk of one run's output, whichever agent wrote it."""
    return f"{PREFIX}.logs.{run_id}.*"


LOGS_ALL = f"{PREFIX}.logs.>"


def dlq_subject(job: str) -> str:
    return f"{PREFIX}.dlq.{job}"


DLQ_ALL = f"{PREFIX}.dlq.>"


def control_subject(agent_id: str) -> str:
    """Core NATS (not stored): cancel a run on one agent now; the lease revoke is the durable path."""
    return f"{PREFIX}.ctl.{agent_id}"


def mint_subject(agent_id: str) -> str:
    """Core NATS: an agent asks for the short-lived credential of a run it holds (answered by the api)."""
    return f"{PREFIX}.mint.{agent_id}"


MINT_ALL = f"{PREFIX}.mint.*"


def idem_room_subject(tenant: str) -> str:
    """Core NATS: a job's once() asks whether the idempotency bucket has room for a new key (answered by the api:
    a job's credential may not read the bucket's stream info, which would list every tenant's keys)."""
    return f"{PREFIX}.room.{tenant}"


IDEM_ROOM_ALL = f"{PREFIX}.room.*"


def parse_idem_room_subject(subject: str) -> str:
    """The tenant that asked (the last token: a job's credential may publish only its own)."""
    return subject.rsplit(".", 1)[-1]


# Checkpoints: one subject tree per run, `jc.ckpt.<tenant>.<run token>.<part>`, so that a run's credential can be
# confined to its own run by the server (jetcron.auth.roles.job_template) and the tracker can remove a run's checkpoints
# with one purge. The record is part `rec`; a file's chunks are `f.<attempt>.<slot>.<n>`.
CHECKPOINTS_ALL = f"{PREFIX}.ckpt.>"
CHECKPOINT_RECORDS = f"{PREFIX}.ckpt.*.*.rec"


def checkpoint_token(run_id: str) -> str:
    """A run's checkpoint token: one subject token (run ids hold dots), the same for every attempt of the run."""
    return hashlib.sha256(run_id.encode()).hexdigest()[:32]


def checkpoint_subject(tenant: str, run_id: str, part: str = ">") -> str:
    """The subject of one part of a run's checkpoints (`rec`, a chunk), or `>` for all of them."""
    return f"{PREFIX}.ckpt.{tenant}.{checkpoint_token(run_id)}.{part}"


def checkpoint_chunk(attempt: int, slot: int, index: int) -> str:
    """The part holding chunk `index` of the file attempt `attempt` wrote into `slot` (0 or 1)."""
    return f"f.{attempt}.{slot}.{index}"


TRACKER_RUNS = f"{PREFIX}.tracker.runs"
"""Core NATS request/reply: the non-terminal runs in one state, from the trackers' index (runs.list?state=)."""
TRACKER_RUNS_QUEUE = "run_tracker"


def submit_subject(tenant: str) -> str:
    """JetStream (JC_SUBMIT): a service's job request for one tenant, durable once acked (the intake)."""
    return f"{PREFIX}.submit.{tenant}"


SUBMIT_ALL = f"{PREFIX}.submit.*"


def parse_submit_subject(subject: str) -> str:
    return subject.split(".", 2)[2]


RUN_CHANGES = kv_subject(BUCKET_RUNS, ">")
"""The subjects of KV_jc_runs: a run record's every revision, what the notifier reads its events from."""


def notify_subject(tenant: str, suffix: str) -> str:
    """JetStream (JC_NOTIFY): a `subject` notification rule's target; a tenant's credential reads its own."""
    return f"{PREFIX}.notify.{tenant}.{suffix}"


NOTIFY_ALL = f"{PREFIX}.notify.>"


def redeliver_subject(tenant: str) -> str:
    """JetStream (JC_REDELIVER): the api asks the notifier to try a parked delivery again."""
    return f"{PREFIX}.redeliver.{tenant}"


REDELIVER_ALL = f"{PREFIX}.redeliver.*"


def api_subject(verb: str, tenant: str | None = None) -> str:
    """Where a verb is asked: for one tenant, or (tenant None) on the admin subject that sees every tenant."""
    return f"{ADMIN_GROUP}.{verb}" if tenant is None else f"{API_GROUP}.{tenant}.{verb}"


def api_endpoint(verb: str) -> tuple[str, str]:
    """The two subjects one verb is served on: every tenant's (a wildcard token) and the admin's."""
    return f"{API_GROUP}.*.{verb}", f"{ADMIN_GROUP}.{verb}"


def parse_api_subject(subject: str) -> str | None:
    """The tenant a request was made for (None: the admin subject)."""
    if subject.startswith(API_GROUP + "."):
        return subject.split(".", 3)[2]
    return None


def msg_id(run_id: str, attempt: int, step: str) -> str:
    """Nats-Msg-Id for a publish about one attempt. A new attempt gets a new id: the server silently drops a
    re-publish of an id inside the duplicate window (docs/decisions-nats.md)."""
    return f"{run_id}/{attempt}/{step}"


# KV keys
def run_lease_key(run_id: str) -> str:
    """A run's lease by name: its writers' claims are stored apart (lease_subject), the last one is the lease."""
    return f"run.{run_id}"


def gang_lease_key(run_id: str, agent_id: str) -> str:
    """A gang member's lease (the first member holds run.<run_id>): it lapses when the member's host dies. The
    agent comes first, so that an agent's credential may write `gang.<its id>.>` and no other member's."""
    return f"gang.{agent_id}.{run_id}"


def agent_lease_key(agent_id: str) -> str:
    """An agent's own lease (liveness per agent): its expiry fences every attempt the agent holds, and each run
    claim bound to it (LeaseValue.bound) lives only as long as it does. Stored as a run lease's claims are, under
    `run.<writer>._agent.<agent id>`: the agent's credential already writes `run.<its id>.>` and a revoker's
    `run._revoker.>` (a stop notice, Leases.notify_stops), so no identity gains a permission; a run id never
    starts with `_` (jetcron.core.ids.RUN_ID_RE)."""
    return f"{_RUN_LEASE}{_AGENT_LEASE}{agent_id}"


LEASE_REVOKER = "_revoker"
"""The writer of a revoke (cancel, a foreign claim taken away): never an agent id (AGENT_ID_RE)."""


def by_claims(key: str) -> bool:
    """Whether a lease is stored as one claim per writer (a run lease) rather than as one subject."""
    return key.startswith(_RUN_LEASE)


def lease_subject(key: str, writer: str) -> str:
    """Where `writer` writes lease `key`. A run lease is one subject per writer, `run.<writer>.<run_id>`, so that
    an agent's credential may write only `run.<its id>.>`: it cannot renew, release or overwrite another
    agent's claim, and each claim names its writer as the server checked it. Every other lease is one subject."""
    bucket = lease_bucket(key)
    if by_claims(key):
        return kv_subject(bucket, f"{_RUN_LEASE}{writer}.{key[len(_RUN_LEASE):]}")
    return kv_subject(bucket, key)


def lease_filter(key: str) -> str:
    """The subjects whose last message is lease `key`: all writers' claims on a run (a revision check against
    this filter fences a holder when anyone else writes a claim), the one subject of any other lease."""
    bucket = lease_bucket(key)
    if by_claims(key):
        return kv_subject(bucket, f"{_RUN_LEASE}*.{key[len(_RUN_LEASE):]}")
    return kv_subject(bucket, key)


def lease_writer(subject: str) -> str:
    """Who wrote a stored run-lease claim (from its subject, which the server's permissions vouch for); "" for
    any other lease."""
    parts = subject.split(".", 4)
    return parts[3] if len(parts) == 5 and parts[2] + "." == _RUN_LEASE else ""


# jc_cluster keys: settings fixed when the cluster was created.
SHARDS_KEY = "trigger.shards"
STORAGE_VERDICT_KEY = "storage.verdict"
"""jc_cluster: the server's storage facts (fsync before ack) as the last core service that could read a monitor
port found them; a process that reaches no monitor port (an agent in a container) trusts this record."""

# jc_placement keys: placement's capacity summary (read by the API at submit) and suspect GPU hosts.
CAPACITY_KEY = "capacity"
PENDING_KEY = "pending"
SUSPECTS = "suspect.*"


def suspect_key(agent_id: str) -> str:
    return f"suspect.{agent_id}"


def shard_lease_key(shard: int) -> str:
    return f"trigger.shard.{shard}"


SHARD_LEASES = "trigger.shard.*"


def parse_shard_lease_key(key: str) -> int:
    return int(key.rsplit(".", 1)[-1])


def trigger_member_key(replica: str) -> str:
    return f"trigger.member.{replica}"


TRIGGER_MEMBERS = "trigger.member.*"
PLACEMENT_LEADER_KEY = "placement.leader"
TRACKER_LEADER_KEY = "tracker.leader"
_RUN_LEASE = "run."
_AGENT_LEASE = "_agent."
_RUN_LEASE_PREFIXES = (_RUN_LEASE, "gang.")


def lease_bucket(key: str) -> str:
    """The bucket a lease key (or key pattern) lives in: run and gang leases in jc_leases, the few leader, shard
    and member leases in jc_leaders. Each bucket is its own stream with its own write queue on the server, so a
    herd's tens of thousands of run-lease writes (and their expiries) cannot hold a leader's renewal back."""
    return BUCKET_LEASES if key.startswith(_RUN_LEASE_PREFIXES) else BUCKET_LEADERS


def service_key(service: str, instance: str) -> str:
    """jc_services key of one running service instance (its metrics URL, heartbeated)."""
    return f"{service}.{instance}"


SRV_PING = "$SRV.PING"
"""nats.micro discovery: every service instance answers."""


def health_service_name(service: str) -> str:
    """The nats.micro service every instance registers so `$SRV.PING` finds it (api: also `jetcron`)."""
    return f"jetcron_{service}"


def idempotency_key(scope: str, key: str) -> str:
    return f"{scope}.{key}"


FINISHED_CLUSTER = "all"
FINISHED_TENANT = "tenant"


def finished_key(tenant: str | None, stamp: str) -> str:
    """jc_finished: the runs that finished in one minute (`stamp`, jetcron.core.finished.stamp), the whole cluster's
    (tenant None: `all.<stamp>`) or one tenant's (`tenant.<tenant>.<stamp>`; a tenant name has no dot)."""
    return f"{FINISHED_CLUSTER}.{stamp}" if tenant is None else f"{FINISHED_TENANT}.{tenant}.{stamp}"


def finished_filter(tenant: str | None) -> str:
    """The keys of every minute of the cluster (None) or of one tenant."""
    return finished_key(tenant, "*")


def parse_finished_key(key: str) -> tuple[str | None, str]:
    """(tenant or None for the cluster, stamp) of a jc_finished key."""
    parts = key.split(".")
    return (None, parts[-1]) if parts[0] == FINISHED_CLUSTER else (parts[1], parts[-1])


def runs_of_job_filter(job: str) -> str:
    """The run keys of one job and no other's: a run id is its job's key and one token more (the stamp has no dot:
    jetcron.core.ids.RUN_ID_RE). Not `job.>`, which also matches the runs of tenant `job`'s jobs (`foo.bar.<stamp>`)."""
    return f"{job}.*"


def runs_of_tenant_filter(tenant: str | None) -> str:
    """The run keys of one tenant's jobs (its job keys and a stamp), or of every run for the admin."""
    return ">" if tenant is None else f"{jobs_of_tenant_filter(tenant)}.*"


def calendars_of_tenant_filter(tenant: str | None) -> str:
    """The calendar keys a caller may list: keyed as jobs are (`tenant.name`, the default tenant's bare)."""
    return jobs_of_tenant_filter(tenant)


def jobs_of_tenant_filter(tenant: str | None) -> str:
    """The job keys a caller may list, filtered by the server: one tenant's (the default tenant's keys are bare
    names, one token; another's are `tenant.name`, two: jetcron.core.ids.job_key), or everyone's for the admin."""
    if tenant is None:
        return ">"
    return "*" if tenant == DEFAULT_TENANT else f"{tenant}.*"
