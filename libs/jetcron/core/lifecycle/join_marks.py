"""What a `latest` join keeps of each job, so that its questions cost one read however many runs a job has had:
an upstream's latest success, when a dependent last took its upstreams' successes, and the dependent's run waiting
on them (libs/jetcron/ops/joins.py keeps them in the jc_joins bucket; jetcron.core.lifecycle.dag.not_since decides from
them).

A mark is only ever raised: a write that would lower one is dropped. So the writers (the service that decided, and
every run tracker replica that sees the run's record afterwards and repairs a mark a crash left behind) may race,
repeat or come late without undoing one another."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from datetime import datetime

import msgspec

from jetcron.core.models import Run, RunState

__all__ = ["DEPENDENTS", "UNRUN", "JoinMark", "Mark", "dependent_key", "dependents_filter", "from_newest", "mark_key",
           "marks_of", "raised", "ran", "succeeded", "waits"]

UNRUN = frozenset({RunState.WAITING, RunState.SKIPPED, RunState.BLOCKED})
"""Runs that did not run: they took none of their upstreams' successes."""


class Mark(enum.StrEnum):
    OK = "ok"
    """The job's latest success: when its newest succeeded run ended."""
    RAN = "ran"
    """When the job last took its upstreams' successes: its run's `released_at`, else its creation (recorded ready)."""
    WAITING = "waiting"
    """The job's newest run recorded waiting on its upstreams; it still waits only while its record says so."""


class JoinMark(msgspec.Struct, frozen=True, kw_only=True):
    """One mark. Every field is written (no omitted defaults): a mark read back means what it meant when written.
    `at` None: none known (never succeeded, never ran); `run_id` "": no run (no waiting run)."""

    at: datetime | None = None
    run_id: str = ""


def mark_key(mark: Mark, job: str) -> str:
    """`ok.<job key>`, `ran.<job key>`, `waiting.<job key>`."""
    return f"{mark.value}.{job}"


DEPENDENTS = "dep"
"""The prefix of the bucket's other keys: one per edge of a flow, `dep.<tenant>.<upstream>.<dependent>` (names and
tenants hold no dot), so that a job's dependents are one listing the server filters
(services/jetcron_services/api/dependents.py)."""


def dependent_key(tenant: str, upstream: str, dependent: str) -> str:
    return f"{DEPENDENTS}.{tenant}.{upstream}.{dependent}"


def dependents_filter(tenant: str, upstream: str) -> str:
    return f"{DEPENDENTS}.{tenant}.{upstream}.*"


def raised(mark: Mark, old: JoinMark | None, new: JoinMark) -> JoinMark | None:
    """`new` when it is above `old` (or nothing is stored), else None: the value a compare-and-set writes. Times
    order OK and RAN; run ids order WAITING (a job's run ids order its runs by occurrence, jetcron.core.ids.run_id)."""
    if old is None:
        return new
    if mark is Mark.WAITING:
        return new if new.run_id > old.run_id else None
    return new if new.at is not None and (old.at is None or new.at > old.at) else None


def succeeded(run: Run) -> JoinMark | None:
    """The OK mark a succeeded run gives its job."""
    if run.state is not RunState.SUCCEEDED:
        return None
    return JoinMark(at=run.finished_at or run.created_at, run_id=run.run_id)


def ran(run: Run) -> JoinMark | None:
    """The RAN mark a run that ran (or runs, or is about to) gives its job."""
    if run.state in UNRUN:
        return None
    return JoinMark(at=run.released_at or run.created_at, run_id=run.run_id)


def waits(run: Run) -> JoinMark | None:
    """The WAITING mark of a run waiting on its upstreams (an overlap's buffered run waits on its job: not one)."""
    if run.state is not RunState.WAITING or run.after:
        return None
    return JoinMark(at=run.created_at, run_id=run.run_id)


def marks_of(run: Run, *, upstream: bool, dependent: bool) -> list[tuple[Mark, JoinMark]]:
    """The marks a run's record raises: its job's OK where the job is an upstream of a `latest` join, its RAN and
    WAITING where the job is such a join."""
    found: list[tuple[Mark, JoinMark | None]] = []
    if upstream:
        found.append((Mark.OK, succeeded(run)))
    if dependent:
        found += [(Mark.RAN, ran(run)), (Mark.WAITING, waits(run))]
    return [(mark, value) for mark, value in found if value is not None]


def from_newest(mark: Mark, newest: Sequence[Run], more: bool) -> JoinMark:
    """A job's mark where none is stored (its runs were recorded before marks were kept, or it has just joined a
    flow), from its newest run records, newest first; `more`: older records were left unread.

    None found reads as never (no success, no waiting run), except for RAN with older records unread: the job then
    took its upstreams' successes before the oldest record read, if ever, so that record's creation stands in. At
    worst the job waits for one more success of an upstream; it never runs twice on the same one."""
    pick = {Mark.OK: succeeded, Mark.RAN: ran, Mark.WAITING: waits}[mark]
    for run in newest:
        value = pick(run)
        if value is not None:
            return value
    if mark is Mark.RAN and more and newest:
        return JoinMark(at=newest[-1].created_at)
    return JoinMark()
