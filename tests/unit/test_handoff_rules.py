"""The direct hand-offs' rules (jetcron.core.lifecycle.handoff): a taker that let one go unanswered is skipped for
QUIET_FOR timeouts and then asked again; a finish report goes directly only while few of its agent's are in flight."""

from __future__ import annotations

from jetcron.core.lifecycle.handoff import (
    BATCH_REQUESTS,
    DIRECT_REPORTS_MOST,
    QUIET_FOR,
    Quiet,
    report_directly,
    report_requests,
)


def test_an_unanswered_taker_is_skipped_for_its_quiet_then_forgotten() -> None:
    quiet = Quiet(timeout=0.5)
    assert not quiet.skips("agent-1", 100.0)
    quiet.unanswered("agent-1", 100.0)
    assert quiet.skips("agent-1", 100.0 + 0.5 * QUIET_FOR - 0.01)
    assert not quiet.skips("agent-2", 100.0)  # each taker alone
    assert not quiet.skips("agent-1", 100.0 + 0.5 * QUIET_FOR)
    assert quiet.until == {}


def test_a_report_goes_directly_only_while_few_are_in_flight() -> None:
    assert report_directly(1)
    assert report_directly(DIRECT_REPORTS_MOST)
    assert not report_directly(DIRECT_REPORTS_MOST + 1)
    assert report_directly(DIRECT_REPORTS_MOST * 10, batch=32)  # several to a request: always directly


def test_an_agent_has_a_few_batches_out_or_as_many_single_reports_as_may_go_directly() -> None:
    assert report_requests(32) == BATCH_REQUESTS == 2
    assert report_requests(1) == DIRECT_REPORTS_MOST
