"""The direct hand-offs' rules (core/handoff.py): a taker that let one go unanswered is skipped for QUIET_FOR
timeouts and then asked again; a finish report goes directly only while few of its agent's are in flight."""

from __future__ import annotations

from jetcron.core.handoff import DIRECT_REPORTS_MOST, QUIET_FOR, Quiet, report_directly


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
