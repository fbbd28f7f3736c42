"""Hand a run's current attempt to placement: by its record alone, or by a PlaceRun with its message id."""

from __future__ import annotations

from jetcron.bus.ports import Publisher
from jetcron.core.models import Run
from jetcron.wire import subjects as s
from jetcron.wire.messages import PlaceBy, place_run_for


async def dispatch(publisher: Publisher, run: Run, *, place_by: PlaceBy, redrive: int = 0) -> None:
    """Publish PlaceRun, unless the run's `scheduled` record, just written, is the hand-off itself (`record`: the
    placement leader follows the runs bucket). A re-drive always publishes: it is for a leader that missed the
    record (an older placement, or a watch that fell behind), and needs its own id or the server drops it."""
    if place_by == "record" and redrive == 0:
        return
    message = place_run_for(run)
    step = "place" if redrive == 0 else f"place{redrive}"
    await publisher.publish(s.place_subject(message.priority), message,
                            msg_id=s.msg_id(run.run_id, run.attempt, step))
