"""The long-life bench's ledger finds what it is there to find: an occurrence never finished, and one finished
twice (a record that aged out and was made again), and nothing else; and a `--stall` it cannot make is refused
by name."""

from __future__ import annotations

import argparse
import calendar

import pytest

from bench.longlife import _stall_arg
from bench.longlife_ledger import Ledger, stamp_ms

ANCHOR = calendar.timegm((2026, 3, 1, 23, 59, 58)) * 1000 + 250  # crosses midnight two seconds in


def _id(job: str, k: int, ledger: Ledger) -> str:
    return ledger.name(job, k)


def test_a_run_id_names_its_occurrence_to_the_millisecond() -> None:
    assert stamp_ms("20260301T235958250Z") == ANCHOR
    assert stamp_ms("20260302T000001250Z") == ANCHOR + 3000
    assert stamp_ms("20260301T235958250Z-mabc") is None
    ledger = Ledger({"a": ANCHOR})
    assert ledger.name("a", 3) == "a.20260302T000001250Z"


def test_every_occurrence_finished_once_is_clean() -> None:
    ledger = Ledger({"a": ANCHOR, "b": ANCHOR + 500})
    for job in ("a", "b"):
        for k in range(5):
            ledger.write(_id(job, k, ledger), "scheduled")
            ledger.write(_id(job, k, ledger), "succeeded")
    verdict = ledger.judge(ANCHOR + 4000)
    assert (verdict.occurrences, verdict.finished, verdict.lost, verdict.recorded_twice) == (10, 10, 0, 0)
    assert ledger.states == {"succeeded": 10}


def test_a_gap_is_lost_and_a_second_finish_is_counted_twice() -> None:
    ledger = Ledger({"a": ANCHOR})
    for k in (0, 1, 3):  # occurrence 2 never written
        ledger.write(_id("a", k, ledger), "succeeded")
    ledger.write(_id("a", 1, ledger), "scheduled")  # made again after it finished (aged out, fired again)
    ledger.write(_id("a", 1, ledger), "succeeded")
    verdict = ledger.judge(ANCHOR + 3000)
    assert (verdict.occurrences, verdict.lost, verdict.recorded_twice, verdict.revived) == (4, 1, 1, 1)
    assert verdict.lost_examples == ["a.20260302T000000250Z"]
    assert verdict.twice_examples == ["a.20260301T235959250Z"]


def test_occurrences_due_after_the_settle_line_or_the_stop_are_not_owed() -> None:
    ledger = Ledger({"a": ANCHOR})
    ledger.write(_id("a", 0, ledger), "succeeded")
    ledger.write(_id("a", 1, ledger), "running")  # recorded ahead, still running
    assert ledger.judge(ANCHOR + 500, written=False).lost == 0
    assert ledger.judge(ANCHOR + 500).lost == 1  # at the end, whatever was recorded must have finished
    assert ledger.judge(ANCHOR + 10_000, {"a": ANCHOR + 500}, written=False).occurrences == 1
    assert ledger.judge(ANCHOR + 10_000, written=False).lost == 10


def test_writes_outside_the_ledger_are_counted_apart() -> None:
    ledger = Ledger({"a": ANCHOR})
    ledger.write("other." + _id("a", 0, ledger).split(".", 1)[1], "succeeded")
    ledger.write(_id("a", 0, ledger) + "-r1", "succeeded")
    ledger.write("a.20260301T235958251Z", "succeeded")  # a millisecond off the period
    ledger.removed(_id("a", 0, ledger))
    assert (ledger.foreign, ledger.off_grid, ledger.removals, ledger.terminal_writes) == (1, 2, 1, 0)


@pytest.mark.parametrize(("text", "error"), [
    ("placement:x:1", "--stall 'placement:x:1': AT and SECONDS are seconds (numbers)"),
    ("nope:1:2", "--stall 'nope:1:2': give SERVICE:AT:SECONDS, SERVICE one of api, trigger, placement"),
    ("placement:1", "--stall 'placement:1': give SERVICE:AT:SECONDS"),
])
def test_a_stall_the_bench_cannot_make_is_refused_by_name(text: str, error: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as refused:
        _stall_arg(text)
    assert str(refused.value).startswith(error)


def test_a_stall_names_its_service_and_seconds() -> None:
    assert _stall_arg("placement:240:90") == ("placement", 240.0, 90.0)
