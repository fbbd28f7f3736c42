"""The uid range `jetcron up` gives its local agents (libs/jetcron/cli/up.py local_job_uids,
jetcron.core.host.uid_pool.local_range): run as root with no range set, each attempt gets a uid of its own from a range
no user or group of the host reaches into, so that one tenant's job cannot read another's running scratch or environment
through /proc."""

from __future__ import annotations

from jetcron.cli.up import local_job_uids
from jetcron.core.host.uid_pool import LOCAL_RANGES, format_uid_range, local_range, parse_uid_range

HOST_USERS = {0, 1, 100, 1000, 65534}
HOST_GROUPS = {0, 4, 100, 1000, 65534}


def test_local_ranges_are_the_ones_systemd_leaves_unused_and_spell_back_as_the_setting_does() -> None:
    assert [format_uid_range(r) for r in LOCAL_RANGES] == ["60578-61183", "65536-99999"]
    assert all(parse_uid_range(format_uid_range(r)) == r for r in LOCAL_RANGES)


def test_the_first_range_no_user_or_group_reaches_into_with_room_for_every_slot_is_chosen() -> None:
    assert local_range(128, HOST_USERS, HOST_GROUPS) == range(60578, 61184)
    # a group (or a user) anywhere in the first range: the whole range is somebody's, the next is taken
    assert local_range(128, HOST_USERS, {*HOST_GROUPS, 61183}) == range(65536, 100000)
    assert local_range(128, {*HOST_USERS, 60578}, HOST_GROUPS) == range(65536, 100000)
    # more slots at once than the first holds (606 uids)
    assert local_range(607, HOST_USERS, HOST_GROUPS) == range(65536, 100000)
    assert local_range(606, HOST_USERS, HOST_GROUPS) == range(60578, 61184)
    # none fits
    assert local_range(128, {60600, 70000}, HOST_GROUPS) is None
    assert local_range(34465, HOST_USERS, HOST_GROUPS) is None


def test_up_as_root_with_no_range_set_gives_its_agents_one_and_says_how_to_change_or_drop_it() -> None:
    env, said = local_job_uids(0, {}, 2, HOST_USERS, HOST_GROUPS)
    assert env == {"JETCRON_AGENT_JOB_UIDS": "60578-61183"}
    assert said == ("each job runs as a uid of its own from 60578-61183 (no user or group of this host has one), so "
                    "no running job reads another's scratch or environment; JETCRON_AGENT_JOB_UIDS=FIRST-LAST picks "
                    "another range, JETCRON_AGENT_JOB_UIDS= (empty) runs every job as one user")


def test_the_range_holds_every_slot_of_every_agent_at_once() -> None:
    # 10 agents of 64 slots (the default) need 640 uids: more than the first range has
    assert local_job_uids(0, {}, 10, HOST_USERS, HOST_GROUPS)[0] == {"JETCRON_AGENT_JOB_UIDS": "65536-99999"}
    assert local_job_uids(0, {"JETCRON_AGENT_SLOTS": "8"}, 10, HOST_USERS, HOST_GROUPS)[0] == {
        "JETCRON_AGENT_JOB_UIDS": "60578-61183"}
    # a malformed slot count is the agent's to refuse; up counts the default
    assert local_job_uids(0, {"JETCRON_AGENT_SLOTS": "x"}, 10, HOST_USERS, HOST_GROUPS)[0] == {
        "JETCRON_AGENT_JOB_UIDS": "65536-99999"}


def test_a_set_range_even_empty_a_non_root_up_and_jobs_run_as_the_agent_get_none() -> None:
    for euid, environ, agents in ((0, {"JETCRON_AGENT_JOB_UIDS": ""}, 2),
                                  (0, {"JETCRON_AGENT_JOB_UIDS": "70000-70999"}, 2),
                                  (1000, {}, 2),
                                  (0, {"JETCRON_AGENT_JOB_USER": "@agent"}, 2),
                                  (0, {}, 0)):
        assert local_job_uids(euid, environ, agents, HOST_USERS, HOST_GROUPS) == ({}, None), (euid, environ, agents)


def test_with_no_free_range_up_says_that_jobs_share_a_user_and_what_to_set() -> None:
    env, said = local_job_uids(0, {"JETCRON_AGENT_JOB_USER": "jobs"}, 2, {60600, 70000}, HOST_GROUPS)
    assert env == {}
    assert said == ("every job runs as jobs, so a running job can read another's scratch and environment: no uid "
                    "range free of this host's users and groups (60578-61183, 65536-99999) holds 2 agents x 64 "
                    "slots; JETCRON_AGENT_JOB_UIDS=FIRST-LAST gives each attempt a uid of its own")
