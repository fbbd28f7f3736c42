"""The API at the edge: bad specs are refused with the field and value named and nothing stored; idempotent create."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
from harness import Services

from jetcron.core.models import AgentInfo
from jetcron.sdk.client import ApiError, Client
from jetcron.wire import subjects as s
from jetcron.wire.codec import encode

NEVER_SOON = {"kind": "cron", "cron": "0 0 1 1 *"}  # a valid schedule that will not fire during a test


def spec(name: str = "job", **fields: Any) -> dict[str, Any]:
    return {"name": name, "command": ["true"], "schedule": NEVER_SOON, **fields}


@pytest.fixture
async def api(services: Services) -> None:
    """Only the api service: these verbs need nothing else."""
    services.start("api", "api")
    await services["api"].wait_logged("api ready", 30)


async def everything_stored(client: Client) -> tuple[list[Any], list[Any]]:
    jobs = (await client.call("jobs.list", {"include_deleted": True}))["items"]
    runs = (await client.call("runs.list"))["items"]
    return jobs, runs


@pytest.mark.parametrize(("body", "field", "value"), [
    pytest.param(spec("badcron", schedule={"kind": "cron", "cron": "61 * * * *"}), "schedule.cron", "61 * * * *",
                 id="cron_minute_out_of_range"),
    pytest.param(spec("typo", timout=30), "timout", "30", id="unknown_field_timout"),
    pytest.param(spec("negcpu", resources={"cpu": -1}), "resources.cpu", "-1", id="negative_cpu"),
    pytest.param(spec("mars", schedule={"kind": "cron", "cron": "0 * * * *", "tz": "Mars/Olympus"}), "schedule.tz",
                 "Mars/Olympus", id="unknown_time_zone"),
    pytest.param(spec("preload", env={"LD_PRELOAD": "/tmp/evil.so"}), "env.LD_PRELOAD", "LD_PRELOAD",
                 id="env_ld_preload"),
])
async def test_an_invalid_spec_is_refused_naming_field_and_value_and_nothing_is_stored(
        api: None, client: Client, body: dict[str, Any], field: str, value: str) -> None:
    # Given one valid job already stored
    await client.call("jobs.create", {"spec": spec("keeper")})
    before = await everything_stored(client)

    # When an invalid spec is submitted
    with pytest.raises(ApiError) as caught:
        await client.call("jobs.create", {"spec": body})

    # Then the error is "invalid", names the field and the value, and nothing new is stored
    err = caught.value
    assert err.code == "invalid"
    assert err.retryable is False
    assert field in str(err), f"message does not name the field {field!r}: {err}"
    assert value in str(err), f"message does not show the value {value!r}: {err}"
    assert await everything_stored(client) == before


async def test_an_unknown_field_is_reported_as_that_field(api: None, client: Client) -> None:
    with pytest.raises(ApiError) as caught:
        await client.call("jobs.create", {"spec": spec("typo", timout=30)})
    assert (caught.value.field, caught.value.value) == ("spec.timout", "30")


async def test_create_with_an_idempotency_key_is_safe_to_retry(api: None, client: Client) -> None:
    # Given a job created with an idempotency key
    request = {"spec": spec("nightly"), "idempotency_key": "req-1"}
    first = await client.call("jobs.create", request)

    # When the same request is retried
    again = await client.call("jobs.create", request)

    # Then it answers with the same job, and only one job exists
    assert again == first
    assert [j["spec"]["name"] for j in (await client.call("jobs.list"))["items"]] == ["nightly"]


async def test_an_idempotency_key_reused_with_a_different_body_is_a_conflict(api: None, client: Client) -> None:
    # Given a job created with an idempotency key
    first = await client.call("jobs.create", {"spec": spec("nightly"), "idempotency_key": "req-1"})

    # When the key is reused with a different body
    with pytest.raises(ApiError) as caught:
        await client.call("jobs.create", {"spec": spec("nightly", command=["false"]), "idempotency_key": "req-1"})

    # Then it is a conflict that names the key, and the stored job is untouched
    assert caught.value.code == "conflict"
    assert "req-1" in str(caught.value)
    stored = await client.call("jobs.get", {"name": "nightly"})
    assert stored["job"] == first


async def test_a_create_refused_for_a_taken_name_claims_no_key(api: None, client: Client) -> None:
    # Given a job
    await client.call("jobs.create", {"spec": spec("nightly")})
    before = (await client.nc.jetstream().stream_info("KV_jc_idem")).state.last_seq

    # When another body is created under its name with a new idempotency key
    with pytest.raises(ApiError) as caught:
        await client.call("jobs.create", {"spec": spec("nightly", command=["false"]), "idempotency_key": "req-9"})

    # Then it is a conflict, and the key was never claimed: a refused request stores nothing
    assert (caught.value.code, str(caught.value)) == ("conflict", "job 'nightly' already exists (use update)")
    assert (await client.nc.jetstream().stream_info("KV_jc_idem")).state.last_seq == before


async def test_a_field_named_empty_is_named_as_json_spells_it(api: None, client: Client) -> None:
    with pytest.raises(ApiError) as caught:
        await client.call("cluster.status", {"": True})
    assert (caught.value.code, caught.value.field) == ("invalid", '""')
    assert str(caught.value) == '"": unknown field (this request takes none) (got True)'


async def test_agents_are_listed_a_page_at_a_time_by_id_and_counted_by_cluster_status(
        api: None, client: Client) -> None:
    # Given five agents registered (as their heartbeats write them), in no particular order
    now = datetime.now(UTC)
    js = client.nc.jetstream()
    for agent_id in ("a3", "a1", "a5", "a2", "a4"):
        info = AgentInfo(agent_id=agent_id, cpu=1, memory_mb=64, heartbeat_at=now, started_at=now)
        await js.publish(s.kv_subject(s.BUCKET_AGENTS, agent_id), encode(info))

    # When they are listed two at a time, each page from the last one's cursor
    pages, cursor = [], None
    while True:
        page = await client.call("agents.list", {"limit": 2} | ({"cursor": cursor} if cursor else {}))
        pages.append([a["agent_id"] for a in page["items"]])
        if not (cursor := page["next_cursor"]):
            break

    # Then each agent comes once, in id order, and the cluster's status counts them without a page
    assert pages == [["a1", "a2"], ["a3", "a4"], ["a5"]]
    assert (await client.call("cluster.status"))["agents"] == 5
    with pytest.raises(ApiError) as caught:
        await client.call("agents.list", {"limit": 0})
    assert (caught.value.code, caught.value.field) == ("invalid", "limit")
    assert str(caught.value) == "limit: must be an integer from 1 to 1000 (got 0)"


async def test_concurrent_creates_with_one_key_make_one_job_and_losers_may_retry(api: None, client: Client) -> None:
    # Given eight identical requests sent at once with the same idempotency key
    request = {"spec": spec("nightly"), "idempotency_key": "req-1"}
    answers = await asyncio.gather(*(client.call("jobs.create", request) for _ in range(8)), return_exceptions=True)

    # Then each either got the job or a conflict marked retryable, and a retry of a refused one gets the job
    jobs = [a for a in answers if not isinstance(a, BaseException)]
    refused = [a for a in answers if isinstance(a, BaseException)]
    assert jobs and all(j == jobs[0] for j in jobs)
    assert all(isinstance(e, ApiError) and e.code == "conflict" and e.retryable for e in refused), refused
    assert await client.call("jobs.create", request) == jobs[0]
    assert [j["spec"]["name"] for j in (await client.call("jobs.list"))["items"]] == ["nightly"]
