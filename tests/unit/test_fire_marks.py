"""A shard's fire mark never passes a `now` job whose occurrence is still to be recorded
(jetcron.core.timing.fire_marks)."""

from __future__ import annotations

from jetcron.core.timing.fire_marks import FireMarks, mark_key, mark_shard


def test_a_mark_key_names_its_shard_and_no_job_key_is_one() -> None:
    assert mark_key(7) == "_fired.7"
    assert mark_shard(mark_key(7)) == 7
    assert mark_shard("default.nightly") is None
    assert mark_shard("_fired.x") is None


def _three_open(shard: int) -> FireMarks:
    """Marks that know of jobs a, b and c of `shard`, open at revisions 3, 5 and 9."""
    marks = FireMarks()
    for revision, name in ((3, "a"), (5, "b"), (9, "c")):
        marks.delivered(revision)
        marks.opened(shard, name, revision)
    return marks


def test_the_mark_stays_below_the_oldest_open_job_and_moves_on_once_it_fired() -> None:
    marks = _three_open(0)
    assert marks.advance(0) is None  # nothing has fired: nothing to write
    marks.closed(0, "b", 5)  # fired out of order: a is still open
    assert marks.advance(0) == 2
    marks.noted(0, 2)
    assert marks.advance(0) is None
    marks.closed(0, "a", 3)
    assert marks.advance(0) == 8
    marks.closed(0, "c", 9)
    assert marks.advance(0) == 9


def test_the_mark_goes_up_to_what_the_watch_delivered_and_no_shard_without_a_fire_is_written() -> None:
    marks = FireMarks()
    marks.delivered(4)
    marks.opened(1, "a", 4)
    marks.delivered(6)  # a job of another shard, or one the mark does not judge
    assert marks.advance(1) is None and marks.advance(2) is None
    marks.closed(1, "a", 4)
    assert marks.advance(1) == 6
    marks.noted(1, 6)
    marks.delivered(9)
    assert marks.advance(1) is None  # the watch moved on, but nothing more fired there


def test_a_fire_of_an_older_revision_leaves_the_newer_one_open() -> None:
    marks = FireMarks()
    marks.delivered(3)
    marks.opened(0, "a", 3)
    marks.delivered(7)
    marks.opened(0, "a", 7)  # changed while it fired
    marks.closed(0, "a", 3)
    assert marks.advance(0) is None  # still open at 7: nothing closed
    marks.closed(0, "a")  # gone (deleted, or no longer judged by the mark)
    assert marks.advance(0) == 7


def test_a_mark_read_lets_go_of_the_jobs_it_covers_and_never_goes_back() -> None:
    marks = _three_open(2)
    assert sorted(marks.noted(2, 5)) == ["a", "b"]
    assert marks.fired(2, 5) and not marks.fired(2, 6) and not marks.fired(3, 1)
    assert marks.noted(2, 4) == []  # an older mark (a replica that held the shard before) changes nothing
    assert marks.fired(2, 5)
    marks.closed(2, "c", 9)
    assert marks.advance(2) == 9


def test_each_shard_has_a_mark_of_its_own() -> None:
    marks = FireMarks()
    marks.delivered(10)
    marks.opened(0, "a", 4)
    marks.opened(0, "b", 6)
    marks.opened(3, "c", 8)
    marks.closed(0, "b", 6)
    marks.closed(3, "c", 8)
    assert (marks.advance(0), marks.advance(3)) == (3, 10)
