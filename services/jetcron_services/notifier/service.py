"""The notifier: tells job owners about their runs (docs/notifications.md).

It reads every committed change of every run record from the bucket's own stream (KV_jc_runs) with the durable
consumer `notifier`, so a notice is owed from the moment a run's record says so, and nothing another service
publishes afterwards can be lost between the record and the notice. Each (notice, rule) is one delivery record
in jc_notify, keyed by the notice's id: the first replica to see it creates it, every try is appended to it,
and a delivery that is delivered or parked is never tried again. A message is acked once each of its
deliveries is settled; one with a try to come is redelivered by JetStream after the backoff (nak with delay).
Any number of replicas share the consumer.
"""

from __future__ import annotations

import asyncio
import random
from datetime import datetime

import msgspec

from jetcron.bus.consume import Drop, Retry
from jetcron.bus.kv import value_of
from jetcron.bus.ports import Message, Records
from jetcron.core.errors import NotFound, WriteConflict
from jetcron.core.lifecycle.notify import (
    DELIVERED,
    PARKED,
    PENDING,
    Delivery,
    Notice,
    after_try,
    delivery_key,
    notices,
    redelivered,
)
from jetcron.core.models import JobRecord, JobSpec, NotifyRule, RetryPolicy, Run
from jetcron.telemetry import metrics
from jetcron.wire import subjects as s
from jetcron.wire.codec import decode
from jetcron.wire.messages import Redeliver
from jetcron_services.notifier.ports import NotifierPorts
from jetcron_services.notifier.targets import Targets, describe
from jetcron_services.runtime import Context, background


class _Rules(msgspec.Struct):
    notify: list[msgspec.Raw] = msgspec.field(default_factory=list)


class _RulesOfRun(msgspec.Struct):
    """What of a run record says whether it may have rules to notify: its spec snapshot's, or its job's when it
    keeps none. The notifier reads every change of every run and most have no rules: decoding these two fields
    alone decides that for a fraction of the whole record's decode."""

    job: str
    spec: _Rules | None = None


class Notifier:
    def __init__(self, ctx: NotifierPorts, log: Records[Delivery], targets: Targets) -> None:
        self.ctx = ctx
        self.log = log
        self.targets = targets
        self.jobs: dict[str, JobRecord] = {}
        self.jobs_loaded = asyncio.Event()
        self.rng = random.Random()
        st = ctx.settings
        self.policy = RetryPolicy(max_attempts=st.notify_max_attempts, initial_seconds=st.notify_backoff,
                                  multiplier=2.0, max_delay_seconds=300.0, jitter=0.5)

    async def watch_jobs(self) -> None:
        """Skipped records keep no spec snapshot: their rules are the job's."""
        async for key, record, _ in self.ctx.jobs.watch():
            if not key:
                self.jobs_loaded.set()
            else:
                if record is None:
                    self.jobs.pop(key, None)
                else:
                    self.jobs[key] = record

    def _may_notify(self, rules: _RulesOfRun) -> bool:
        if rules.spec is not None:
            return bool(rules.spec.notify)
        record = self.jobs.get(rules.job)
        return record is not None and bool(record.spec.notify)

    def _spec(self, run: Run) -> JobSpec | None:
        if run.spec is not None:
            return run.spec
        record = self.jobs.get(run.job)
        return None if record is None else record.spec

    async def on_run(self, msg: Message) -> None:
        if value_of(msg.data, msg.headers) is None:
            return  # a delete or purge: retention, not an event
        try:
            if not self._may_notify(decode(msg.data, _RulesOfRun)):
                return  # the common case, decided without decoding the record
            run = decode(msg.data, Run)
        except msgspec.DecodeError as exc:
            raise Drop(f"undecodable run record: {exc}") from exc
        spec = self._spec(run)
        if spec is None or not spec.notify:
            return
        waits = await asyncio.gather(*(self.advance(notice, i, rule)
                                       for notice in notices(run)
                                       for i, rule in enumerate(spec.notify) if notice.event in rule.on))
        pending = [w for w in waits if w is not None]
        if pending:
            raise Retry(max(0.05, min(pending)), f"{len(pending)} notification(s) of {run.run_id} to try again")

    async def advance(self, notice: Notice, index: int, rule: NotifyRule) -> float | None:
        """Try the delivery if it is due: None once it is settled, else seconds until its next try."""
        key = delivery_key(notice.id, index)
        found = await self.log.maybe(key)
        now = self.ctx.clock.now()
        if found is None:
            record = Delivery(delivery_id=key, notice=notice, rule=index, target=describe(rule, notice.tenant),
                              state=PENDING, created_at=now, updated_at=now)
            try:
                revision = await self.log.create(key, record)
            except WriteConflict:
                return 0.5  # another replica made it a moment ago and is trying it: look again soon
        else:
            record, revision = found
        if record.state != PENDING:
            return None
        if record.next_at is not None and record.next_at > now:
            return (record.next_at - now).total_seconds()
        tried = await self.targets.send(rule, notice, key)
        if tried is None:
            return self.rng.uniform(0.5, 1.5)  # its host is busy with as many as it may have: nothing was tried
        new = after_try(record, tried, max_attempts=self.ctx.settings.notify_max_attempts, policy=self.policy,
                        rng=self.rng)
        try:
            await self.log.update(key, new, revision)
        except WriteConflict:
            return 0.5
        if new.state == DELIVERED:
            _observe_latency(rule, notice, self.ctx.clock.now())
        elif new.state == PARKED:
            self.ctx.log.warning("notification parked", delivery_id=key, target=new.target,
                                 error=tried.error, tries=len(new.attempts) - new.budget_from)
        return None if new.next_at is None else max(0.0, (new.next_at - self.ctx.clock.now()).total_seconds())

    async def on_redeliver(self, msg: Message) -> None:
        try:
            ask = decode(msg.data, Redeliver)
        except msgspec.DecodeError as exc:
            raise Drop(f"undecodable redelivery request: {exc}") from exc
        found = await self.log.maybe(ask.delivery_id)
        if found is None or found[0].notice.tenant != ask.tenant:
            raise Drop(f"no delivery {ask.delivery_id} of tenant {ask.tenant}")
        record, revision = found
        if record.state == PARKED and record.updated_at <= ask.at:
            try:
                await self.log.update(ask.delivery_id, redelivered(record, self.ctx.clock.now()), revision)
            except WriteConflict as exc:
                raise Retry(0.2, "delivery changed meanwhile") from exc
        rule = await self._rule(record)
        wait = await self.advance(record.notice, record.rule, rule)
        if wait is not None:
            raise Retry(max(0.05, wait), f"redelivery of {ask.delivery_id} to try again")

    async def _rule(self, record: Delivery) -> NotifyRule:
        try:
            run, _ = await self.ctx.runs.get(record.notice.run_id)
        except NotFound as exc:
            raise Drop(f"run {record.notice.run_id} is gone") from exc
        spec = self._spec(run)
        if spec is None or record.rule >= len(spec.notify):
            raise Drop(f"the rule of delivery {record.delivery_id} is gone")
        return spec.notify[record.rule]


def _observe_latency(rule: NotifyRule, notice: Notice, now: datetime) -> None:
    if notice.finished_at is not None:
        kind = "webhook" if rule.webhook else "subject" if rule.subject else "email"
        metrics.child(metrics.NOTIFY_LATENCY, target=kind).observe(max(0.0, (now - notice.finished_at).total_seconds()))


async def main(ctx: Context) -> None:
    log = await ctx.buckets.open(s.BUCKET_NOTIFY, Delivery)
    targets = Targets(ctx.settings, ctx.publisher, ctx.streams, ctx.clock, ctx.log)
    notifier = Notifier(ctx, log, targets)
    stop = asyncio.Event()
    watcher = background(ctx, notifier.watch_jobs())
    await notifier.jobs_loaded.wait()
    loops = [background(ctx, t) for t in (
        ctx.consumers.consume(s.kv_stream(s.BUCKET_RUNS), s.CONSUMER_NOTIFIER, notifier.on_run, batch=128,
                              concurrency=ctx.settings.notify_concurrency, stop=stop),
        ctx.consumers.consume(s.STREAM_REDELIVER, s.CONSUMER_REDELIVER, notifier.on_redeliver, batch=16,
                              concurrency=8, stop=stop))]
    ctx.ready.set()
    ctx.log.info("notifier ready")
    try:
        await ctx.stop.wait()
    finally:
        stop.set()
        watcher.cancel()
        await asyncio.gather(watcher, *loops, return_exceptions=True)
        await targets.close()

