"""Run ids: one id per occurrence, the same from every trigger, in UTC to the millisecond."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from hypothesis import given
from hypothesis import strategies as st

from jetcron.core.ids import job_of, run_id


def test_a_run_id_names_its_job_and_its_nominal_time_in_utc() -> None:
    at = datetime(2026, 12, 4, 18, 11, 12, 345678, tzinfo=UTC)
    assert run_id("acme.nightly", at) == "acme.nightly.20261204T181112345Z"
    assert run_id("acme.nightly", at.astimezone(ZoneInfo("Asia/Kolkata"))) == "acme.nightly.20261204T181112345Z"
    assert run_id("j", datetime(2027, 1, 2, 3, 4, 5, 999, tzinfo=timezone(timedelta(hours=-7)))) == \
        "j.20270102T100405000Z"
    assert job_of(run_id("acme.nightly", at)) == "acme.nightly"


@given(st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(9999, 12, 30),
                    timezones=st.sampled_from([UTC, ZoneInfo("Europe/Berlin"), ZoneInfo("America/St_Johns")])))
def test_the_stamp_reads_as_strftime_writes_it(at: datetime) -> None:
    utc = at.astimezone(UTC)
    assert run_id("job", at) == f"job.{utc:%Y%m%dT%H%M%S}{utc.microsecond // 1000:03d}Z"
