"""The REST API's words and body: status words and what they find, filtered pages, the create body's two shapes,
the OpenAPI declarations of the filters."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest

from jetcron.core.errors import InvalidSpec
from jetcron.core.models import (
    JitterPolicy,
    JobRecord,
    JobSpec,
    JobStatus,
    MisfireKind,
    MisfirePolicy,
    OverlapPolicy,
    Resources,
    RetryPolicy,
    Run,
    RunState,
    Schedule,
    ScheduleKind,
)
from jetcron.core.validate import decode_spec
from jetcron.wire.api import Page
from jetcron_services.gateway import listing
from jetcron_services.gateway import status as words
from jetcron_services.gateway.design import CreateJob, ResourcesBody, job_spec, rest_field

NOW = datetime(2026, 12, 3, tzinfo=UTC)
S = RunState


def _job(name: str = "n", *, paused: bool = False, tenant: str = "acme") -> JobRecord:
    return JobRecord(spec=JobSpec(name=name, command=["true"], tenant=tenant), created_at=NOW, updated_at=NOW,
                     status=JobStatus.PAUSED if paused else JobStatus.ACTIVE)


def _run(state: RunState, job: str = "acme.n", stamp: str = "20261203T000000000Z") -> Run:
    return Run(run_id=f"{job}.{stamp}", job=job, tenant="acme", state=state, scheduled_at=NOW, due_at=NOW,
               created_at=NOW)


@pytest.mark.parametrize(("word", "states"), [
    ("queued", {S.WAITING, S.SCHEDULED, S.ASSIGNED, S.RETRY_WAIT}), ("running", {S.RUNNING}),
    ("completed", {S.SUCCEEDED}), ("failed", {S.FAILED, S.DEAD}),
    *[(state.value, {state}) for state in RunState if state.value not in ("running", "failed")]])
def test_each_word_covers_its_states(word: str, states: set[RunState]) -> None:
    assert words.run_states(word) == states
    wanted = words.job_filter(word)
    assert wanted is not None
    for state in RunState:
        assert wanted.finds(_job(), _run(state)) is (state in states), state
        assert not wanted.finds(_job(paused=True), _run(state))  # a paused job is paused, whatever its run did


def test_the_designs_four_and_the_rest_are_the_allowed_sets() -> None:
    assert words.RUN_WORDS[:4] == ("queued", "running", "completed", "failed")
    assert set(words.RUN_WORDS) == {"queued", "completed"} | {state.value for state in RunState}
    assert set(words.JOB_WORDS) == {*words.RUN_WORDS, "paused"} and len(set(words.JOB_WORDS)) == len(words.JOB_WORDS)
    for unknown in ("deleted", "Completed", "", "succeeded,failed", "active"):
        assert words.job_filter(unknown) is None and words.run_states(unknown) is None
    assert words.run_states("paused") is None  # a job's, not a run's


def test_an_unknown_word_is_a_400_naming_the_field_the_value_and_the_allowed_set() -> None:
    body = words.unknown("status", "done", words.JOB_WORDS)
    assert (body.status, body.title, body.field, body.value, body.code) == (400, "Bad Request", "status", "done",
                                                                           "invalid")
    assert body.detail == "status must be one of " + ", ".join(words.JOB_WORDS) and "completed" in body.detail


def test_a_job_with_no_run_is_queued_and_paused_comes_from_the_record() -> None:
    assert words.shown(_job(), None) == "queued" and words.shown(_job(paused=True), _run(S.SUCCEEDED)) == "paused"
    queued, paused, done = (words.job_filter(w) for w in ("queued", "paused", "completed"))
    assert queued is not None and paused is not None and done is not None
    assert queued.finds(_job(), None) and not done.finds(_job(), None)
    assert paused.finds(_job(paused=True), _run(S.SUCCEEDED)) and paused.finds(_job(paused=True), None)
    assert not paused.finds(_job(), _run(S.SUCCEEDED))
    # what the record decides needs no run read
    assert paused.by_record(_job()) is False and paused.by_record(_job(paused=True)) is True
    assert done.by_record(_job(paused=True)) is False and done.by_record(_job()) is None


@pytest.mark.parametrize("paused", [False, True])
@pytest.mark.parametrize("state", [None, *RunState])
def test_every_status_and_state_a_view_shows_is_a_word_that_finds_the_job(state: RunState | None,
                                                                           paused: bool) -> None:
    job, run = _job(paused=paused), None if state is None else _run(state)
    shown, exact = words.shown(job, run), words.state_of(job, run)
    assert shown in words.STATUSES and (exact is None or exact in words.STATES)
    for word in (shown, exact):
        wanted = None if word is None else words.job_filter(word)
        assert word is None or (word in words.JOB_WORDS and wanted is not None and wanted.finds(job, run)), word


@pytest.mark.parametrize(("state", "status"), [
    (None, "queued"), (S.WAITING, "queued"), (S.SCHEDULED, "queued"), (S.ASSIGNED, "queued"),
    (S.RETRY_WAIT, "queued"), (S.RUNNING, "running"), (S.SUCCEEDED, "completed"), (S.FAILED, "failed"),
    (S.DEAD, "failed"), (S.CANCELLED, "cancelled"), (S.SKIPPED, "skipped"), (S.BLOCKED, "blocked")])
def test_a_view_shows_the_designs_word_as_status_and_jetcrons_state_beside_it(state: RunState | None,
                                                                              status: str) -> None:
    from jetcron_services.gateway.design import job_status

    run = None if state is None else _run(state)
    view = job_status(_job(), run, "acme", base="http://gw")
    assert (view.status, view.state, view.run_state) == (status, state and state.value, state and state.value)
    paused = job_status(_job(paused=True), run, "acme", base="http://gw")
    assert (paused.status, paused.state, paused.run_state) == ("paused", "paused", state and state.value)
    # the design's four words are the lifecycle; the rest are where the design is silent
    assert words.STATUSES == ("queued", "running", "completed", "failed", "paused", "cancelled", "skipped",
                              "blocked")


# -- filtered pages ---------------------------------------------------------------------------------------------


@dataclass
class _Api:
    """The API's jobs.list and runs.latest as the server answers them: keys after the cursor, in order; the cursor
    is the last key of a full page when more follow."""

    jobs: list[JobRecord]
    runs: dict[str, Run]
    asked: list[int] = field(default_factory=list)
    latest_reads: int = 0

    @property
    def client(self) -> Any:
        api = self

        class Jobs:
            async def list(self, *, queue: str | None, cursor: str | None, limit: int) -> Page[JobRecord]:
                api.asked.append(limit)
                after = [j for j in api.jobs if j.spec.key > (cursor or "")]
                page = after[:limit]
                return Page(items=page, next_cursor=page[-1].spec.key if len(after) > limit else None)

        class Runs:
            async def latest(self, job: str) -> Run | None:
                api.latest_reads += 1
                return api.runs.get(job)

        class Client:
            jobs, runs = Jobs(), Runs()

        return Client()


def _fleet(n: int, state_of: Any) -> _Api:
    jobs = [_job(f"j{i:04d}", paused=state_of(i) == "paused") for i in range(n)]
    runs = {f"j{i:04d}": _run(state_of(i), job=f"acme.j{i:04d}") for i in range(n)
            if state_of(i) not in (None, "paused")}
    return _Api(jobs, runs)


async def _all_pages(api: _Api, word: str | None, limit: int) -> list[list[str]]:
    wanted = None if word is None else words.job_filter(word)
    pages, cursor = [], None
    while True:
        page = await listing.jobs_page(api.client, wanted, tenant="acme", base="http://gw", queue=None, cursor=cursor,
                                       limit=limit)
        pages.append([view.job_id for view in page.items])
        cursor = page.next_cursor
        if cursor is None:
            return pages


def _flat(pages: list[list[str]]) -> list[str]:
    return [item for page in pages for item in page]


async def test_a_filter_applies_before_paging_pages_are_full_and_the_cursor_misses_nothing() -> None:
    # every seventh job succeeded, the rest run
    api = _fleet(200, lambda i: S.SUCCEEDED if i % 7 == 0 else S.RUNNING)
    pages = await _all_pages(api, "completed", 5)
    expected = [f"j{i:04d}" for i in range(0, 200, 7)]
    assert [len(p) for p in pages] == [5, 5, 5, 5, 5, 4] and _flat(pages) == expected
    assert await _all_pages(api, "running", 50) == [[f"j{i:04d}" for i in range(200) if i % 7][k:k + 50]
                                                     for k in range(0, 171, 50)]
    # a page that ends exactly with the listing says so: no cursor to an empty page
    assert await _all_pages(_fleet(10, lambda i: S.FAILED), "failed", 5) == [[f"j{i:04d}" for i in range(5)],
                                                                             [f"j{i:04d}" for i in range(5, 10)]]
    assert await _all_pages(_fleet(10, lambda i: S.DEAD), "completed", 5) == [[]]


async def test_a_filtered_page_reads_on_until_it_is_full_or_the_listing_ends_and_looks_at_each_job_once() -> None:
    api = _fleet(5000, lambda i: S.SUCCEEDED if i in (10, 4500) else S.RUNNING)
    first = await listing.jobs_page(api.client, words.job_filter("completed"), tenant="acme", base="", queue=None,
                                    cursor=None, limit=10)
    assert [v.job_id for v in first.items] == ["j0010", "j4500"] and first.next_cursor is None
    assert api.latest_reads == 5000 and max(api.asked) <= listing.API_PAGE
    assert await _all_pages(api, "completed", 1) == [["j0010"], ["j4500"], []]


async def test_paused_jobs_are_found_without_reading_runs_and_a_paused_job_is_no_runs_word() -> None:
    api = _fleet(30, lambda i: "paused" if i % 10 == 3 else (S.SUCCEEDED if i % 2 else None))
    assert await _all_pages(api, "paused", 50) == [["j0003", "j0013", "j0023"]]
    assert api.latest_reads == 3  # only the jobs shown read their latest run
    assert await _all_pages(api, "queued", 50) == [[f"j{i:04d}" for i in range(30) if i % 2 == 0]]
    assert _flat(await _all_pages(api, None, 7)) == [f"j{i:04d}" for i in range(30)]


async def test_runs_of_several_states_merge_by_id_with_a_cursor_that_loses_none() -> None:
    runs = [_run(state, stamp=f"20261203T0000{i:02d}000Z") for i, state in
            enumerate([S.FAILED, S.DEAD, S.DEAD, S.SUCCEEDED, S.FAILED, S.DEAD, S.FAILED])]

    class Runs:
        async def list(self, *, job: str | None, state: str, queue: str | None, cursor: str | None, limit: int,
                       newest: bool | None) -> Page[Run]:
            ids = sorted((r for r in runs if r.state == state), key=lambda r: r.run_id, reverse=bool(newest))
            after = [r for r in ids if cursor is None or (r.run_id < cursor if newest else r.run_id > cursor)]
            return Page(items=after[:limit], next_cursor=after[limit - 1].run_id if len(after) > limit else None)

    class Client:
        runs = Runs()

    failed = words.run_states("failed")
    assert failed is not None
    for newest in (False, True):
        seen, cursor = [], None
        while True:
            page = await listing.runs_page(Client(), failed, job="acme.n", queue=None, cursor=cursor, limit=2,
                                           newest=newest)  # type: ignore[arg-type]
            assert len(page.items) == 2 or page.next_cursor is None
            seen += [r.run_id for r in page.items]
            cursor = page.next_cursor
            if cursor is None:
                break
        expected = sorted(r.run_id for r in runs if r.state in failed)
        assert seen == (expected[::-1] if newest else expected)


async def test_a_listing_that_ends_short_with_a_cursor_is_not_overtaken_by_the_others() -> None:
    # Without a job the API may end a page short (so many jobs and records looked at) with a cursor: the merged page
    # stops there, or the runs of that state between it and the others' last would never be listed.
    runs = [_run(state, stamp=f"20261203T0000{i:02d}000Z") for i, state in
            enumerate([S.FAILED, S.DEAD, S.DEAD, S.FAILED, S.DEAD, S.FAILED, S.FAILED, S.DEAD])]

    class Runs:
        async def list(self, *, job: str | None, state: str, queue: str | None, cursor: str | None, limit: int,
                       newest: bool | None) -> Page[Run]:
            ids = sorted((r for r in runs if r.state == state), key=lambda r: r.run_id, reverse=bool(newest))
            after = [r for r in ids if cursor is None or (r.run_id < cursor if newest else r.run_id > cursor)]
            if state == S.DEAD and len(after) > 1:  # looked at one run only: short, and where to go on
                return Page(items=after[:1], next_cursor=after[0].run_id)
            return Page(items=after[:limit], next_cursor=after[limit - 1].run_id if len(after) > limit else None)

    class Client:
        runs = Runs()

    failed = words.run_states("failed")
    assert failed is not None
    for newest in (False, True):
        seen, cursor = [], None
        for _ in range(20):
            page = await listing.runs_page(Client(), failed, job=None, queue=None, cursor=cursor, limit=3,
                                           newest=newest)  # type: ignore[arg-type]
            seen += [r.run_id for r in page.items]
            cursor = page.next_cursor
            if cursor is None:
                break
        expected = sorted(r.run_id for r in runs if r.state in failed)
        assert seen == (expected[::-1] if newest else expected), newest


# -- the create body ------------------------------------------------------------------------------------------------


def _body(**fields: object) -> CreateJob:
    return msgspec.convert({"name": "n", "command": "echo hi", **fields}, CreateJob)


def test_the_body_takes_every_field_of_the_job_spec_and_of_its_resources() -> None:
    body_fields = {f.name for f in msgspec.structs.fields(CreateJob)}
    missing = {f.name for f in msgspec.structs.fields(JobSpec)} - body_fields
    assert not missing, f"POST /api/v1/jobs does not take the spec's {sorted(missing)}: add them to CreateJob"
    resources = {f.name for f in msgspec.structs.fields(ResourcesBody)}
    assert {f.name for f in msgspec.structs.fields(Resources)} <= resources


def test_a_full_spec_sent_as_the_body_is_stored_as_it_is() -> None:
    spec = JobSpec(
        name="train", command=["python", "train.py"], tenant="acme", image="ghcr.io/acme/train:1",
        schedule=Schedule(kind=ScheduleKind.CRON, cron="0 3 * * *", tz="Europe/Paris"),
        resources=Resources(cpu=8, memory_mb=65536, gpus=8, gpu_model="H100", hosts=4),
        retry=RetryPolicy(max_attempts=5, multiplier=3.0, non_retryable_exit_codes=[2]),
        misfire=MisfirePolicy(kind=MisfireKind.ALL, max_catchup=3), overlap=OverlapPolicy.SKIP,
        jitter=JitterPolicy(window_seconds=30), require={"zone": "a"}, run_as_root=True, timeout_seconds=600)
    assert decode_spec(job_spec(msgspec.convert(msgspec.to_builtins(spec), CreateJob))) == spec


def test_the_designs_fields_and_the_specs_combine() -> None:
    spec = decode_spec(job_spec(_body(resources={"memory_gb": 2, "gpus": 1, "gpu_model": "A100"},
                                      retry_policy={"max_retries": 1}, schedule="0 * * * *", timezone="Asia/Tokyo",
                                      overlap="buffer_one", require={"rack": "r1"}, jitter={"random_seconds": 5})))
    assert (spec.resources.memory_mb, spec.resources.gpu_model, spec.retry.max_attempts) == (2048, "A100", 2)
    assert (spec.schedule.cron, spec.schedule.tz, spec.overlap, spec.require) == ("0 * * * *", "Asia/Tokyo",
                                                                                  "buffer_one", {"rack": "r1"})
    assert spec.jitter.random_seconds == 5 and spec.command == ["sh", "-c", "echo hi"]
    assert decode_spec(job_spec(_body())).resources.memory_mb == 64  # the design's default, 0.0625 GiB


@pytest.mark.parametrize(("fields", "named"), [
    ({"resources": {"memory_gb": 1, "memory_mb": 1024}}, "resources.memory_mb"),
    ({"retry_policy": {"max_retries": 1}, "retry": {"max_attempts": 2}}, "retry"),
    ({"schedule": {"kind": "cron", "cron": "0 * * * *"}, "timezone": "Europe/Paris"}, "timezone"),
    ({"resources": {"memory_gb": -1}}, "resources.memory_gb"),
    ({"resources": {"memory_gb": math.inf}}, "resources.memory_gb"),
    ({"resources": {"memory_gb": 1.6e308}}, "resources.memory_gb"),  # finite, but infinite once in MiB
    ({"resources": {"memory_gb": 16385}}, "resources.memory_gb")])
def test_parts_that_cannot_work_together_are_refused_naming_the_field(fields: dict[str, Any], named: str) -> None:
    with pytest.raises(InvalidSpec) as refused:
        job_spec(_body(**fields))
    assert refused.value.field == named


def test_the_most_memory_in_gib_is_the_specs_own_bound() -> None:
    assert decode_spec(job_spec(_body(resources={"memory_gb": 16384}))).resources.memory_mb == 16 * 1024 * 1024
    with pytest.raises(InvalidSpec) as refused:
        job_spec(_body(resources={"memory_gb": 1.6e308}))
    assert str(refused.value) == "resources.memory_gb: must be a positive number of GiB, at most 16384 (got 1.6e+308)"


def test_api_errors_name_the_field_in_the_shape_the_body_used() -> None:
    design = _body(schedule="0 * * * *", resources={"memory_gb": 1}, retry_policy={"max_retries": 1})
    spec_shaped = _body(schedule={"kind": "cron", "cron": "x"}, resources={"memory_mb": 10}, retry={"max_attempts": 2})
    for ours, as_designed, as_spec in [
            ("spec.schedule.tz", "timezone", "schedule.tz"), ("spec.schedule.cron", "schedule", "schedule.cron"),
            ("spec.resources.memory_mb", "resources.memory_gb", "resources.memory_mb"),
            ("spec.retry.max_attempts", "retry_policy.max_retries", "retry.max_attempts"),
            ("spec.resources.hosts", "resources.hosts", "resources.hosts"),
            ("spec.misfire.kind", "misfire.kind", "misfire.kind")]:
        assert (rest_field(ours, design), rest_field(ours, spec_shaped)) == (as_designed, as_spec), ours


@pytest.mark.parametrize(("message", "key", "named"), [
    ("Object contains unknown field `kinda` - at `$.misfire`", "", "misfire.kinda"),
    ("Object contains unknown field `kinda`", "misfire", "misfire.kinda"),
    ("Object contains unknown field `colour`", "", "colour"),
    ("Object contains unknown field `x` - at `$.notify[0]`", "", "notify[0].x"),
    ("Expected `float`, got `str` - at `$.resources.cpu`", "", "resources.cpu"),
    ("Expected `float`, got `str`", "resources.cpu", "resources.cpu"), ("Expected `object`", "", None)])
def test_a_body_that_does_not_decode_names_the_field_by_its_whole_path(message: str, key: str,
                                                                      named: str | None) -> None:
    from jetcron_services.gateway.gate import field_of

    assert field_of(message, key) == named


# -- the OpenAPI document ------------------------------------------------------------------------------------------


def test_openapi_declares_the_status_words_and_the_400() -> None:
    from jetcron_services.gateway.contract import document

    doc = document()
    for path, name, allowed in (("/api/v1/jobs", "status", words.JOB_WORDS), ("/api/v1/runs", "state",
                                                                              words.RUN_WORDS)):
        get = doc["paths"][path]["get"]
        (param,) = [p for p in get["parameters"] if p["name"] == name]
        assert _enum(param["schema"]) == list(allowed), param
        assert "400" in get["responses"] and "problem+json" in str(get["responses"]["400"]["content"])
    created = doc["components"]["schemas"]
    assert any("warnings" in s.get("properties", {}) and "job_id" in s.get("properties", {}) for s in created.values())


def _enum(schema: dict[str, Any]) -> list[str] | None:
    if "enum" in schema:
        return list(schema["enum"])
    for part in schema.get("oneOf", []) + schema.get("anyOf", []):
        found = _enum(part)
        if found:
            return found
    return None


def test_a_body_is_read_as_its_type_says_with_no_coercion() -> None:
    # (Litestar's typed `data` read "enabled": 0 as false and "weight": "2" as 2.0)
    from jetcron_services.gateway.admin import TenantPolicyBody
    from jetcron_services.gateway.gate import HttpProblem, strict_body

    assert strict_body({"weight": 2, "max_cpu": 1.5}, TenantPolicyBody).weight == 2.0
    for body, named in (({"weight": "2"}, "weight"), ({"preemption": {"enabled": 0}}, "preemption.enabled"),
                        ({"max_gpus": True}, "max_gpus")):
        with pytest.raises(HttpProblem) as refused:
            strict_body(body, TenantPolicyBody)
        assert (refused.value.body.status, refused.value.body.field) == (422, named), body


@pytest.mark.parametrize(("header", "version"), [
    ('"3"', 3), ('W/"3"', 3), ("3", 3), (' "42" ', 42), ('"999999999999999"', 999_999_999_999_999),
    (None, None), ("", None), ('"0"', None), ('"1000000000000000"', None), ('"3x"', None), ("*", None)])
def test_if_match_names_a_version_of_at_most_15_digits(header: str | None, version: int | None) -> None:
    # (the contract's pattern for the header is the same expression: a version past 2**53 is not a JSON integer)
    from jetcron_services.gateway.gate import version_of

    assert version_of(header) == version
