"""The trackers' index of active runs by state: one pass, a page after the cursor, tenant and queue filters."""

from __future__ import annotations

from datetime import UTC, datetime

from jetcron.core.models import JobSpec, Run, RunState
from jetcron.services.run_tracker.listing import select
from jetcron.wire.messages import ActiveRunsQuery

T0 = datetime(2026, 12, 3, tzinfo=UTC)


def _run(run_id: str, state: RunState, tenant: str = "default", queue: str = "default") -> Run:
    spec = JobSpec(name=run_id.split(".")[-2], command=["true"], tenant=tenant, queue=queue)
    return Run(run_id=run_id, job=run_id.rsplit(".", 1)[0], tenant=tenant, state=state, scheduled_at=T0, due_at=T0,
               created_at=T0, spec=spec)


ACTIVE = {r.run_id: r for r in (
    _run("b.20261203T000000000Z", RunState.RUNNING),
    _run("a.20261203T000000000Z", RunState.RUNNING),
    _run("c.20261203T000000000Z", RunState.SCHEDULED),
    _run("acme.d.20261203T000000000Z", RunState.RUNNING, tenant="acme", queue="etl"),
    _run("acme.e.20261203T000000000Z", RunState.RUNNING, tenant="acme"),
)}


def test_a_page_of_one_state_in_run_id_order_with_a_cursor() -> None:
    first = select(ACTIVE, ActiveRunsQuery(state="running", limit=2))
    assert [r.run_id for r in first.items] == ["a.20261203T000000000Z", "acme.d.20261203T000000000Z"]
    assert first.next_cursor == "acme.d.20261203T000000000Z"
    rest = select(ACTIVE, ActiveRunsQuery(state="running", limit=2, cursor=first.next_cursor))
    assert [r.run_id for r in rest.items] == ["acme.e.20261203T000000000Z", "b.20261203T000000000Z"]
    assert rest.next_cursor is None


def test_a_tenant_and_a_queue_narrow_it() -> None:
    mine = select(ACTIVE, ActiveRunsQuery(state="running", tenant="acme"))
    assert [r.run_id for r in mine.items] == ["acme.d.20261203T000000000Z", "acme.e.20261203T000000000Z"]
    etl = select(ACTIVE, ActiveRunsQuery(state="running", queue="etl"))
    assert [r.run_id for r in etl.items] == ["acme.d.20261203T000000000Z"]
    assert select(ACTIVE, ActiveRunsQuery(state="scheduled", tenant="acme")).items == []
