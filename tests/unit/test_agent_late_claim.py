"""An attempt started before its claim (jetcron.core.lifecycle.leases.claims_late): a run that ends within a quarter
second writes no claim; one that goes on writes it before its start report; one whose claim is held for a newer
attempt, or cannot be written in time, is stopped. Its reports and its child carry the assignment's token."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import cast

import pytest
from opentelemetry.context import Context as TraceContext
from twin_support import twin_context

from jetcron.bus.lease import unclaimed
from jetcron.bus.memory import MemoryLeaseLog, MemoryPublisher
from jetcron.config import Settings
from jetcron.core.errors import Unavailable
from jetcron.core.host.sim import SimExecution
from jetcron.core.lifecycle.attempt_state import AttemptPhase
from jetcron.core.lifecycle.leases import claim_by, claims_late, record_tokens
from jetcron.core.models import JobSpec
from jetcron.wire import subjects as s
from jetcron.wire.codec import decode
from jetcron.wire.messages import AssignRun, RunFinished, RunStarted
from jetcron_services.agent.attempt import Attempt
from jetcron_services.agent.attempt_deps import AttemptDeps
from jetcron_services.agent.host.offer import HostSetup
from jetcron_services.agent.host.strays import StrayGuard
from jetcron_services.runtime import Context

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
P = AttemptPhase
TOKEN = 4_200
NONCE = "n0nce"
KEY = s.run_lease_key("r")


@pytest.mark.parametrize(("direct", "token", "due", "late"), [
    (True, TOKEN, T0, True),
    (False, TOKEN, T0, False),  # from the stream: it may have waited for a slot any time
    (True, 0, T0, False),  # no token with it (a runs bucket from 1, an older placement)
    (True, TOKEN, T0 + timedelta(seconds=1), False),  # staged: its claim covers the wait
])
def test_only_a_due_direct_assignment_with_its_token_starts_unclaimed(
        direct: bool, token: int, due: datetime, late: bool) -> None:
    assert claims_late(direct=direct, token=token, due_at=due, now=T0) is late


def test_an_unclaimed_attempt_stops_by_ten_seconds_or_half_the_assignment_stall_whichever_is_sooner() -> None:
    assert claim_by(100.0, assign_stall=30.0) == 110.0
    assert claim_by(100.0, assign_stall=4.0) == 102.0


def test_tokens_come_from_the_records_only_where_the_runs_bucket_started_at_the_floor() -> None:
    assert record_tokens(1_796_624_918_000_000) is True
    assert record_tokens(0) is False  # a runs bucket made before, from 1


def _ctx(**settings: object) -> Context:
    return twin_context("agent", settings=Settings(agent_sim=True, agent_job_user="@agent", **settings),
                        lease_log=MemoryLeaseLog())


def _attempt(ctx: Context, seconds: str, codes: str = "0") -> Attempt:
    cmd = AssignRun(run_id="r", attempt=1, job="j", agent="a", scheduled_at=T0, due_at=T0, token=TOKEN,
                    spec=JobSpec(name="j", command=["true"]))
    deps = AttemptDeps(strays=cast(StrayGuard, None), setup=cast(HostSetup, None),
                       sim=SimExecution.parse(seconds, codes), agent_nonce=lambda: NONCE)
    return Attempt(ctx, deps, cmd, unclaimed(KEY, "a", 1, NONCE), dict, TraceContext())


def _reports(ctx: Context) -> tuple[list[RunStarted], list[RunFinished]]:
    published = cast(MemoryPublisher, ctx.publisher).published
    return ([decode(p.data, RunStarted) for p in published if p.subject == s.event_subject("started", "a")],
            [decode(p.data, RunFinished) for p in published if p.subject == s.event_subject("finished", "a")])


async def test_a_run_that_ends_at_once_writes_no_claim_and_reports_the_assignments_token() -> None:
    ctx = _ctx()
    attempt = _attempt(ctx, "0")
    await asyncio.wait_for(attempt.run(), 5)
    started, [finished] = _reports(ctx)
    assert (started, finished.token, finished.outcome, attempt.phase) == ([], TOKEN, "succeeded", P.ENDED)
    assert await ctx.leases.read(KEY) is None
    assert cast(MemoryLeaseLog, ctx.leases.log).writes == 0


async def test_a_failed_run_that_never_claimed_releases_nothing() -> None:
    ctx = _ctx()
    attempt = _attempt(ctx, "0", "3")
    await asyncio.wait_for(attempt.run(), 5)
    [finished] = _reports(ctx)[1]
    assert (finished.outcome, cast(MemoryLeaseLog, ctx.leases.log).writes) == ("failed", 0)


async def test_a_run_that_goes_on_writes_its_claim_bound_to_its_agent_before_its_start_report() -> None:
    ctx = _ctx()
    attempt = _attempt(ctx, "0.6")
    task = asyncio.create_task(attempt.run())
    while not _reports(ctx)[0]:
        await asyncio.sleep(0.01)
    claim = await ctx.leases.read(KEY)
    assert claim is not None
    assert (claim.value.holder, claim.value.attempt, claim.value.bound, claim.writer) == ("a", 1, NONCE, "a")
    assert attempt.claim.lease.token == claim.token  # renewed (and released) from here as any claim
    await asyncio.wait_for(task, 5)
    [started], [finished] = _reports(ctx)
    assert (started.token, finished.token, finished.outcome) == (TOKEN, TOKEN, "succeeded")


async def test_a_claim_held_for_a_newer_attempt_stops_the_run_and_nothing_is_reported() -> None:
    ctx = _ctx()
    newer = await ctx.leases.take(KEY, "b", 600.0, attempt=2, bound="other")
    assert newer is not None
    attempt = _attempt(ctx, "3600")
    await asyncio.wait_for(attempt.run(), 5)  # not an hour: stopped as its claim is refused
    assert (attempt.phase, attempt.why, _reports(ctx)) == (
        P.ENDED, "claim held for another or a newer attempt (re-dispatched or cancelled)", ([], []))
    current = await ctx.leases.read(KEY)
    assert current is not None and current.token == newer.token  # the newer attempt's claim untouched


async def test_a_claim_the_storage_does_not_take_in_time_stops_the_run() -> None:
    ctx = _ctx(assign_stall=1.0)  # half of it: the claim's deadline

    async def down(*_: object, **__: object) -> None:
        raise Unavailable("lease write", "no responders")

    ctx.leases.take = down  # type: ignore[method-assign]
    attempt = _attempt(ctx, "3600")
    await asyncio.wait_for(attempt.run(), 10)
    assert (attempt.phase, attempt.why, _reports(ctx)) == (
        P.ENDED, "claim not written in time (the storage did not answer)", ([], []))
