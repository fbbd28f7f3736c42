"""A run blocked by its join's wait timeout tells its owner, once, against the real services: the tracker blocks the
run that waited too long and the notifier delivers the `blocked` notice to the job's target. A block caused by an
upstream's failure is told in test_notifications.py; the block itself is checked in test_flow_joins.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
from harness import Services, wait_for
from test_flow_joins import FAR, _job, _runs
from test_notifications import _deliveries, start

from bench.webhook import Receiver
from jetcron.core.lifecycle.notify import Notice
from jetcron.sdk.client import Client


async def test_a_run_blocked_by_its_wait_timeout_notifies_its_owner_once(
        secure_services: Services, admin: Client, receiver: Receiver) -> None:
    await start(secure_services)
    # Given an upstream that does not run during the test, and a downstream joined on its latest success that comes
    # due once (an `at` schedule: one occurrence, so one blocked run), waits at most 2 s, and asks to hear of blocks
    # and of nothing else
    at = (datetime.now(UTC) + timedelta(seconds=2)).isoformat()
    await admin.call("jobs.create", _job("never", {"kind": "at", "at": FAR}))
    await admin.call("jobs.create", _job("after", {"kind": "at", "at": at}, depends_on=["never"], join="latest",
                                         wait_timeout_seconds=2, notify=[
                                             {"on": ["blocked"], "webhook": receiver.url("/after")}]))

    # When its occurrence has waited 2 s, the tracker blocks it
    async def blocked() -> dict[str, Any] | None:
        return next((r for r in await _runs(admin, "after") if r["state"] == "blocked"), None)

    run = await wait_for(blocked, 30, what="the waiting run to be blocked")
    reason = ("wait timeout: upstream jobs did not allow it within 2 s (waiting on upstream jobs: never (no success "
              "since this job last ran))")
    assert run["reason"] == reason

    # Then the job's webhook gets one `blocked` notice naming the run, the job and the timeout
    (told,) = await wait_for(lambda: receiver.events("blocked"), 30, what="the blocked notification")
    notice = msgspec.json.decode(told.body, type=Notice)
    assert (notice.event, notice.tenant, notice.job, notice.run_id, notice.state, notice.reason) == (
        "blocked", "default", "after", run["run_id"], "blocked", reason)
    assert notice.id == f"{run['run_id']}.blocked-0" and told.headers["jetcron-delivery"] == f"{notice.id}-0"
    assert told.path == "/after" and notice.started_at is None and notice.exit_code is None
    # and its delivery is logged once, delivered at the first try; nothing else reached the receiver
    (delivery,) = await wait_for(lambda: _deliveries(admin, "after", "delivered"), 10, what="the delivery logged")
    assert delivery["delivery_id"] == f"{notice.id}-0" and [a["ok"] for a in delivery["attempts"]] == [True]
    assert len(await _deliveries(admin, "after")) == 1 and len(receiver.received) == 1
    # and it was the only run of the job: one occurrence, blocked once
    assert [r["run_id"] for r in await _runs(admin, "after")] == [run["run_id"]]
