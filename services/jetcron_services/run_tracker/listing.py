"""The index of runs by state that `runs.list?state=` reads: every tracker replica keeps its watched records of
the non-terminal runs (reconciler.active), and answers `jc.tracker.runs` from them, so listing the running (or
scheduled, waiting, ...) runs never scans the run bucket: it reads back only the page's records that the index
keeps in its form (a waiting run's). Terminal runs are listed by job (their keys start with the job's:
docs/architecture.md)."""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import Iterable

import msgspec

from jetcron.bus.ports import Message, Records
from jetcron.core.lifecycle.reconcile import same_step, whole
from jetcron.core.models import Run
from jetcron.wire import subjects as s
from jetcron.wire.api import Page, Reply, error_reply
from jetcron.wire.codec import encode
from jetcron.wire.messages import ActiveRunsQuery
from jetcron_services.run_tracker.ports import ServeListingPorts
from jetcron_services.run_tracker.run_index import ActiveRuns


def select(active: Iterable[tuple[Run, str]], query: ActiveRunsQuery) -> Page[Run]:
    """The page of active runs in `query.state` (and its tenant and queue), by run id after the cursor: one pass
    over (record, queue) pairs, no sort of the whole index."""
    def wanted(run: Run, queue: str) -> bool:
        return (run.state == query.state and run.run_id > query.cursor
                and (query.tenant is None or run.tenant == query.tenant)
                and (query.queue is None or queue == query.queue))

    page = heapq.nsmallest(query.limit + 1, (r for r, queue in active if wanted(r, queue)), key=lambda r: r.run_id)
    more = len(page) > query.limit
    items = page[:query.limit]
    return Page(items=items, next_cursor=items[-1].run_id if more and items else None)


async def whole_page(page: Page[Run], runs: Records[Run]) -> Page[Run]:
    """The page with every record whole: the index keeps a waiting run without its spec and history, so those are
    read back (together, `Records.page`). One that moved on meanwhile is left out; the cursor stays where the
    index's page ended, so the next page neither repeats nor skips a run."""
    kept = {run.run_id: run for run in page.items if not whole(run)}
    found, _ = await runs.page(list(kept), len(kept), lambda run: same_step(run, kept[run.run_id]))
    read = {run.run_id: run for run in found}
    items = [run if whole(run) else read[run.run_id] for run in page.items if whole(run) or run.run_id in read]
    return Page(items=items, next_cursor=page.next_cursor)


async def serve_listing(ctx: ServeListingPorts, active: ActiveRuns, synced: asyncio.Event) -> None:
    """Answer queries once the watch has caught up (before, a replica would answer with a partial index)."""
    await synced.wait()

    async def answer(msg: Message) -> None:
        try:
            query = msgspec.json.decode(msg.data, type=ActiveRunsQuery)
            reply = Reply(ok=True, result=await whole_page(select(active.with_queues(), query), ctx.runs))
        except Exception as exc:
            reply = error_reply(exc)
        await msg.respond(encode(reply))

    sub = await ctx.rpc.serve(s.TRACKER_RUNS, answer, queue=s.TRACKER_RUNS_QUEUE, flush=True)
    try:
        await ctx.stop.wait()
    finally:
        await sub.unsubscribe()
