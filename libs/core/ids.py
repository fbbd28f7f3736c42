"""Identities: job names, run ids derived from (job, nominal time), idempotency keys."""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime

JOB_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$")
TENANT_RE = JOB_NAME_RE
# Run ids are KV keys and subject tokens: letters, digits, '-', '_' and one '.' after the job name.
RUN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}\.[0-9]{8}T[0-9]{9}Z(-[A-Za-z0-9_]{1,40})?$")
AGENT_ID_RE = JOB_NAME_RE


def _stamp(at: datetime) -> str:
    at = at.astimezone(UTC)
    return f"{at:%Y%m%dT%H%M%S}{at.microsecond // 1000:03d}Z"


def run_id(job: str, nominal: datetime) -> str:
    """The one run id of an occurrence: two triggers firing it compute the same id."""
    return f"{job}.{_stamp(nominal)}"


def manual_run_id(job: str, requested_at: datetime, request_key: str) -> str:
    """A manual trigger: the request's key makes a retried request the same run."""
    digest = hashlib.sha256(request_key.encode()).hexdigest()[:12]
    return f"{job}.{_stamp(requested_at)}-m{digest}"


def replay_run_id(original: str, replay: int) -> str:
    return f"{original}-r{replay}"


def job_of(run_id: str) -> str:
    return run_id.split(".", 1)[0]


def body_hash(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def stable_fraction(text: str) -> float:
    """A deterministic number in [0, 1) from a name: the same job always gets the same value."""
    digest = hashlib.sha256(text.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def shard_of(job: str, shards: int) -> int:
    """Which trigger shard owns a job; stable across processes (not Python's salted hash())."""
    return int.from_bytes(hashlib.sha256(job.encode()).digest()[:4], "big") % shards
