"""Identities: job names, run ids derived from (job, nominal time), idempotency keys."""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime

# Every pattern here is checked with fullmatch, never match: `$` also matches before a trailing newline, so
# match() takes "nightly\n". The patterns keep `^...$` because the REST contract exports them to JSON Schema,
# whose regex dialect has no `\Z` (and whose `$` is the end of the text).
JOB_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$")
TENANT_RE = JOB_NAME_RE
QUEUE_RE = JOB_NAME_RE
DEFAULT_TENANT = "default"
_NAME = r"[A-Za-z0-9][A-Za-z0-9_-]{0,62}"
JOB_KEY_RE = re.compile(rf"^(?:{_NAME}\.)?{_NAME}$")
"""A job's key: its name, qualified by its tenant unless that is the default tenant (see job_key)."""
# Run ids are KV keys and subject tokens: the job's key, '.', the occurrence's instant, an optional suffix.
RUN_ID_RE = re.compile(rf"^(?:{_NAME}\.)?{_NAME}\.[0-9]{{8}}T[0-9]{{9}}Z(-[A-Za-z0-9_]{{1,40}})?$")
AGENT_ID_RE = JOB_NAME_RE
IDEMPOTENCY_KEY_RE = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
"""An idempotency key (jobs.create's `idempotency_key`, REST's Idempotency-Key): ASCII letters, digits, '-' and '_'
(not str.isalnum(), which takes the letters and digits of every script)."""


def job_key(tenant: str, name: str) -> str:
    """Where a job is stored, and the prefix of its runs' ids: names are per tenant, so two tenants may both
    have a `nightly`, and neither can learn of the other's. The default tenant's keys are its bare names (what
    every job was keyed by before tenants had their own names)."""
    return name if tenant == DEFAULT_TENANT else f"{tenant}.{name}"


def _stamp(at: datetime) -> str:
    """`20261204T181112345Z`: UTC to the millisecond (by fields: strftime costs three times as much, per run)."""
    if at.tzinfo is not UTC:
        at = at.astimezone(UTC)
    return "%04d%02d%02dT%02d%02d%02d%03dZ" % (  # noqa: UP031 - the fastest of the formats, measured
        at.year, at.month, at.day, at.hour, at.minute, at.second, at.microsecond // 1000)


def run_id(job: str, nominal: datetime) -> str:
    """The one run id of an occurrence: two triggers firing it compute the same id."""
    return f"{job}.{_stamp(nominal)}"


def manual_run_id(job: str, requested_at: datetime, request_key: str) -> str:
    """A manual trigger: the request's key makes a retried request the same run."""
    digest = hashlib.sha256(request_key.encode()).hexdigest()[:12]
    return f"{job}.{_stamp(requested_at)}-m{digest}"


def replay_run_id(original: str, replay: int) -> str:
    return f"{original}-r{replay}"


def keyed_replay_id(original: str, request_key: str) -> str:
    """A replay asked for with an idempotency key: a retried request names the same replay."""
    return f"{original}-k{hashlib.sha256(request_key.encode()).hexdigest()[:12]}"


_REPLAY_ID = re.compile(r"^(.+\.[0-9]{8}T[0-9]{9}Z(?:-[A-Za-z0-9_]+)*)-(?:r[0-9]+|k[0-9a-f]{12})$")


def replay_of(run_id: str) -> str | None:
    """The run a replay (replay_run_id, keyed_replay_id) runs again; None for a run that is no replay."""
    found = _REPLAY_ID.fullmatch(run_id)
    return found.group(1) if found else None


def job_of(run_id: str) -> str:
    """The key of the job a run belongs to."""
    return run_id.rsplit(".", 1)[0]


def stamp_of(run_id: str) -> str:
    """The occurrence part of a run id (its instant and suffix): what runs of one flow share."""
    return run_id.rsplit(".", 1)[1]


def body_hash(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def stable_fraction(text: str) -> float:
    """A deterministic number in [0, 1) from a name: the same job always gets the same value."""
    digest = hashlib.sha256(text.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def shard_of(job: str, shards: int) -> int:
    """Which trigger shard owns a job; stable across processes (not Python's salted hash())."""
    if shards == 1:
        # No hash to take: one-shard indexes (the tracker's, the agent's) set an entry per run, where a sha256
        # each is a cost worth saving
        return 0
    return int.from_bytes(hashlib.sha256(job.encode()).digest()[:4], "big") % shards
