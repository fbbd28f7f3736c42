"""Admission control through the real services: refused with a clear, retryable error, nothing stored."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from harness import Services, wait_for

from jetcron.core.models import JobSpec, Priority, Resources, Schedule, ScheduleKind
from jetcron.sdk.client import Client
from jetcron.sdk.errors import ApiError, RateLimitedError, UnavailableError
from jetcron.wire import subjects as s
from jetcron.wire.codec import encode
from jetcron.wire.messages import PlaceRun

YEARLY = Schedule(kind=ScheduleKind.CRON, cron="0 0 1 1 *")


def _now(name: str) -> JobSpec:
    return JobSpec(name=name, command=["true"])


async def test_a_tenant_over_its_submit_rate_is_refused_with_a_retry_after(services: Services,
                                                                           client: Client) -> None:
    await services.start_system(agents=0, core=("api",))
    await client.tenants.set("acme", max_submits_per_second=0.5)
    acme = Client(client.nc, tenant="acme")
    await acme.jobs.create(JobSpec(name="first", command=["true"], schedule=YEARLY))
    with pytest.raises(RateLimitedError) as refused:
        await acme.jobs.create(JobSpec(name="second", command=["true"]))
    assert refused.value.retryable and 0 < (refused.value.retry_after or 0) <= 2.0
    assert "over its submit rate" in str(refused.value)
    assert [j.spec.name for j in (await acme.jobs.list()).items] == ["first"]
    # another tenant is not slowed
    await Client(client.nc, tenant="globex").jobs.create(_now("theirs"))


async def test_a_tenant_at_its_pending_cap_waits_for_runs_to_start(services: Services, client: Client) -> None:
    await services.start_system(agents=0)  # no agent: runs stay waiting for placement
    await client.tenants.set("acme", max_pending_runs=1)
    acme = Client(client.nc, tenant="acme")
    await acme.jobs.create(_now("one"))

    tries = iter(range(1000))

    async def refused() -> ApiError | None:
        # yearly jobs: they add no run of their own while placement catches up with `one`
        try:
            await acme.jobs.create(JobSpec(name=f"two-{next(tries)}", command=["true"],
                                           schedule=YEARLY))
        except RateLimitedError as exc:
            return exc
        return None

    error = await wait_for(refused, 20, what="the pending-runs cap to refuse a second job")
    assert "1 runs waiting for placement (its limit is 1)" in str(error)


async def test_a_full_placement_queue_refuses_submits_instead_of_losing_them(services: Services,
                                                                           client: Client) -> None:
    # placement is not running, so the PlaceRuns that services of the previous release (set to hand runs over by
    # message) publish pile up in its queue stream (10 at most here)
    await services.start_system(agents=0, core=("api",), JETCRON_PLACE_QUEUE_MAX="10")
    js = client.nc.jetstream()
    for i in range(9):
        run_id = f"job-{i}.older"
        await js.publish(s.place_subject(Priority.NORMAL), encode(PlaceRun(
            run_id=run_id, attempt=1, job=f"job-{i}", tenant="default", priority=Priority.NORMAL,
            resources=Resources(), due_at=datetime.now(UTC))), headers={"Nats-Msg-Id": s.msg_id(run_id, 1, "place")})
    assert (await js.stream_info(s.STREAM_PLACE)).state.messages == 9

    name, error = await _refused_submit(client, 5, "a full queue to refuse a submit")
    assert error.retryable and "JC_PLACE queue is full" in str(error) and "of 10)" in str(error)
    assert name not in {j.spec.name for j in (await client.jobs.list()).items}


async def test_a_placement_leader_holding_its_limit_of_waiting_runs_refuses_submits(services: Services,
                                                                                     client: Client) -> None:
    # Given runs handed over by their records to a placement leader with no agent (10 waiting at most here)
    await services.start_system(agents=0, core=("api", "trigger", "placement"), JETCRON_PLACE_QUEUE_MAX="10")
    for i in range(9):
        await client.jobs.create(_now(f"job-{i}"))

    # When more come, then once the leader has counted its 9 waiting runs a submit is refused, and not stored
    name, error = await _refused_submit(client, 20, "the placement leader's full queue to refuse a submit")
    assert error.retryable and "the placement queue is full" in str(error) and "of 10)" in str(error)
    assert name not in {j.spec.name for j in (await client.jobs.list()).items}


async def _refused_submit(client: Client, timeout: float, what: str) -> tuple[str, UnavailableError]:
    """Submit new jobs until one is refused as unavailable (the api reads the queue's size at most once a second):
    the refused job's name and the error."""
    tries = iter(range(1000))

    async def refused() -> tuple[str, UnavailableError] | None:
        name = f"extra-{next(tries)}"
        try:
            await client.jobs.create(_now(name))
        except UnavailableError as exc:
            return name, exc
        return None

    found: tuple[str, UnavailableError] = await wait_for(refused, timeout, what=what)
    return found
