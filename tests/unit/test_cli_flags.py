"""`jobs create` and `jobs update` flags: what a flag names changes, everything else is kept."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from jetcron.cli.job_flags import JobFlags, apply_flags, new_spec
from jetcron.cli.parse import instant
from jetcron.core.errors import InvalidSpec

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
NIGHTLY: dict[str, Any] = {
    "name": "nightly", "command": ["./backup.sh"],
    "schedule": {"kind": "cron", "cron": "30 1 * * *", "tz": "America/New_York", "on_gap": "skip",
                 "on_fold": "last", "at": None, "every_seconds": None, "anchor": None},
    "resources": {"cpu": 2.0, "memory_mb": 512, "gpus": 0},
    "retry": {"max_attempts": 5, "initial_seconds": 1.0, "multiplier": 2.0},
    "misfire": {"kind": "latest", "catchup_window_seconds": 3600.0, "max_catchup": 10},
    "env": {"A": "1"}, "overlap": "skip", "tenant": "ops",
}
TICK: dict[str, Any] = {"name": "tick", "command": ["true"],
                        "schedule": {"kind": "every", "every_seconds": 300.0, "anchor": "2026-01-01T00:00:07+00:00",
                                     "tz": "UTC"}}


def changed(spec: dict[str, Any], **flags: Any) -> dict[str, Any]:
    """The fields of `spec` that `jobs update` with these flags changes: {field: new value}. (The stored spec's
    null schedule fields are dropped on the way: not a change.)"""
    out = apply_flags(spec, JobFlags(**flags), NOW)
    before = {**spec, "schedule": {k: v for k, v in spec["schedule"].items() if v is not None}}
    return {k: v for k, v in out.items() if before.get(k) != v}


@pytest.mark.parametrize(("spec", "flags", "expected"), [
    pytest.param(NIGHTLY, {"timeout": 60.0}, {"timeout_seconds": 60.0}, id="one_field"),
    pytest.param(NIGHTLY, {"max_attempts": 2},
                 {"retry": {"max_attempts": 2, "initial_seconds": 1.0, "multiplier": 2.0}},
                 id="retry_keeps_its_other_fields"),
    pytest.param(NIGHTLY, {"memory": 1024}, {"resources": {"cpu": 2.0, "memory_mb": 1024, "gpus": 0}},
                 id="resources_keep_their_other_fields"),
    pytest.param(NIGHTLY, {"misfire": "all"},
                 {"misfire": {"kind": "all", "catchup_window_seconds": 3600.0, "max_catchup": 10}},
                 id="misfire_kind_keeps_its_window"),
    pytest.param(NIGHTLY, {"tz": "Europe/Berlin"},
                 {"schedule": {"kind": "cron", "cron": "30 1 * * *", "tz": "Europe/Berlin", "on_gap": "skip",
                               "on_fold": "last"}},
                 id="zone_alone_keeps_the_cron"),
    pytest.param(NIGHTLY, {"every": "5m"},
                 {"schedule": {"kind": "every", "every_seconds": 300.0, "tz": "America/New_York", "on_gap": "skip",
                               "on_fold": "last"}},
                 id="cron_to_every_keeps_zone_and_dst_policies"),
    pytest.param(TICK, {"every": "10m"},
                 {"schedule": {"kind": "every", "every_seconds": 600.0, "anchor": "2026-01-01T00:00:07+00:00",
                               "tz": "UTC"}},
                 id="new_interval_keeps_the_phase"),
    pytest.param(TICK, {"cron": "0 * * * *"}, {"schedule": {"kind": "cron", "cron": "0 * * * *", "tz": "UTC"}},
                 id="every_to_cron_drops_the_anchor"),
    pytest.param(TICK, {"at": "+1h"}, {"schedule": {"kind": "at", "at": "2026-12-02T13:00:00+00:00", "tz": "UTC"}},
                 id="to_a_one_off"),
    pytest.param(NIGHTLY, {"env": ["B=2"], "require": ["zone=eu"], "depends_on": ["extract"]},
                 {"env": {"B": "2"}, "require": {"zone": "eu"}, "depends_on": ["extract"]},
                 id="maps_and_lists_are_replaced"),
])
def test_update_flags_change_only_what_they_name(spec: dict[str, Any], flags: dict[str, Any],
                                                 expected: dict[str, Any]) -> None:
    assert changed(spec, **flags) == expected


def test_no_flag_changes_nothing_and_keeps_the_schedule() -> None:
    # A command-only update (`jobs update nightly -- ./backup.sh --full`) applies no flag: the cron job stays a
    # cron job in its zone (it used to become a `now` job in UTC).
    out = apply_flags(NIGHTLY, JobFlags(), NOW)
    assert out["schedule"] == {"kind": "cron", "cron": "30 1 * * *", "tz": "America/New_York", "on_gap": "skip",
                               "on_fold": "last"}
    assert {k: v for k, v in out.items() if k != "schedule"} == {k: v for k, v in NIGHTLY.items() if k != "schedule"}


def test_a_new_job_runs_now_in_utc_unless_told_otherwise() -> None:
    assert new_spec("hello", ["echo", "hi"], JobFlags(), NOW) == {
        "name": "hello", "command": ["echo", "hi"], "schedule": {"kind": "now", "tz": "UTC"}}
    assert new_spec("n", ["x"], JobFlags(cron="30 1 * * *", tz="America/New_York", on_fold="both"), NOW)[
        "schedule"] == {"kind": "cron", "cron": "30 1 * * *", "tz": "America/New_York", "on_fold": "both"}


@pytest.mark.parametrize(("flags", "match"), [
    pytest.param({"every": "5m", "cron": "* * * * *"}, r"^schedule: give at most one of them",
                 id="two_schedule_kinds"),
    pytest.param({"every": "soon"}, r"^schedule\.every_seconds: is not a duration .*\(got 'soon'\)",
                 id="bad_duration"),
    pytest.param({"env": ["NOVALUE"]}, r"^env: must be NAME=VALUE \(got 'NOVALUE'\)", id="env_without_value"),
    pytest.param({"at": "9999-12-31T23:59:59-01:00"},
                 r"^schedule\.at: must lie between the years 2000 and 2200 \(got '9999-12-31T23:59:59-01:00'\)",
                 id="at_past_the_last_utc_datetime"),
    pytest.param({"at": "+100000000000d"}, r"^schedule\.at: must lie between the years 2000 and 2200",
                 id="at_relative_overflow"),
    pytest.param({"backoff_initial": "-1s"}, r"^retry\.initial_seconds: is not a duration", id="negative_backoff"),
])
def test_bad_flags_are_refused_naming_the_field_and_value(flags: dict[str, Any], match: str) -> None:
    with pytest.raises(InvalidSpec, match=match):
        apply_flags({}, JobFlags(**flags), NOW)


@pytest.mark.parametrize(("text", "expected"), [
    pytest.param("now", NOW, id="now"),
    pytest.param("+90s", datetime(2026, 12, 2, 12, 1, 30, tzinfo=UTC), id="relative"),
    pytest.param("2026-12-02T09:00:00-05:00", datetime(2026, 12, 2, 14, 0, tzinfo=UTC), id="offset_to_utc"),
])
def test_instants(text: str, expected: datetime) -> None:
    assert instant(text, NOW) == expected


def test_notify_flags_make_one_rule_and_deadlines_take_durations() -> None:
    flags = JobFlags(notify_on="dead, start_missed", webhook="https://hooks.example.com/x", webhook_secret="KEY",
                     start_deadline="5m", finish_deadline="1h")
    spec = apply_flags({"name": "n", "command": ["true"], "notify": [{"on": ["failed"], "email": "a@b.c"}]}, flags,
                       datetime(2026, 1, 1, tzinfo=UTC))
    assert spec["notify"] == [{"on": ["dead", "start_missed"], "webhook": "https://hooks.example.com/x",
                               "secret": "KEY"}]
    assert (spec["start_deadline_seconds"], spec["finish_deadline_seconds"]) == (300.0, 3600.0)


@pytest.mark.parametrize(("flags", "match"), [
    ({"webhook": "https://example.com"}, "notify.on: --notify-on EVENT"),
    ({"notify_on": "dead"}, "give exactly one of --webhook"),
    ({"notify_on": "dead", "webhook": "https://e.com", "notify_email": "a@b.c"}, "give exactly one of --webhook"),
    ({"start_deadline": "soon"}, "start_deadline_seconds"),
])
def test_bad_notify_flags_are_refused(flags: dict[str, Any], match: str) -> None:
    with pytest.raises(InvalidSpec, match=match):
        apply_flags({"name": "n", "command": ["true"]}, JobFlags(**flags), datetime(2026, 1, 1, tzinfo=UTC))


def test_history_flags_set_the_jobs_retention_and_update_only_what_they_name() -> None:
    made = new_spec("n", ["true"], JobFlags(keep="7d", keep_succeeded=3), NOW)
    assert made["history"] == {"keep_seconds": 7 * 86400, "keep_succeeded": 3}
    changed = apply_flags(made, JobFlags(keep_failed=1), NOW)
    assert changed["history"] == {"keep_seconds": 7 * 86400, "keep_succeeded": 3, "keep_failed": 1}
    assert "history" not in new_spec("n", ["true"], JobFlags(), NOW)
    with pytest.raises(InvalidSpec, match=r"history\.keep_seconds"):
        new_spec("n", ["true"], JobFlags(keep="forever"), NOW)
