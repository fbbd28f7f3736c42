"""A run dead-lettered: its record goes to the job's dead-letter subject, where `dlq list` and replay find it."""

from __future__ import annotations

from jetcron.core.models import Run, RunState
from jetcron.wire import subjects as s
from jetcron.wire.codec import encode
from jetcron.wire.messages import DeadLettered
from jetcron_services.run_tracker.ports import DeadLettersPorts


class DeadLetters:
    def __init__(self, ctx: DeadLettersPorts) -> None:
        self.ctx = ctx

    async def changed(self, old: Run, new: Run) -> None:
        if new.state is RunState.DEAD:
            # Its message id makes a write applied again publish nothing new.
            await self.ctx.publisher.publish(s.dlq_subject(new.job), DeadLettered(
                run_id=new.run_id, job=new.job, reason=new.reason, run=encode(new), at=self.ctx.clock.now()),
                msg_id=s.msg_id(new.run_id, new.attempt, "dlq"))
