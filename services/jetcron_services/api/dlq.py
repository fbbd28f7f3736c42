"""Dead-letter verbs: the dead-lettered runs, and a dead or failed run run again as a new run."""

from __future__ import annotations

import msgspec

from jetcron.core.errors import Conflict, WriteConflict
from jetcron.core.ids import keyed_replay_id, replay_run_id
from jetcron.core.models import Run, RunState
from jetcron.ops.dlq import dead_lettered
from jetcron.wire import verbs as v
from jetcron.wire.api import Page
from jetcron.wire.codec import decode
from jetcron_services.api.admission import Admission
from jetcron_services.api.call import Call, visible
from jetcron_services.api.ports import DlqPorts
from jetcron_services.api.registry import Noun, verb
from jetcron_services.api.requests import body, integer, text
from jetcron_services.api.runs import run_id_of, visible_run


class Dlq(Noun):
    noun = "dlq"

    def __init__(self, ctx: DlqPorts, admission: Admission) -> None:
        self.ctx = ctx
        self.admission = admission

    @verb
    async def list(self, call: Call) -> Page[Run]:
        req = body(call.data, v.DlqList)
        limit = integer(req, "limit", 100, 1, 1000)
        # From the dead-letter stream, newest last; not a scan of every run record.
        latest = {e.run_id: e for e in await dead_lettered(self.ctx.streams, limit)}
        items: list[Run] = []
        for run_id, entry in latest.items():
            found = await self.ctx.runs.maybe(run_id)
            run = found[0] if found is not None else decode(entry.run, Run)
            if visible(run.tenant, call.tenant):
                items.append(run)
        return Page(items=items)

    @verb
    async def replay(self, call: Call) -> Run:
        req = body(call.data, v.DlqReplay)
        run_id = run_id_of(text(req, "run_id"))
        run = await visible_run(self.ctx, run_id, call.tenant)
        if run.state not in (RunState.DEAD, RunState.FAILED):
            raise Conflict(f"run {run_id} is {run.state}, only dead or failed runs can be replayed")
        await self.admission.admit(run.tenant)
        now = self.ctx.clock.now()
        key = text(req, "key", limit=128)
        # With a key, a retried request is the same replay (its id is the key's); without, each is a new one.
        ids = [keyed_replay_id(run_id, key)] if key is not None else [replay_run_id(run_id, n) for n in range(1, 100)]
        for n, replay_id in enumerate(ids, start=1):
            replay = msgspec.structs.replace(
                run, run_id=replay_id, state=RunState.SCHEDULED, attempt=1, due_at=now, created_at=now,
                agent=None, agents=[], token=0, assigned_at=None, started_at=None, finished_at=None, exit_code=None,
                outcome="", reason=f"replay {n if key is None else 'keyed'} of {run_id}", history=[],
            )
            try:
                await self.ctx.runs.create(replay.run_id, replay)
            except WriteConflict:
                if key is not None:
                    return (await self.ctx.runs.get(replay_id))[0]
                continue
            return replay  # its `scheduled` record is its hand-off to placement
        raise Conflict(f"run {run_id} was replayed too many times")
