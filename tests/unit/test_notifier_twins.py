"""The notifier's decisions on the bus's twins (jetcron.bus.memory, twin_support.py): a run record's change comes in as
its bucket's stream delivers it, the delivery log is the records' twin (jc_notify), and a `subject` rule's notice
goes out on the publisher's twin, whose record says exactly what was published. The clock is the test's: a
failed try's backoff passes when the test moves it.

Only `subject` targets are sent here: a webhook is an HTTP POST and an email an SMTP session, neither on the bus."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
from twin_support import twin_context

from jetcron.bus.consume import Drop, Retry
from jetcron.bus.memory import MemoryConsumers, MemoryMessage, MemoryPublisher, MemoryRecords, Published
from jetcron.config import Settings
from jetcron.core.clock import ManualClock
from jetcron.core.errors import Unavailable
from jetcron.core.lifecycle.notify import DELIVERED, DELIVERY_HEADER, EVENT_HEADER, PARKED, PENDING, Delivery, Notice
from jetcron.core.models import AttemptRecord, JobRecord, JobSpec, NotifyEvent, Run, RunState
from jetcron.core.validate import decode_spec
from jetcron.wire import subjects as s
from jetcron.wire.codec import decode, encode
from jetcron.wire.messages import Redeliver
from jetcron_services.notifier import service
from jetcron_services.notifier.service import Notifier
from jetcron_services.notifier.targets import Targets

T0 = datetime(2026, 12, 3, 10, 0, tzinfo=UTC)
RUN_ID = "acme.nightly.20261203T100000000Z"
DONE = {"on": ["succeeded"], "subject": "ops.done"}
ALERTS = {"on": ["failed", "dead"], "subject": "ops.alerts"}
AUDIT = {"on": ["succeeded", "dead"], "subject": "audit"}


def _spec(notify: list[dict[str, Any]]) -> JobSpec:
    return decode_spec({"name": "nightly", "command": ["true"], "tenant": "acme", "schedule": {"kind": "now"},
                        "notify": notify})


def _run(state: RunState, *, spec: JobSpec | None, run_id: str = RUN_ID, attempt: int = 1,
         failed: int = 0) -> Run:
    """A run of acme's nightly job; `failed`: that many attempts closed as failed (exit code 3)."""
    history = [AttemptRecord(attempt=n, outcome="failed", exit_code=3, reason="exit code 3", started_at=T0,
                             finished_at=T0 + timedelta(seconds=n)) for n in range(1, failed + 1)]
    return Run(run_id=run_id, job="acme.nightly", tenant="acme", state=state, attempt=attempt, scheduled_at=T0,
               due_at=T0, created_at=T0, finished_at=T0 + timedelta(minutes=1) if state.terminal else None,
               history=history, spec=spec)


class Publisher(MemoryPublisher):
    """The publisher's twin, refusing to store while `down` (the server full or not answering)."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False

    async def publish(self, subject: str, message: Any, **kw: Any) -> int:
        if self.down:
            raise Unavailable("JC_NOTIFY did not answer")
        return await super().publish(subject, message, **kw)


class Service:
    """The notifier as its main builds it, on a twin Context."""

    def __init__(self, **settings: Any) -> None:
        self.clock = ManualClock(T0)
        self.ctx = twin_context("notifier", clock=self.clock, settings=Settings(**settings))
        self.publisher = Publisher()
        self.ctx.publisher = self.publisher

    async def start(self) -> Notifier:
        self.log = cast(MemoryRecords[Delivery], await self.ctx.buckets.open(s.BUCKET_NOTIFY, Delivery))
        # Each of Targets' parameters is the Context's part of the same name, as main passes them.
        self.targets = Targets(**{name: getattr(self.ctx, name) for name in inspect.signature(Targets).parameters})
        self.notifier = Notifier(self.ctx, self.log, self.targets)
        return self.notifier

    async def record(self, run: Run) -> MemoryMessage:
        """Store the run's record; the message its bucket's stream delivers for that write."""
        revision = await self.ctx.runs.put(run.run_id, run)
        return MemoryMessage(s.kv_subject(s.BUCKET_RUNS, run.run_id), encode(run), seq=revision)

    def sent(self) -> list[tuple[str, str | None]]:
        """(subject, message id) of each notice published, in order."""
        return [(p.subject, p.msg_id) for p in self.publisher.published]

    async def deliveries(self) -> dict[str, Delivery]:
        return {key: (await self.log.get(key))[0] for key in await self.log.keys()}


@pytest.fixture
async def notifying() -> AsyncIterator[Service]:
    running = Service(notify_max_attempts=2, notify_backoff=1.0)
    await running.start()
    yield running
    await running.targets.close()


def _notice(published: Published) -> Notice:
    return decode(published.data, Notice)


async def until(done: Callable[[], bool]) -> None:
    """Let the service's tasks run until `done` (they need no time to pass, only turns of the loop)."""
    async def turns() -> None:
        while not done():
            await asyncio.sleep(0)
    await asyncio.wait_for(turns(), 5)


async def test_a_finished_run_is_published_on_each_subject_whose_rule_names_the_event(notifying: Service) -> None:
    run = _run(RunState.SUCCEEDED, spec=_spec([DONE, ALERTS, AUDIT]))
    await notifying.notifier.on_run(await notifying.record(run))  # settled: no Retry
    # rules 0 and 2 name `succeeded`; rule 1 (failed, dead) does not
    notice_id = f"{RUN_ID}.succeeded-0"
    assert sorted(notifying.sent()) == [("jc.notify.acme.audit", f"{notice_id}-2"),
                                        ("jc.notify.acme.ops.done", f"{notice_id}-0")]
    for published in notifying.publisher.published:
        assert published.headers == {EVENT_HEADER: "succeeded", DELIVERY_HEADER: published.msg_id}
        assert _notice(published) == Notice(
            id=notice_id, event=NotifyEvent.SUCCEEDED, tenant="acme", job="nightly", run_id=RUN_ID, attempt=1,
            state="succeeded", scheduled_at=T0, finished_at=T0 + timedelta(minutes=1))
    # each (notice, rule) has its delivery record, delivered at the first try
    deliveries = await notifying.deliveries()
    assert sorted(deliveries) == [f"{notice_id}-0", f"{notice_id}-2"]
    assert {(d.rule, d.target, d.state, len(d.attempts), d.attempts[0].ok) for d in deliveries.values()} == {
        (0, "subject jc.notify.acme.ops.done", DELIVERED, 1, True),
        (2, "subject jc.notify.acme.audit", DELIVERED, 1, True)}


@pytest.mark.parametrize(("run", "why"), [
    pytest.param(_run(RunState.SUCCEEDED, spec=_spec([ALERTS])), "no rule names succeeded", id="event_not_named"),
    pytest.param(_run(RunState.RUNNING, spec=_spec([DONE, ALERTS, AUDIT])), "a live run holds no event",
                 id="still_running"),
    pytest.param(_run(RunState.SUCCEEDED, spec=_spec([])), "its spec has no rules", id="no_rules"),
    pytest.param(_run(RunState.SCHEDULED, attempt=2, failed=1, spec=_spec([DONE, AUDIT])),
                 "a failed attempt is told only where a rule names failed", id="failed_attempt_not_named"),
])
async def test_nothing_is_published_when_the_rules_name_no_event_of_the_record(notifying: Service, run: Run,
                                                                               why: str) -> None:
    await notifying.notifier.on_run(await notifying.record(run))
    assert (notifying.publisher.published, await notifying.deliveries()) == ([], {}), why


async def test_a_change_delivered_again_is_not_published_or_tried_again(notifying: Service) -> None:
    message = await notifying.record(_run(RunState.SUCCEEDED, spec=_spec([DONE])))
    await notifying.notifier.on_run(message)
    await notifying.notifier.on_run(message)  # the stream's redelivery, or another replica's
    assert notifying.sent() == [("jc.notify.acme.ops.done", f"{RUN_ID}.succeeded-0-0")]
    # the notifier's own record says so (the publisher's twin would also drop a repeated message id)
    (delivery,) = (await notifying.deliveries()).values()
    assert (delivery.state, len(delivery.attempts)) == (DELIVERED, 1)


async def test_each_later_revision_of_a_run_publishes_only_the_events_it_adds(notifying: Service) -> None:
    spec = _spec([ALERTS])
    # attempt 1 failed and the run is retried: its failure is told
    await notifying.notifier.on_run(await notifying.record(_run(RunState.SCHEDULED, spec=spec, attempt=2,
                                                                failed=1)))
    assert notifying.sent() == [("jc.notify.acme.ops.alerts", f"{RUN_ID}.failed-1-0")]
    # attempt 2 failed too and the run is dead: the record holds both failures, but only what is new goes out
    await notifying.notifier.on_run(await notifying.record(_run(RunState.DEAD, spec=spec, attempt=2, failed=2)))
    assert sorted(notifying.sent()[1:]) == [("jc.notify.acme.ops.alerts", f"{RUN_ID}.dead-0-0"),
                                           ("jc.notify.acme.ops.alerts", f"{RUN_ID}.failed-2-0")]
    deliveries = await notifying.deliveries()
    assert {key: len(d.attempts) for key, d in deliveries.items()} == {  # the first failure was not tried again
        f"{RUN_ID}.failed-1-0": 1, f"{RUN_ID}.failed-2-0": 1, f"{RUN_ID}.dead-0-0": 1}
    by_id = {p.msg_id: _notice(p) for p in notifying.publisher.published}
    assert (by_id[f"{RUN_ID}.failed-2-0"].attempt, by_id[f"{RUN_ID}.failed-2-0"].exit_code) == (2, 3)
    assert (by_id[f"{RUN_ID}.dead-0-0"].state, by_id[f"{RUN_ID}.dead-0-0"].attempt) == ("dead", 2)


async def test_a_run_without_a_spec_snapshot_follows_its_jobs_rules_as_the_jobs_watch_keeps_them(
        notifying: Service) -> None:
    ctx, notifier = notifying.ctx, notifying.notifier
    await ctx.jobs.put("acme.nightly", JobRecord(spec=_spec([{"on": ["skipped"], "subject": "ops.skips"}]),
                                                 created_at=T0, updated_at=T0))
    watching = asyncio.create_task(notifier.watch_jobs())
    try:
        await asyncio.wait_for(notifier.jobs_loaded.wait(), 5)
        # A skipped run keeps no spec: the job's rule decides
        await notifier.on_run(await notifying.record(_run(RunState.SKIPPED, spec=None)))
        assert notifying.sent() == [("jc.notify.acme.ops.skips", f"{RUN_ID}.skipped-0-0")]
        # Once the job is deleted, its next skipped run has no rules to follow
        await ctx.jobs.delete("acme.nightly")
        await until(lambda: "acme.nightly" not in notifier.jobs)
        await notifier.on_run(await notifying.record(_run(RunState.SKIPPED, spec=None,
                                                          run_id="acme.nightly.20261203T100500000Z")))
        assert len(notifying.sent()) == 1
    finally:
        watching.cancel()
        await asyncio.gather(watching, return_exceptions=True)


async def test_a_failed_send_is_tried_after_its_backoff_then_parked_and_sent_when_redelivered(
        notifying: Service) -> None:
    notifier, clock, publisher = notifying.notifier, notifying.clock, notifying.publisher
    message = await notifying.record(_run(RunState.SUCCEEDED, spec=_spec([DONE])))
    key = f"{RUN_ID}.succeeded-0-0"
    # Given the subject's stream does not answer: the try fails, and the change is to be looked at again
    publisher.down = True
    with pytest.raises(Retry) as caught:
        await notifier.on_run(message)
    delivery = (await notifying.deliveries())[key]
    assert delivery.next_at is not None and (delivery.state, len(delivery.attempts)) == (PENDING, 1)
    assert "Unavailable: JC_NOTIFY did not answer" in delivery.attempts[0].error
    assert caught.value.delay == pytest.approx((delivery.next_at - T0).total_seconds())
    # When the change comes back before its backoff has passed: no try
    clock.set(delivery.next_at - timedelta(milliseconds=10))
    with pytest.raises(Retry) as early:
        await notifier.on_run(message)
    assert early.value.delay == pytest.approx(0.05)
    assert len((await notifying.deliveries())[key].attempts) == 1
    # And once it has passed, the second try fails too: the last of notify_max_attempts, so it is parked and the
    # change settled (nothing left to try)
    clock.set(delivery.next_at)
    await notifier.on_run(message)
    parked = (await notifying.deliveries())[key]
    assert (parked.state, len(parked.attempts), parked.next_at, publisher.published) == (PARKED, 2, None, [])
    # When its owner asks for it again (another tenant may not) once the stream answers: it is sent, and delivered
    publisher.down = False
    with pytest.raises(Drop, match="no delivery"):
        await notifier.on_redeliver(MemoryMessage(s.STREAM_REDELIVER, encode(Redeliver(
            delivery_id=key, tenant="other", at=clock.now()))))
    assert publisher.published == []
    await notifier.on_redeliver(MemoryMessage(s.STREAM_REDELIVER, encode(Redeliver(
        delivery_id=key, tenant="acme", at=clock.now()))))
    assert notifying.sent() == [("jc.notify.acme.ops.done", key)]
    sent = (await notifying.deliveries())[key]
    assert (sent.state, len(sent.attempts), sent.budget_from) == (DELIVERED, 3, 2)


async def test_the_service_reads_run_changes_from_the_runs_stream_and_settles_them() -> None:
    # Given the notifier's main on a twin Context: its durable consumer on the runs bucket's stream is a twin queue
    notifying = Service()
    ctx = notifying.ctx
    queue = cast(MemoryConsumers, ctx.consumers).queue(s.kv_stream(s.BUCKET_RUNS), s.CONSUMER_NOTIFIER)
    running = asyncio.create_task(service.main(ctx))
    try:
        await asyncio.wait_for(ctx.ready.wait(), 5)
        # When a run's record changes (its bucket's stream delivers the write)
        run = _run(RunState.SUCCEEDED, spec=_spec([DONE]))
        await queue.publish(s.kv_subject(s.BUCKET_RUNS, RUN_ID), encode(run))
        # Then its notice is published and the change acked
        await until(lambda: not queue.unsettled)
        assert notifying.sent() == [("jc.notify.acme.ops.done", f"{RUN_ID}.succeeded-0-0")]
        log = await ctx.buckets.open(s.BUCKET_NOTIFY, Delivery)
        assert (await log.get(f"{RUN_ID}.succeeded-0-0"))[0].state == DELIVERED
    finally:
        ctx.stop.set()
        await asyncio.wait_for(running, 5)
