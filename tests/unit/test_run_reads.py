"""A job's latest run is one read, and listing runs reads no record it does not return: the api's runs.list and
the gateway's job views on the twins, with every record read counted."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, cast

import msgspec
import pytest
from twin_support import twin_context

from jetcron.bus.memory import MemoryRecords
from jetcron.core.errors import InvalidSpec
from jetcron.core.ids import job_key, run_id
from jetcron.core.models import JobRecord, JobSpec, Run, RunState
from jetcron.sdk.client import Client
from jetcron.sdk.verbs import Verbs
from jetcron.wire import subjects as s
from jetcron_services.api.call import Call
from jetcron_services.api.runs import SCAN_RUNS, Runs
from jetcron_services.gateway.design import job_id, job_status
from jetcron_services.gateway.listing import latest_run
from jetcron_services.runtime import Context

T0 = datetime(2026, 1, 1, tzinfo=UTC)


class CountedRuns(MemoryRecords[Run]):
    """The run bucket's twin, counting what a caller reads: each record (get) and each last-of-a-pattern, and the
    key names the server lists (keys)."""

    def __init__(self) -> None:
        super().__init__(s.BUCKET_RUNS, Run)
        self.reads = 0
        self.listed = 0

    async def keys(self, pattern: str = ">") -> list[str]:
        found = await super().keys(pattern)
        self.listed += len(found)
        return found

    async def get(self, key: str) -> tuple[Run, int]:
        self.reads += 1
        return await super().get(key)

    async def last(self, pattern: str) -> tuple[Run, int] | None:
        self.reads += 1
        return await super().last(pattern)


class InProcess:
    """The SDK's caller, answered by the api's Runs verbs in this process (a tenant's subject, or the admin's)."""

    def __init__(self, ctx: Context, tenant: str | None) -> None:
        self.runs = Runs(ctx)
        self.tenant = tenant
        self.calls: list[str] = []

    async def call(self, verb: str, payload: dict[str, Any] | None = None) -> Any:
        self.calls.append(verb)
        assert verb == "runs.list", verb
        return msgspec.to_builtins(await self.runs.list(Call(msgspec.json.encode(payload or {}), self.tenant)))


def _run(tenant: str, name: str, n: int, state: RunState = RunState.SUCCEEDED, queue: str = "default") -> Run:
    at = T0 + timedelta(minutes=n)
    key = job_key(tenant, name)
    return Run(run_id=run_id(key, at), job=key, tenant=tenant, state=state, scheduled_at=at, due_at=at,
               created_at=at, spec=JobSpec(name=name, command=["true"], tenant=tenant, queue=queue))


def _context() -> tuple[Context, CountedRuns]:
    ctx = twin_context()
    runs = CountedRuns()
    ctx.runs = runs
    return ctx, runs


async def _put(ctx: Context, run: Run) -> None:
    """A run and its job's record (a listing without a job walks the jobs)."""
    assert run.spec is not None
    await ctx.runs.put(run.run_id, run)
    if await ctx.jobs.maybe(run.job) is None:
        await ctx.jobs.put(run.job, JobRecord(spec=run.spec, created_at=T0, updated_at=T0))


async def test_the_twins_last_is_the_key_written_last_under_the_pattern_not_the_highest() -> None:
    items = MemoryRecords(s.BUCKET_RUNS, Run)
    assert await items.last("foo.*") is None
    late, early = _run("default", "foo", 9), _run("default", "foo", 1)
    await items.put(late.run_id, late)
    revision = await items.put(early.run_id, early)
    await items.put("foo.bar.20260101T000000000Z", _run("foo", "bar", 5))  # tenant foo's job bar: not foo's
    assert await items.last("foo.*") == (early, revision)
    assert (await items.last("foo.bar.*") or pytest.fail("no run of foo.bar"))[0].job == "foo.bar"
    await items.delete(early.run_id)
    assert await items.last("foo.*") is None  # its last write was a delete


async def test_the_gateways_latest_run_is_one_read_among_thousands() -> None:
    ctx, runs = _context()
    for n in range(2000):
        run = _run("acme", "nightly", n)
        await runs.put(run.run_id, run)
    written_last = _run("acme", "nightly", 700, RunState.RUNNING)  # an older occurrence, written last
    await runs.put(written_last.run_id, written_last)
    caller = InProcess(ctx, "acme")
    client = cast(Client, Verbs(caller))
    runs.reads = 0

    assert await latest_run(client, "nightly") == written_last
    assert (runs.reads, caller.calls) == (1, ["runs.list"])  # paging through the history would read 2,000

    job = JobRecord(spec=JobSpec(name="nightly", command=["true"], tenant="acme"), created_at=T0, updated_at=T0)
    view = job_status(job, await latest_run(client, job_id(job, "acme")), "acme", base="")
    assert (view.job_id, view.status, view.run_id) == ("nightly", "running", written_last.run_id)
    assert runs.reads == 2


async def test_another_tenants_job_and_a_namesake_tenant_do_not_mix() -> None:
    ctx, runs = _context()
    for run in (_run("default", "foo", 1), _run("foo", "bar", 2), _run("globex", "nightly", 3)):
        await runs.put(run.run_id, run)
    acme, default, admin = (cast(Client, Verbs(InProcess(ctx, t))) for t in ("acme", "default", None))
    assert await acme.runs.latest("nightly") is None  # globex's nightly is not acme's
    assert (await default.runs.latest("foo") or pytest.fail("no run")).job == "foo"
    assert (await admin.runs.latest("foo") or pytest.fail("no run")).job == "foo"
    assert (await admin.runs.latest("foo.bar") or pytest.fail("no run")).job == "foo.bar"
    assert await default.runs.latest("bar") is None
    # newest by id: `foo.bar.<stamp>` sorts after every `foo.<stamp>` and would be taken for foo's
    assert [r.job for r in (await default.runs.list(job="foo")).items] == ["foo"]


async def test_when_the_last_write_was_a_delete_the_newest_run_stands_in() -> None:
    ctx, runs = _context()
    for n in range(5):
        run = _run("acme", "nightly", n)
        await runs.put(run.run_id, run)
    await runs.delete(_run("acme", "nightly", 0).run_id)  # let go by retention
    latest = await Runs(ctx).list(Call(b'{"job": "nightly", "latest": true}', "acme"))
    assert [r.run_id for r in latest.items] == [_run("acme", "nightly", 4).run_id]


@pytest.mark.parametrize(("extra", "field"), [({"state": "running"}, "state"), ({"queue": "etl"}, "queue"),
                                              ({"cursor": "x"}, "cursor"), ({"newest": True}, "newest"),
                                              ({"job": None}, "job")])
async def test_latest_refuses_what_one_read_cannot_answer_naming_the_field(extra: dict[str, Any],
                                                                            field: str) -> None:
    ctx, _ = _context()
    request = {"job": "nightly", "latest": True, **extra}
    with pytest.raises(InvalidSpec) as refused:
        await Runs(ctx).list(Call(msgspec.json.encode(request), "acme"))
    assert refused.value.field == field and refused.value.value == extra[field]


async def test_a_page_without_a_filter_reads_only_what_it_returns() -> None:
    ctx, runs = _context()
    for tenant in ("acme", "globex"):
        for n in range(300):
            await _put(ctx, _run(tenant, f"job{n % 3}", n))
    verbs = Runs(ctx)
    for request, tenant in (({"job": "job1", "limit": 50}, "acme"), ({"job": "job1", "limit": 50, "newest": True},
                                                                     "acme"),
                            ({"limit": 50}, "globex"), ({"limit": 50}, None), ({"limit": 50, "state": "succeeded"},
                                                                              "globex")):
        runs.reads = 0
        page = await verbs.list(Call(msgspec.json.encode(request), tenant))
        assert len(page.items) == 50 and runs.reads == 50, (request, tenant, runs.reads)
        assert tenant is None or {r.tenant for r in page.items} == {tenant}


async def test_a_filtered_page_reads_no_further_than_the_run_that_fills_it() -> None:
    ctx, runs = _context()
    for n in range(1000):  # every fourth run failed, the others succeeded; queue etl on every other
        run = _run("acme", "nightly", n, RunState.FAILED if n % 4 == 3 else RunState.SUCCEEDED,
                   "etl" if n % 2 else "default")
        await runs.put(run.run_id, run)
    verbs = Runs(ctx)
    for request, last in (({"state": "failed"}, 4 * 50 - 1), ({"queue": "etl"}, 2 * 50 - 1),
                          ({"state": "succeeded", "queue": "etl"}, 1 + 4 * 49)):
        runs.reads = 0
        page = await verbs.list(Call(msgspec.json.encode({"job": "nightly", "limit": 50, **request}), "acme"))
        assert len(page.items) == 50 and page.next_cursor == page.items[-1].run_id
        assert runs.reads == last + 1, (request, runs.reads)


async def _pages(verbs: Runs, tenant: str | None, **request: Any) -> tuple[list[str], list[int]]:
    """Every run id a listing gives, page after page, and how many each page held."""
    ids: list[str] = []
    sizes: list[int] = []
    cursor: str | None = None
    while True:
        page = await verbs.list(Call(msgspec.json.encode({**request, "cursor": cursor}), tenant))
        ids += [run.run_id for run in page.items]
        sizes.append(len(page.items))
        cursor = page.next_cursor
        if cursor is None:
            return ids, sizes


async def test_a_listing_without_a_job_lists_a_few_jobs_keys_not_every_run_of_the_tenant() -> None:
    ctx, runs = _context()
    for n in range(3000):  # 300 jobs of 10 runs each; every seventh failed; another tenant beside
        await _put(ctx, _run("acme", f"job{n % 300:03d}", n, RunState.FAILED if n % 7 == 0 else RunState.SUCCEEDED))
    for n in range(50):  # `x-y.` sorts before `x.`, as their run ids do
        await _put(ctx, _run("globex", ("x", "x-y", "x_y")[n % 3], n))
    verbs = Runs(ctx)
    runs.listed = runs.reads = 0
    page = await verbs.list(Call(b'{"limit": 50}', "acme"))
    assert [r.run_id for r in page.items] == sorted(r.run_id for r in page.items) and len(page.items) == 50
    # 5 jobs' keys (10 each), 50 records: not the tenant's 3,000 keys
    assert (runs.listed, runs.reads) == (50, 50), (runs.listed, runs.reads)

    # A filter reads at most SCAN_RUNS records and SCAN_JOBS jobs' keys a page, and pages on from where it stopped
    runs.listed = runs.reads = 0
    page = await verbs.list(Call(b'{"limit": 1000, "state": "failed"}', "acme"))
    assert runs.reads <= SCAN_RUNS and runs.listed <= SCAN_RUNS + 10 and page.next_cursor is not None

    everything = sorted(r.run_id for r in await _all(ctx, "acme"))
    for request in ({"limit": 50}, {"limit": 333, "state": "failed"}, {"limit": 1000}):
        ids, sizes = await _pages(verbs, "acme", **request)
        wanted = [i for i in everything if "state" not in request or (await ctx.runs.get(i))[0].state == "failed"]
        assert ids == wanted, request  # every run once, in order, whatever the page ended on
        assert max(sizes) <= request["limit"]
        newest, _ = await _pages(verbs, "acme", newest=True, **request)
        assert newest == wanted[::-1], request
    admin, _ = await _pages(verbs, None, limit=500)
    assert admin == sorted(r.run_id for r in [*await _all(ctx, "acme"), *await _all(ctx, "globex")])


async def _all(ctx: Context, tenant: str) -> list[Run]:
    return [(await ctx.runs.get(k))[0] for k in await ctx.runs.keys(s.runs_of_tenant_filter(tenant))]
