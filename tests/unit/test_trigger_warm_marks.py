"""The trigger's warm state holds a `now` job made with its end only until its shard's mark covers it."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec

from jetcron.core.models import JobRecord, JobSpec, JobStatus, Schedule, ScheduleKind
from jetcron_services.trigger.warm import Warm

T0 = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


def _made(name: str) -> JobRecord:
    spec = JobSpec(name=name, command=["true"], schedule=Schedule(kind=ScheduleKind.NOW))
    return JobRecord(spec=spec, created_at=T0, updated_at=T0, expires_at=datetime(2026, 12, 10, tzinfo=UTC),
                     fired_by_mark=True)


def test_a_job_is_held_until_the_mark_of_its_shard_covers_it() -> None:
    warm = Warm(16)
    warm.job_changed("a", _made("a"), T0, revision=5)
    shard = warm.index.shard("a")
    assert "a" in warm.jobs and warm.marks.advance(shard) is None  # open, and nothing fired
    assert warm.mark_noted(shard, 4) == []
    assert "a" in warm.jobs
    assert warm.mark_noted(shard, 5) == ["a"]
    assert "a" not in warm.jobs and warm.index.wake_of("a") is None
    # a job the mark already covers (a trigger starting after it fired) is not held at all
    warm.job_changed("a", _made("a"), T0, revision=5)
    assert "a" not in warm.jobs


def test_a_fire_lets_go_of_the_revision_it_planned_only() -> None:
    warm = Warm(16)
    warm.job_changed("a", _made("a"), T0, revision=5)
    warm.job_changed("a", _made("a"), T0, revision=8)  # changed while it fired
    warm.fired("a", 5)
    shard = warm.index.shard("a")
    assert "a" in warm.jobs and warm.marks.advance(shard) is None
    assert warm.marks.open == {shard: {"a": 8}}
    warm.fired("a", 8)
    assert "a" not in warm.jobs and warm.marks.advance(shard) == 8


def test_an_ordinary_or_paused_revision_is_no_longer_judged_by_the_mark() -> None:
    warm = Warm(1)
    warm.job_changed("a", _made("a"), T0, revision=5)
    ordinary = msgspec.structs.replace(_made("a"), fired_by_mark=False, expires_at=None)
    warm.job_changed("a", ordinary, T0, revision=6)  # settled by the api: planned as any one-shot job
    assert "a" in warm.jobs and warm.marks.advance(0) == 6
    warm.job_changed("a", msgspec.structs.replace(ordinary, status=JobStatus.PAUSED), T0, revision=7)
    assert "a" not in warm.jobs and warm.marks.advance(0) == 7
    warm.mark_noted(0, 7)
    warm.job_changed("b", ordinary, T0, revision=8)  # an ordinary job moves the watch on, and writes no mark
    assert warm.marks.advance(0) is None
