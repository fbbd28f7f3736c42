"""Hand a run's current attempt to placement: the one publish of PlaceRun, with its message id."""

from __future__ import annotations

from jetcron.bus.ports import Publisher
from jetcron.core.models import Run
from jetcron.wire import subjects as s
from jetcron.wire.messages import place_run_for


async def dispatch(publisher: Publisher, run: Run, *, redrive: int = 0) -> None:
    """Publish PlaceRun; a re-drive of the same attempt needs its own id or the server drops it."""
    message = place_run_for(run)
    step = "place" if redrive == 0 else f"place{redrive}"
    await publisher.publish(s.place_subject(message.priority), message,
                            msg_id=s.msg_id(run.run_id, run.attempt, step))
