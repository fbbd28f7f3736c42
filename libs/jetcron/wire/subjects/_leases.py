"""Lease keys, and the subjects each writer stores them under: a run lease's claims apart, any other lease as one."""

from __future__ import annotations

from jetcron.wire.subjects._names import BUCKET_LEADERS, BUCKET_LEASES, kv_subject

_RUN_LEASE = "run."
_AGENT_LEASE = "_agent."
_RUN_LEASE_PREFIXES = (_RUN_LEASE, "gang.")


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


def lease_bucket(key: str) -> str:
    """The bucket a lease key (or key pattern) lives in: run and gang leases in jc_leases, the few leader, shard
    and member leases in jc_leaders. Each bucket is its own stream with its own write queue on the server, so a
    herd's tens of thousands of run-lease writes (and their expiries) cannot hold a leader's renewal back."""
    return BUCKET_LEASES if key.startswith(_RUN_LEASE_PREFIXES) else BUCKET_LEADERS
