"""Placement keeps placing through storage trouble: an AssignRun its stream did not take is sent again, and a
pass that fails is followed by the next one (a leader that places nothing is the failure mode)."""

from __future__ import annotations

from harness import Services, wait_for
from test_runs import now_job, state_is, the_run

from jetcron.sdk.client import Client


async def test_an_assignment_the_stream_did_not_take_is_sent_again_and_runs_as_its_first_attempt(
        services: Services, client: Client) -> None:
    # Given placement whose first AssignRun publish fails as it does while the stream elects a leader
    await services.start_system(agents=1, JETCRON_FAULT="placement.dispatch=fail@1")

    # When two jobs are created, one after the other
    await client.call("jobs.create", now_job("first", "true"))
    first = await the_run(client, "first", when=state_is("succeeded"), what="first to succeed")
    await client.call("jobs.create", now_job("second", "true"))
    second = await the_run(client, "second", when=state_is("succeeded"), what="second to succeed")

    # Then the first ran as its first attempt (sent again at once, not re-dispatched by the tracker later),
    # and placement went on placing
    assert [a["attempt"] for a in first["history"]] == [1]
    assert [a["attempt"] for a in second["history"]] == [1]
    assert "assignment not sent" not in services["placement"].output()


async def test_a_placement_pass_that_fails_is_logged_and_the_next_one_places(
        services: Services, client: Client) -> None:
    # Given placement whose second pass fails
    await services.start_system(agents=1, JETCRON_FAULT="placement.pass=fail@2")
    await wait_for(lambda: "placement pass failed" in services["placement"].output(), 20,
                   what="the failed pass to be logged")

    # When a job is created after that
    await client.call("jobs.create", now_job("after", "true"))

    # Then it runs: the leader still places
    run = await the_run(client, "after", when=state_is("succeeded"), what="after to succeed")
    assert [a["attempt"] for a in run["history"]] == [1]
    assert "fault injected: storage did not answer" in services["placement"].output()
