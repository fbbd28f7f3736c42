"""The event kinds have one table (jetcron.wire.messages.EVENT_KINDS): the run tracker turns the agent's three reports
into changes, takes every other kind the table names as the audit trail's, and drops a kind it does not name."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from jetcron.bus.consume import Drop
from jetcron.core.lifecycle.run_state import RunEvent
from jetcron.wire.codec import encode
from jetcron.wire.messages import EVENT_KINDS, RunFinished, RunHandedBack, RunStarted
from jetcron_services.run_tracker.events import Informational, change_for

AT = datetime(2026, 12, 5, 10, 0, tzinfo=UTC)
REPORTS = {
    "started": (RunStarted(run_id="r", attempt=1, token=7, agent="a1", at=AT), RunEvent.START),
    "finished": (RunFinished(run_id="r", attempt=1, token=7, agent="a1", outcome="succeeded", at=AT),
                 RunEvent.SUCCEED),
    "handed_back": (RunHandedBack(run_id="r", attempt=1, token=7, agent="a1", at=AT), RunEvent.HAND_BACK),
}


@pytest.mark.parametrize("kind", list(EVENT_KINDS))
def test_every_kind_the_table_names_is_a_report_or_for_the_audit_trail(kind: str) -> None:
    if kind not in REPORTS:
        with pytest.raises(Informational):
            change_for(kind, b"{}", "a1")
        return
    event, expected = REPORTS[kind]
    assert isinstance(event, EVENT_KINDS[kind])
    run_id, change, _ = change_for(kind, encode(event), "a1")
    assert (run_id, change.event, change.token, change.agent) == ("r", expected, 7, "a1")


def test_a_kind_the_table_does_not_name_is_dropped() -> None:
    with pytest.raises(Drop, match="unknown event kind 'exploded'"):
        change_for("exploded", b"{}", "a1")
