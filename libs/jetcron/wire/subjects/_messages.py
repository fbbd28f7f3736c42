"""The subjects of what flows: placement, assignments, reports, events, output, control, checkpoints, notices."""

from __future__ import annotations

import hashlib

from jetcron.core.models import Priority
from jetcron.wire.subjects._names import BUCKET_RUNS, PREFIX, kv_subject


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
answered with one `1` or `0` per report (jetcron.core.lifecycle.handoff.answer_each)."""


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


def msg_id(run_id: str, attempt: int, step: str) -> str:
    """Nats-Msg-Id for a publish about one attempt. A new attempt gets a new id: the server silently drops a
    re-publish of an id inside the duplicate window (docs/decisions-nats.md)."""
    return f"{run_id}/{attempt}/{step}"
