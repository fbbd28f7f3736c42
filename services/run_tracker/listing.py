"""The index of runs by state that `runs.list?state=` reads: every tracker replica keeps its watched records of
the non-terminal runs (reconciler.active), and answers `jc.tracker.runs` from them, so listing the running (or
scheduled, waiting, ...) runs never reads the run bucket. Terminal runs are listed by job (their keys start
with the job's: docs/architecture.md)."""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import Mapping

import msgspec

from jetcron.bus.ports import Message
from jetcron.core.models import Run
from jetcron.services.runtime import Context
from jetcron.wire import subjects as s
from jetcron.wire.api import Page, Reply, error_reply
from jetcron.wire.codec import encode
from jetcron.wire.messages import ActiveRunsQuery


def select(active: Mapping[str, Run], query: ActiveRunsQuery) -> Page[Run]:
    """The page of active runs in `query.state` (and its tenant and queue), by run id after the cursor: one pass,
    no sort of the whole index."""
    def wanted(run: Run) -> bool:
        return (run.state == query.state and run.run_id > query.cursor
                and (query.tenant is None or run.tenant == query.tenant)
                and (query.queue is None or (run.spec.queue if run.spec else "default") == query.queue))

    page = heapq.nsmallest(query.limit + 1, (r for r in active.values() if wanted(r)), key=lambda r: r.run_id)
    more = len(page) > query.limit
    items = page[:query.limit]
    return Page(items=items, next_cursor=items[-1].run_id if more and items else None)


async def serve_listing(ctx: Context, active: Mapping[str, Run], synced: asyncio.Event) -> None:
    """Answer queries once the watch has caught up (before, a replica would answer with a partial index)."""
    await synced.wait()

    async def answer(msg: Message) -> None:
        try:
            query = msgspec.json.decode(msg.data, type=ActiveRunsQuery)
            reply = Reply(ok=True, result=select(active, query))
        except Exception as exc:
            reply = error_reply(exc)
        await msg.respond(encode(reply))

    sub = await ctx.rpc.serve(s.TRACKER_RUNS, answer, queue=s.TRACKER_RUNS_QUEUE, flush=True)
    try:
        await ctx.stop.wait()
    finally:
        await sub.unsubscribe()
