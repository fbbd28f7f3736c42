"""Hand a run's current attempt to placement again: its `scheduled` record is the hand-off, and a re-drive is the
PlaceRun for a leader that missed it."""

from __future__ import annotations

from jetcron.bus.ports import Publisher
from jetcron.core.models import Run
from jetcron.wire import subjects as s
from jetcron.wire.messages import place_run_for


async def redrive(publisher: Publisher, run: Run, times: int) -> None:
    """Publish PlaceRun for a run left `scheduled` past its due time (a placement watch that fell behind). Each
    re-drive of an attempt needs its own message id, `times` counting from 1, or the server drops it as a duplicate
    of the last."""
    message = place_run_for(run)
    await publisher.publish(s.place_subject(message.priority), message,
                            msg_id=s.msg_id(run.run_id, run.attempt, f"place{times}"))
