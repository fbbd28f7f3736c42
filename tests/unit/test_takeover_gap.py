"""The takeover gap (jetcron.core.lifecycle.takeover): from the previous holder's last action to the new holder's first,
clamped, and measured only from a stamp that can be the previous holder's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jetcron.core.lifecycle.takeover import (
    MAX_GAP,
    Sighting,
    forget_departed,
    fresh,
    gap,
    last_of_departed,
    previous_action,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
TTL = 5.0


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_the_gap_is_the_time_between_the_two_actions() -> None:
    assert gap(at(0), at(7.25)) == pytest.approx(7.25)


def test_a_new_holder_whose_clock_runs_behind_reports_no_negative_gap() -> None:
    assert gap(at(10), at(9.4)) == 0.0


def test_an_absurd_gap_is_clamped_to_an_hour() -> None:
    assert gap(at(0), at(86400 * 365)) == MAX_GAP


def test_a_sighting_is_fresh_within_two_ttls_and_a_second() -> None:
    seen = Sighting(at(0), seen_at=100.0)
    assert fresh(seen, 100.0 + 2 * TTL + 1.0, TTL)
    assert not fresh(seen, 100.0 + 2 * TTL + 1.5, TTL)


def test_the_release_marker_written_over_comes_first() -> None:
    seen = Sighting(at(0), seen_at=100.0)
    assert previous_action(at(3), seen, 101.0, TTL) == at(3)


def test_a_lapsed_lease_is_measured_from_the_last_fresh_sighting() -> None:
    assert previous_action(None, Sighting(at(2), seen_at=100.0), 106.0, TTL) == at(2)


@pytest.mark.parametrize("sighting", [None, Sighting(None, seen_at=100.0), Sighting(at(2), seen_at=80.0)],
                         ids=["never seen", "holder stamped nothing", "seen too long ago"])
def test_otherwise_the_previous_action_is_unknown(sighting: Sighting | None) -> None:
    assert previous_action(None, sighting, 106.0, TTL) is None


def test_a_shard_found_free_belongs_to_the_peer_that_just_left() -> None:
    seen = {"trigger.member.a": Sighting(at(1), 100.0), "trigger.member.c": Sighting(at(1.5), 100.0)}
    assert last_of_departed(seen, {"trigger.member.b", "trigger.member.c"}, 101.0, 2.0) == at(1)


def test_when_several_left_at_once_the_latest_stamp_is_taken() -> None:
    seen = {"trigger.member.a": Sighting(at(1), 100.0), "trigger.member.c": Sighting(at(1.5), 100.0)}
    assert last_of_departed(seen, {"trigger.member.b"}, 101.0, 2.0) == at(1.5)


def test_no_peer_left_recently_means_no_known_previous_holder() -> None:
    seen = {"trigger.member.a": Sighting(at(1), 100.0), "trigger.member.c": Sighting(at(1.5), 90.0)}
    assert last_of_departed(seen, {"trigger.member.a", "trigger.member.b"}, 101.0, 2.0) is None


def test_peers_gone_for_longer_than_a_sighting_stays_fresh_are_forgotten() -> None:
    seen = {"trigger.member.a": Sighting(at(1), 100.0), "trigger.member.c": Sighting(at(1.5), 90.0),
            "trigger.member.d": Sighting(at(1.5), 90.0)}
    forget_departed(seen, {"trigger.member.d"}, 101.0, 2.0)
    assert set(seen) == {"trigger.member.a", "trigger.member.d"}
