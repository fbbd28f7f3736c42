"""The reconciler's steps as values: the looks `reconcile.judge` takes and the actions it returns."""

from __future__ import annotations

import enum
from datetime import datetime

import msgspec

# Looks: what the reconciler just found out about the run.


class Start(msgspec.Struct, frozen=True):
    """A sweep reached the run: nothing is known yet but its record."""


class Claim(msgspec.Struct, frozen=True, kw_only=True):
    """A lease claim as read."""

    holder: str
    """Empty: released."""
    attempt: int
    writer: str = ""
    written_at: datetime | None = None
    """Server time of its last write."""
    ttl: float | None = None
    """The TTL that write carried."""
    bound: str = ""
    """A claim bound to its agent's lease (liveness per agent): that lease's nonce; "" when the claim is renewed
    on its own."""


class AgentSeen(msgspec.Struct, frozen=True, kw_only=True):
    """The agent lease a bound claim lives by, as read: until when it holds with the claim's nonce (the server's
    time of its last write plus its TTL); None when it is gone or is another life's (a new nonce)."""

    until: datetime | None


class MemberLease(msgspec.Struct, frozen=True, kw_only=True):
    """The lease of gang member `run.agents[index]` (None: none stored)."""

    index: int
    claim: Claim | None


class AgentIdle(msgspec.Struct, frozen=True, kw_only=True):
    """Whether the run's agent is gone or has nothing left in its assignment queue."""

    idle: bool


class RunLease(msgspec.Struct, frozen=True, kw_only=True):
    """The run lease (None: none stored, or taken away), and the tracker consumer's ack floor this sweep."""

    claim: Claim | None
    read_up_to: int
    """-1: unknown, so nothing is lost on it."""
    agent: AgentSeen | None = None
    """For a bound claim, its agent's lease once read (ReadAgentLease); None: not read yet."""


class AgentReports(msgspec.Struct, frozen=True, kw_only=True):
    """Whether `agent` may still send reports (alive, and its heartbeat says some are queued or in flight)."""

    agent: str
    pending: bool
    since: datetime
    """When the lease was first seen gone, as the look that asked found it."""
    read_up_to: int


class Upstream(msgspec.Struct, frozen=True, kw_only=True):
    """Whether the run a waiting run waits for has ended (or is gone)."""

    ended: bool


Look = Start | MemberLease | AgentIdle | RunLease | AgentReports | Upstream


# Actions: a read to make (then judge its answer), or the end of the run's turn this sweep.


class ReadMemberLease(msgspec.Struct, frozen=True, kw_only=True):
    """Read a gang member's lease (`gang.<agent>.<run>`), then judge it as a MemberLease."""

    index: int
    """Of the member in `run.agents` (the first, index 0, holds the run lease)."""


class AskAgentIdle(msgspec.Struct, frozen=True, kw_only=True):
    """Ask whether `agent` is gone or has nothing queued (cached per sweep), then judge it as AgentIdle."""

    agent: str


class ReadLease(msgspec.Struct, frozen=True):
    """Read the run lease, then judge it as a RunLease."""


class ReadAgentLease(msgspec.Struct, frozen=True, kw_only=True):
    """Read the lease of the agent a bound claim lives by (cached per sweep), then judge the RunLease again with it."""

    agent: str
    bound: str


class TakeAway(msgspec.Struct, frozen=True):
    """Revoke the claim just read (written by an agent the run was not placed on), then judge the lease gone."""


class AskAgentReports(msgspec.Struct, frozen=True, kw_only=True):
    """Ask whether `agent` may still send reports (cached per sweep), then judge it as AgentReports."""

    agent: str
    since: datetime


class ReadUpstream(msgspec.Struct, frozen=True, kw_only=True):
    """Read `run_id` unless the index holds it (then it has not ended)."""

    run_id: str


class Stay(msgspec.Struct, frozen=True):
    """Nothing to do now."""


class Retry(msgspec.Struct, frozen=True):
    """The backoff delay passed: start the next attempt (RunEvent.RETRY)."""


class Redrive(msgspec.Struct, frozen=True, kw_only=True):
    """Placement has not taken it: publish it again, the `times`-th re-drive (a new message id)."""

    times: int


class Loss(enum.StrEnum):
    GANG_MEMBER = "gang_member"
    """A gang member's lease lapsed (its host died): the whole gang is torn down and re-queued."""
    NOT_STARTED = "not_started"
    """An assignment was not started in time: its agent is idle or gone, and its lease is gone."""
    LEASE_EXPIRED = "lease_expired"
    """A running run's lease is gone: its agent is lost."""


class Lose(msgspec.Struct, frozen=True, kw_only=True):
    """Lose the attempt (RunEvent.LOSE) with `reason`."""

    loss: Loss
    reason: str


class Release(msgspec.Struct, frozen=True):
    """The run it waits for has ended: hand it to placement (RunEvent.RELEASE)."""


class Quiet(msgspec.Struct, frozen=True, kw_only=True):
    """Its lease is live until `until`, and nothing but its record can change it before then: out of the sweeps
    until then (if a sweep still holds it: its record may have re-indexed it meanwhile)."""

    until: datetime


class Park(msgspec.Struct, frozen=True):
    """Out of the sweeps until its agent has no reports left (Tracked.awaiting, see `release`)."""


class NeedHorizon(msgspec.Struct, frozen=True):
    """Read the events stream's last sequence after this sweep's looks (`with_horizon`); judge it next sweep."""


Action = (ReadMemberLease | AskAgentIdle | ReadLease | ReadAgentLease | TakeAway | AskAgentReports | ReadUpstream
          | Stay | Retry | Redrive | Lose | Release | Quiet | Park | NeedHorizon)
STAY = Stay()
