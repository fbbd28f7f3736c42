"""Herd-aware staging: a crowded due second is spread back at the cluster's staging rate."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jetcron.core.timing.herds import Herds, extra_lead

MIDNIGHT = datetime(2026, 12, 1, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(("position", "extra"), [
    pytest.param(1, 0.0, id="first_job_of_a_second_uses_the_horizon"),
    pytest.param(401, 0.0, id="horizon_covers_horizon_times_rate_jobs"),
    pytest.param(402, 0.005, id="one_beyond_the_horizon_is_one_step_earlier"),
    pytest.param(100_000, 497.995, id="midnight_herd_of_100k_at_200_per_s"),
    pytest.param(1_000_000, 900.0, id="a_million_is_capped_at_max_lead"),
])
def test_extra_lead_grows_one_step_per_job_beyond_what_the_horizon_covers(position: int, extra: float) -> None:
    assert extra_lead(position, horizon=2.0, rate=200.0, max_lead=900.0) == pytest.approx(extra)


def test_positions_count_from_one() -> None:
    with pytest.raises(ValueError, match=r"position counts from 1 \(got 0\)"):
        extra_lead(0, horizon=2.0, rate=200.0, max_lead=900.0)


def test_a_rate_of_zero_is_refused() -> None:
    with pytest.raises(ValueError, match=r"rate must be positive \(got 0\)"):
        Herds(horizon=2.0, rate=0, max_lead=900.0)


def test_a_herd_is_spread_back_from_its_second_and_other_seconds_are_left_alone() -> None:
    herds = Herds(horizon=1.0, rate=10.0, max_lead=60.0)
    leads = [herds.enter(f"j{i}", MIDNIGHT) for i in range(30)]
    assert leads[:11] == [0.0] * 11  # the horizon's second covers 1 s x 10/s (positions 1..11 start at 0)
    assert leads[11:] == pytest.approx([0.1 * i for i in range(1, 20)])
    assert herds.enter("lone", MIDNIGHT + timedelta(seconds=1)) == 0.0
    assert herds.waiting(MIDNIGHT) == 30 and herds.waiting(MIDNIGHT + timedelta(milliseconds=999)) == 30


def test_a_job_counts_once_and_leaving_hands_back_its_lead() -> None:
    herds = Herds(horizon=0.0, rate=1.0, max_lead=60.0)
    assert [herds.enter(n, MIDNIGHT) for n in ("a", "b", "c")] == [0.0, 1.0, 2.0]
    # Re-entering the same second (its record changed) moves it to the back, it is not counted twice
    assert herds.enter("a", MIDNIGHT) == 2.0
    assert herds.waiting(MIDNIGHT) == 3 and len(herds) == 3
    assert herds.leave("a") == 2.0
    assert herds.leave("a") == 0.0  # already gone: nothing to hand back, nothing uncounted twice
    assert herds.waiting(MIDNIGHT) == 2
    assert herds.leave("b") == 1.0 and herds.leave("c") == 2.0
    assert herds.waiting(MIDNIGHT) == 0 and len(herds) == 0


def test_moving_to_another_second_leaves_the_first() -> None:
    herds = Herds(horizon=0.0, rate=1.0, max_lead=60.0)
    herds.enter("a", MIDNIGHT)
    herds.enter("b", MIDNIGHT)
    assert herds.enter("a", MIDNIGHT + timedelta(seconds=10)) == 0.0
    assert herds.waiting(MIDNIGHT) == 1


@given(st.lists(st.tuples(st.sampled_from("abcdefgh"), st.integers(0, 3), st.booleans()), max_size=60))
def test_counts_always_match_the_jobs_waiting(steps: list[tuple[str, int, bool]]) -> None:
    herds = Herds(horizon=0.5, rate=2.0, max_lead=5.0)
    where: dict[str, int] = {}
    for job, second, leave in steps:
        if leave:
            herds.leave(job)
            where.pop(job, None)
        else:
            lead = herds.enter(job, MIDNIGHT + timedelta(seconds=second))
            where[job] = second
            assert 0.0 <= lead <= 5.0
    for second in range(4):
        assert herds.waiting(MIDNIGHT + timedelta(seconds=second)) == sum(1 for s in where.values() if s == second)
    assert len(herds) == len(where)
