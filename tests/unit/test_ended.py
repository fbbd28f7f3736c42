"""The agent's memory of attempts it ended: a redelivered assignment of one is recognised, for a while."""

from __future__ import annotations

from jetcron.core.lifecycle.ended import Ended


def test_an_ended_attempt_and_older_ones_count_as_ran_but_a_newer_one_does_not() -> None:
    ended = Ended(keep=600)
    ended.add("r1", 2, now=0.0)
    assert ended.ran("r1", 2, now=1.0)
    assert ended.ran("r1", 1, now=1.0)
    assert not ended.ran("r1", 3, now=1.0)
    assert not ended.ran("r2", 1, now=1.0)


def test_an_older_attempt_ending_late_does_not_hide_a_newer_one() -> None:
    ended = Ended(keep=600)
    ended.add("r1", 3, now=0.0)
    ended.add("r1", 2, now=1.0)
    assert ended.ran("r1", 3, now=2.0)


def test_it_forgets_after_keep_seconds() -> None:
    ended = Ended(keep=10)
    ended.add("r1", 1, now=0.0)
    ended.add("r2", 1, now=5.0)
    assert ended.ran("r1", 1, now=9.9)
    assert not ended.ran("r1", 1, now=10.0)
    assert ended.ran("r2", 1, now=10.0)
    assert len(ended) == 1


def test_it_keeps_at_most_max_kept_dropping_the_oldest() -> None:
    ended = Ended(keep=600, max_kept=3)
    for i in range(5):
        ended.add(f"r{i}", 1, now=float(i))
    assert len(ended) == 3
    assert [ended.ran(f"r{i}", 1, now=5.0) for i in range(5)] == [False, False, True, True, True]


def test_ending_again_renews_its_place() -> None:
    ended = Ended(keep=10, max_kept=2)
    ended.add("r1", 1, now=0.0)
    ended.add("r2", 1, now=1.0)
    ended.add("r1", 2, now=8.0)
    ended.add("r3", 1, now=9.0)  # over the bound: r2 is now the oldest, not r1
    assert ended.ran("r1", 2, now=12.0)
    assert not ended.ran("r2", 1, now=12.0)
