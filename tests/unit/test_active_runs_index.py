"""The trackers' index of active runs by state: one pass, a page after the cursor, tenant and queue filters; a
waiting run kept in the index's form (no spec) still filters by its queue and is listed whole."""

from __future__ import annotations

from datetime import UTC, datetime

from msgspec.structs import replace

from jetcron.bus.memory import MemoryRecords
from jetcron.core.lifecycle.reconcile import index_form, track
from jetcron.core.models import JobSpec, Run, RunState
from jetcron.wire.api import Page
from jetcron.wire.messages import ActiveRunsQuery
from jetcron_services.run_tracker.listing import select, whole_page

T0 = datetime(2026, 12, 3, tzinfo=UTC)


def _run(run_id: str, state: RunState, tenant: str = "default", queue: str = "default") -> Run:
    spec = JobSpec(name=run_id.split(".")[-2], command=["true"], tenant=tenant, queue=queue)
    return Run(run_id=run_id, job=run_id.rsplit(".", 1)[0], tenant=tenant, state=state, scheduled_at=T0, due_at=T0,
               created_at=T0, spec=spec)


RECORDS = [
    _run("b.20261203T000000000Z", RunState.RUNNING),
    _run("a.20261203T000000000Z", RunState.RUNNING),
    _run("c.20261203T000000000Z", RunState.SCHEDULED),
    _run("acme.d.20261203T000000000Z", RunState.RUNNING, tenant="acme", queue="etl"),
    _run("acme.e.20261203T000000000Z", RunState.RUNNING, tenant="acme"),
    _run("acme.f.20261203T000000000Z", RunState.SCHEDULED, tenant="acme", queue="etl"),
]
INDEX = [tracked for tracked in (track(None, run, 1) for run in RECORDS) if tracked is not None]
ACTIVE = [(tracked.run, tracked.queue) for tracked in INDEX]


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
    assert [r.run_id for r in select(ACTIVE, ActiveRunsQuery(state="scheduled", tenant="acme")).items] == [
        "acme.f.20261203T000000000Z"]


def test_a_waiting_run_is_indexed_without_its_spec_and_still_filtered_by_its_queue() -> None:
    # A scheduled run is kept without its spec (and so without its queue); its queue is kept beside it
    waiting = next(t for t in INDEX if t.run.run_id == "acme.f.20261203T000000000Z")
    assert (waiting.run.spec, waiting.queue) == (None, "etl")
    running = next(t for t in INDEX if t.run.run_id == "acme.d.20261203T000000000Z")
    assert running.run.spec is not None and running.run.spec.queue == "etl"
    assert [r.run_id for r in select(ACTIVE, ActiveRunsQuery(state="scheduled", queue="etl")).items] == [
        "acme.f.20261203T000000000Z"]
    assert select(ACTIVE, ActiveRunsQuery(state="scheduled", queue="default", tenant="acme")).items == []


def test_a_run_with_a_deadline_is_kept_whole_even_while_it_waits() -> None:
    run = _run("g.20261203T000000000Z", RunState.SCHEDULED)
    assert run.spec is not None
    timed = replace(run, spec=replace(run.spec, start_deadline_seconds=60.0))
    assert index_form(timed) is timed
    assert index_form(run).spec is None


async def test_a_page_is_listed_whole_in_its_order_and_a_run_that_moved_on_is_left_out() -> None:
    runs = MemoryRecords("jc_runs", Run)
    for run in RECORDS:
        await runs.put(run.run_id, run)
    waiting = {r.run_id: r for r in select(ACTIVE, ActiveRunsQuery(state="scheduled")).items}
    assert [r.spec for r in waiting.values()] == [None, None]
    # c's record moved on since the index's copy (its new revision comes by the watch)
    moved = replace(RECORDS[2], state=RunState.ASSIGNED, agent="a1")
    await runs.put(moved.run_id, moved)
    # A waiting run with a deadline is kept whole, so it is listed as the index has it, with no read
    timed = _run("b2.20261203T000000000Z", RunState.SCHEDULED)
    assert timed.spec is not None
    timed = replace(timed, spec=replace(timed.spec, finish_deadline_seconds=60.0))
    page = Page(items=[waiting["acme.f.20261203T000000000Z"], timed, waiting["c.20261203T000000000Z"]],
                next_cursor="x")
    listed = await whole_page(page, runs)
    assert listed.items == [RECORDS[5], timed]
    assert listed.next_cursor == "x"
