"""Placement's live view: agents from the agents bucket, reservations from the run records, suspect GPU hosts.

Every replica keeps it warm, leader or standby. Reservations follow the `jc_runs` watch: a run
whose record says assigned or running holds its share on its agents (adopted if this replica did
not place it: a new leader starts with the books of the runs already out), and gives it back
when its record moves on (ended, lost, retried, cancelled). RunFinished events release earlier.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from jetcron.core.lifecycle.departures import lapsed_with
from jetcron.core.lifecycle.run_state import ACTIVE
from jetcron.core.models import Run, RunState
from jetcron.core.placing.capacity import CapacitySummary
from jetcron.core.placing.placement import Demand
from jetcron.wire import subjects as s
from jetcron.wire.codec import decode
from jetcron.wire.messages import PlaceRun, QueueDepths, RunFinished, RunHandedBack, place_run_for
from jetcron_services.placement.board import Board, SuspectMark
from jetcron_services.placement.cluster_view import ClusterView
from jetcron_services.placement.ports import OpenBoardPorts, ViewPorts

RECORDS_KEPT = 20_000
"""Waiting records the view keeps decoded, the first to come: an assignment of one of them CASes on the copy, with
no read first. A record past them keeps only its PlaceRun (a fraction of the record's heap) and its assignment reads
it back once: with every record kept, the design's midnight herd waiting at the leader would take gigabytes
(bench/placement_memory.py, docs/benchmarks.md "Memory per service")."""


class Waiting(NamedTuple):
    """A record waiting for placement: what placement needs of it, and the record itself while within RECORDS_KEPT."""

    cmd: PlaceRun
    revision: int
    record: Run | None


@dataclass
class Held:
    """A run this replica counts on its agents: which attempt, and the revision of the assign write."""

    demand: Demand
    attempt: int
    revision: int | None
    """None while this replica's own assign write is in flight: older records must not release it."""


def demand_of(run: Run, enqueued: Run | None = None) -> Demand:
    cmd = place_run_for(run)
    return Demand(run_id=run.run_id, tenant=cmd.tenant, priority=cmd.priority, resources=cmd.resources,
                  require=cmd.require, needs=cmd.needs, enqueued_at=(enqueued or run).created_at, queue=cmd.queue)


class View(ClusterView):
    """Placement's live view: the cluster (ClusterView), and the reservations and waiting runs its run records say."""

    ctx: ViewPorts  # ClusterView's ports, and those its run records' side reads

    def __init__(self, ctx: ViewPorts, board: Board | None = None) -> None:
        super().__init__(ctx, board)
        self.placed: dict[str, Held] = {}
        self.active: dict[str, Run] = {}
        """Assigned and running records, by run id (the truth the books follow)."""
        self.by_agent: dict[str, set[str]] = {}
        self.scheduled: dict[str, Waiting] = {}
        """Records waiting for placement, with their revisions: a new leader takes them up without waiting for
        redelivery, and an assignment CASes from them (`copy`) without reading first."""
        self.records_kept = RECORDS_KEPT
        self._kept = 0
        """Entries of `scheduled` that keep their record."""
        self.finished: dict[str, int] = {}
        """Attempts a RunFinished released before their record caught up: not adopted again."""
        self.runs_synced = asyncio.Event()
        self.on_scheduled: Callable[[PlaceRun], None] | None = None
        """Told of every record waiting for placement: the leader holds it (or moves a reprioritized one)."""
        self.on_moved_on: Callable[[str, int | None], None] | None = None
        """Told of a record no longer waiting for placement (cancelled, say), with its attempt (None: deleted)."""

    async def synced(self) -> None:
        """Both initial loads are in: only then may a leader place (else it would miss runs already out)."""
        await self.agents_synced.wait()
        await self.runs_synced.wait()

    def _back(self, agent_id: str) -> None:
        for run_id in sorted(self.by_agent.get(agent_id, ())):
            run = self.active[run_id]
            if run_id not in self.placed:
                self._adopt(run)
            elif run.spec is not None:
                self.cluster.release(run_id)
                self.cluster.adopt(run_id, run.spec.resources, run.agents or [agent_id], run.gpu_indices)

    # --- reservations from the run records ----------------------------------------------------

    async def watch_runs(self) -> None:
        async for run_id, run, revision in self.ctx.runs.watch():
            if not run_id:
                self.runs_synced.set()
                continue
            self.on_record(run_id, run, revision)

    def on_record(self, run_id: str, run: Run | None, revision: int) -> None:
        gone = lapsed_with(self.active.get(run_id), run)
        if gone is not None:
            self._lapse(gone, run_id)
        if run is not None and run.state is RunState.SCHEDULED and run.spec is not None:
            self._wait(run, revision)
        elif (left := self.scheduled.pop(run_id, None)) is not None:
            self._kept -= left.record is not None
            if self.on_moved_on is not None:
                self.on_moved_on(run_id, run.attempt if run is not None else None)
        held = self.placed.get(run_id)
        if run is not None and run.state in ACTIVE and run.spec is not None:
            self._index(run)
            if self.finished.get(run_id, 0) >= run.attempt:
                return
            if held is not None and held.attempt == run.attempt:
                if held.revision is None:
                    held.revision = revision  # the record proves the assignment landed
                return
            if held is not None:
                self.release(run_id)
            self._adopt(run, revision)
            return
        self._unindex(run_id)
        if run is None or run.state.terminal or (held is not None and run.attempt > held.attempt):
            self.finished.pop(run_id, None)
        if held is None:
            return
        ended = run is None or run.state.terminal or run.attempt > held.attempt
        if not ended and (held.revision is None or revision <= held.revision):
            return  # an older record than our own assign write
        self.release(run_id)

    def _wait(self, run: Run, revision: int) -> None:
        old = self.scheduled.get(run.run_id)
        had = old is not None and old.record is not None
        keep = had or self._kept < self.records_kept
        self._kept += keep - had
        spec = run.spec
        assert spec is not None
        # A new revision of the same attempt (its waiting reason written, say) keeps the PlaceRun the leader holds
        # already: a second one per revision cost its build and, held beside the first, its memory.
        if old is not None and (old.cmd.attempt, old.cmd.priority, old.cmd.queue) == (run.attempt, spec.priority,
                                                                                       spec.queue):
            cmd = old.cmd
        else:
            cmd = place_run_for(run)
        self.scheduled[run.run_id] = Waiting(cmd, revision, run if keep else None)
        if self.on_scheduled is not None:
            self.on_scheduled(cmd)

    def copy(self, run_id: str) -> tuple[Run, int] | None:
        """The waiting record and its revision as the watch delivered it, if kept: a write may start from it."""
        waiting = self.scheduled.get(run_id)
        return None if waiting is None or waiting.record is None else (waiting.record, waiting.revision)

    def _adopt(self, run: Run, revision: int = 0) -> None:
        spec = run.spec
        assert spec is not None
        if self.cluster.adopt(run.run_id, spec.resources, run.agents or ([run.agent] if run.agent else []),
                              run.gpu_indices):
            demand = demand_of(run)
            self.placed[run.run_id] = Held(demand, run.attempt, revision)
            self.queue.charge(demand)
            self.changed.set()

    def _index(self, run: Run) -> None:
        old = self.active.get(run.run_id)
        if old is not None and old.agents != run.agents:
            self._unindex(run.run_id)
        self.active[run.run_id] = run
        for agent in run.agents or ([run.agent] if run.agent else []):
            self.by_agent.setdefault(agent, set()).add(run.run_id)

    def _unindex(self, run_id: str) -> None:
        old = self.active.pop(run_id, None)
        if old is None:
            return
        for agent in old.agents or ([old.agent] if old.agent else []):
            ids = self.by_agent.get(agent)
            if ids is not None:
                ids.discard(run_id)
                if not ids:
                    del self.by_agent[agent]

    def hold(self, demand: Demand, attempt: int) -> None:
        """The leader reserved a place and is about to write the assignment."""
        self.placed[demand.run_id] = Held(demand, attempt, None)

    def assigned(self, run_id: str, revision: int) -> None:
        held = self.placed.get(run_id)
        if held is not None:
            held.revision = revision

    def unhold(self, run_id: str) -> None:
        """The assign write failed: give the place back, and count whatever the record says instead."""
        self.release(run_id)
        run = self.active.get(run_id)
        if run is not None:
            self._adopt(run)

    def adopt_again(self, held: Held) -> None:
        """A release that did not happen after all (a preemption tried on the books and not made): the run counts on
        its agents again, from its record, if that is still the attempt released."""
        run = self.active.get(held.demand.run_id)
        if run is not None and run.attempt == held.attempt and held.demand.run_id not in self.placed:
            self._adopt(run, held.revision or 0)

    def drop_in_flight(self) -> None:
        """Leadership ended mid-pass: assignments whose write may never have happened are not counted."""
        for run_id, held in list(self.placed.items()):
            if held.revision is None:
                self.unhold(run_id)

    def release(self, run_id: str) -> None:
        held = self.placed.pop(run_id, None)
        self.cluster.release(run_id)
        if held is not None:
            self.queue.refund(held.demand)
            self.changed.set()

    async def watch_endings(self) -> None:
        """Release reservations as runs end, from the events stream (new events only): sooner than the record."""
        async for msg in self.ctx.streams.tail(s.EVENTS_ALL):
            kind, _source = s.parse_event_subject(msg.subject)
            ended: RunFinished | RunHandedBack
            if kind == "finished":
                ended = decode(msg.data, RunFinished)
            elif kind == "handed_back":
                ended = decode(msg.data, RunHandedBack)
            else:
                continue
            held = self.placed.get(ended.run_id)
            if held is not None and held.attempt == ended.attempt and held.revision is not None:
                self.finished[ended.run_id] = ended.attempt


async def open_board(ctx: OpenBoardPorts) -> Board:
    return Board(await ctx.buckets.open(s.BUCKET_PLACEMENT, CapacitySummary),
                 await ctx.buckets.open(s.BUCKET_PLACEMENT, SuspectMark),
                 await ctx.buckets.open(s.BUCKET_PLACEMENT, QueueDepths))
