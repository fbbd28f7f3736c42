"""A job's view of the host, decided without a host (jetcron.core.host.job_view, jetcron.core.host.uid_pool): who it
runs as, the path it is told for its scratch, a private /tmp or not, the file size bound, the data dir's mode, the uid
it is given."""

from __future__ import annotations

import pytest

from jetcron.core.host.job_view import PRIVATE_TMP, data_dir_mode, first_blocked, plan
from jetcron.core.host.uid_pool import UidPool, parse_uid_range, usable_uids

NOBODY = (65534, 65534)
SCRATCH = "/srv/jetcron/scratch/agent-1/3f2a"


def test_a_job_switched_to_another_user_is_shown_its_scratch_as_its_private_tmp() -> None:
    view = plan(switch=NOBODY, own_uid=False, private_tmp_ok=True, max_file_mb=2)
    assert (view.user, view.private_tmp, view.max_file_bytes) == (NOBODY, True, 2 * 1024 * 1024)
    assert view.shown(SCRATCH) == PRIVATE_TMP == "/tmp"
    assert view.env(SCRATCH, {}) == {"TMPDIR": "/tmp", "JETCRON_SCRATCH": "/tmp"}  # HOME stays the user's


def test_without_a_private_tmp_the_job_is_told_the_scratchs_own_path() -> None:
    view = plan(switch=NOBODY, own_uid=False, private_tmp_ok=False, max_file_mb=0)
    assert (view.private_tmp, view.max_file_bytes) == (False, None)
    assert view.env(SCRATCH, {}) == {"TMPDIR": SCRATCH, "JETCRON_SCRATCH": SCRATCH}


@pytest.mark.parametrize("own_uid", [False, True])
def test_a_job_that_stays_the_agents_user_keeps_the_agents_view(own_uid: bool) -> None:
    # (an unprivileged agent, @agent, or a job allowed root): it could read all the agent can anyway
    view = plan(switch=None, own_uid=own_uid, private_tmp_ok=True, max_file_mb=1)
    assert (view.user, view.private_tmp, view.own_uid) == (None, False, False)
    assert view.shown(SCRATCH) == SCRATCH


def test_a_uid_of_its_own_replaces_the_job_user_and_makes_its_scratch_its_home() -> None:
    view = plan(switch=NOBODY, own_uid=True, private_tmp_ok=True, max_file_mb=1).with_uid(60600)
    assert (view.user, view.own_uid) == ((60600, 60600), True)
    assert view.env(SCRATCH, {}) == {"TMPDIR": "/tmp", "HOME": "/tmp", "JETCRON_SCRATCH": "/tmp"}


def test_the_jobs_own_tmpdir_and_home_win_but_never_over_jetcron_scratch() -> None:
    view = plan(switch=NOBODY, own_uid=True, private_tmp_ok=False, max_file_mb=1).with_uid(60600)
    assert view.env(SCRATCH, {"TMPDIR": "/big", "HOME": "/home/x"}) == {"JETCRON_SCRATCH": SCRATCH}


@pytest.mark.parametrize(("current", "traverse", "expected"), [
    (0o755, False, 0o700), (0o755, True, 0o711), (0o700, True, 0o711), (0o2775, False, 0o700), (0o711, False, 0o700),
])
def test_the_data_dir_is_never_readable_by_others_and_searchable_only_when_a_job_must_pass(
        current: int, traverse: bool, expected: int) -> None:
    assert data_dir_mode(current, traverse=traverse) == expected


def test_the_first_folder_a_user_may_not_search_is_named() -> None:
    chain = [("/", 0o755, 0, 0), ("/srv", 0o750, 0, 50), ("/srv/jetcron", 0o711, 0, 0)]
    assert first_blocked(chain, 65534, 65534) == "/srv"
    assert first_blocked(chain, 65534, 50) is None  # its group may
    assert first_blocked([("/", 0o755, 0, 0), ("/home/u", 0o700, 1000, 1000)], 1000, 1000) is None  # its own
    assert first_blocked([("/root", 0o700, 0, 0)], 0, 0) is None  # root searches anything


@pytest.mark.parametrize(("text", "expected"), [
    ("", range(0)), ("  ", range(0)), ("60578-61183", range(60578, 61184)), ("7-7", range(7, 8)),
])
def test_a_uid_range_is_first_to_last_inclusive(text: str, expected: range) -> None:
    assert parse_uid_range(text) == expected


@pytest.mark.parametrize("text", ["60000", "61183-60578", "0-10", "a-b", "1-4294967295", "-5-10"])
def test_a_malformed_uid_range_is_refused_naming_the_setting(text: str) -> None:
    with pytest.raises(ValueError, match=r"JETCRON_AGENT_JOB_UIDS=.*FIRST-LAST"):
        parse_uid_range(text)


def test_a_uid_or_gid_a_named_user_or_group_has_is_never_given_out() -> None:
    assert usable_uids(range(100, 106), named_users={101}, named_groups={104}) == [100, 102, 103, 105]


def test_the_pool_gives_the_uid_returned_longest_ago_first() -> None:
    pool = UidPool([1, 2, 3])
    assert pool.candidates() == [1, 2, 3] and len(pool) == 3
    pool.claim(1)
    pool.claim(3)  # another agent held 2: the caller skipped it
    assert pool.candidates() == [2] and pool.in_use == {1, 3}
    pool.release(1)
    pool.release(3)
    assert pool.candidates() == [2, 1, 3]  # a returned uid comes back last
    pool.release(3)  # twice: no effect
    assert pool.candidates() == [2, 1, 3] and len(pool) == 3
