"""Storage pressure never stops firing, on a real server: near a limit (a bucket's own, or the server's JetStream
store as a whole) the oldest finished runs are let go first and new occurrences go on being recorded; when nothing
can be let go, what is refused is refused with a named error, nothing acknowledged is lost, and firing resumes by
itself once space returns. The headroom is a metric of the run tracker's leader."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import nats
import pytest
from harness import Services, services_on, wait_for
from metrics_support import samples
from nats.js import JetStreamContext
from nats.js.api import StorageType, StreamConfig

from jetcron.bus.registry import Registry
from jetcron.bus.server import EmbeddedNats
from jetcron.core.ids import run_id
from jetcron.core.models import Run, RunState
from jetcron.sdk.client import Client
from jetcron.sdk.errors import ApiError
from jetcron.wire import subjects as s
from jetcron.wire.codec import encode

# Each test fills a store (24 MB, or a 256 KiB bucket) and waits for history to be let go and runs to go on: under
# make test's six workers on two cores one took 112 s before its teardown, past the suite's 120 s guard.
pytestmark = pytest.mark.timeout(240)

RUNS = s.kv_stream(s.BUCKET_RUNS)
QUICK = {"JETCRON_STORAGE_CHECK_SECONDS": "0.5", "JETCRON_HISTORY_MIN_SECONDS": "1"}
LONG_AGO = datetime.now(UTC) - timedelta(days=1)
# Every bucket with a limit of its own is reserved from the server's store: small ones, so the store's own
# limit is what fills in the server-store tests.
SMALL_RESERVED = {"JETCRON_JOBS_MAX_BYTES": str(2 << 20), "JETCRON_DLQ_MAX_BYTES": str(1 << 20),
                  "JETCRON_IDEMPOTENCY_MAX_BYTES": str(1 << 20), "JETCRON_CHECKPOINTS_MAX_BYTES": str(1 << 20),
                  "JETCRON_NOTIFY_MAX_BYTES": str(1 << 20), "JETCRON_CALENDARS_MAX_BYTES": str(1 << 20)}


def _old_run(n: int) -> Run:
    """A finished run of a day ago (long past its gate), padded to about 1 KiB as a real record is."""
    at = LONG_AGO + timedelta(seconds=n)
    return Run(run_id=run_id("history", at), job="history", state=RunState.SUCCEEDED, scheduled_at=at, due_at=at,
               created_at=at, finished_at=at, keep_seconds=90 * 86400.0, reason="x" * 900)


async def _fill_with_history(js: JetStreamContext) -> dict[str, int]:
    """Write old finished runs into jc_runs (no TTL: only pressure can let them go), 64 at a time, until the bucket
    or the store refuses; the stream sequence of each one stored, by run id."""
    stored: dict[str, int] = {}
    n = 0
    while True:
        runs = [_old_run(n + i) for i in range(64)]
        n += len(runs)
        results = await asyncio.gather(*(js.publish(s.kv_subject(s.BUCKET_RUNS, r.run_id), encode(r)) for r in runs),
                                       return_exceptions=True)
        refused = False
        for run, result in zip(runs, results, strict=True):
            if isinstance(result, nats.errors.TimeoutError):
                continue  # its ack did not come in time under load: unknown, not a refusal; later batches tell
            if isinstance(result, BaseException):
                assert isinstance(result, nats.js.errors.APIError), result
                assert result.err_code in (10023, 10047, 10048, 10054) or "maximum" in str(result.description)
                refused = True
            else:
                stored[run.run_id] = result.seq
        if refused:
            return stored


async def _history_ids(js: JetStreamContext) -> set[str]:
    """The run ids of the history still there."""
    subjects = (await js.stream_info(RUNS, subjects_filter=s.kv_subject(s.BUCKET_RUNS, "history.*"))).state.subjects
    return {subject.removeprefix(s.kv_subject(s.BUCKET_RUNS, "")) for subject in subjects or {}}


async def _succeeded(client: Client, job: str) -> int:
    return sum(r["state"] == "succeeded" for r in (await client.call("runs.list", {"job": job}))["items"])


async def _tracker_metric(js: JetStreamContext, name: str, **labels: str) -> float:
    registry = await Registry.open(js)
    for instance in await registry.instances():
        if instance.service == "run_tracker":
            return (await samples(instance)).get((name, frozenset(labels.items())), 0.0)
    raise AssertionError("no run tracker in the registry")


def _every_second(name: str) -> dict[str, Any]:
    return {"spec": {"name": name, "command": ["true"], "schedule": {"kind": "every", "every_seconds": 1},
                     "misfire": {"catchup_window_seconds": 0, "grace_seconds": 0}}}


async def test_a_full_runs_bucket_lets_its_oldest_finished_runs_go_and_firing_goes_on(
        services: Services, nats_server: EmbeddedNats, client: Client) -> None:
    # Given a run records bucket of 256 KiB, full of finished runs of a day ago
    limit = {"JETCRON_RUNS_MAX_BYTES": str(256 << 10)}
    await services.start_system(agents=1, **QUICK, **limit)
    nc = await nats.connect(nats_server.url)
    try:
        js = nc.jetstream(timeout=5)
        written = await _fill_with_history(js)
        assert len(written) > 100
        # When a job fires every second
        await client.call("jobs.create", _every_second("tick"))
        # Then its occurrences are recorded and run (after the oldest history was let go), ...
        await wait_for(lambda: _succeeded_at_least(client, "tick", 5), 40, what="5 runs of tick to succeed")
        # ... the history went oldest first, and only down to about 80 % of the limit, not all of it
        left = await _history_ids(js)
        assert 0 < len(left) < len(written)
        shed = set(written) - left
        assert max(written[r] for r in shed) < min(written[r] for r in left)
        # ... and the leader says so: how much was let go, and each stream's headroom
        assert await _tracker_metric(js, "jetcron_history_shed_total", stream=s.BUCKET_RUNS) >= len(shed)
        ratio = await _tracker_metric(js, "jetcron_storage_used_ratio", stream=RUNS)
        assert 0.5 < ratio <= 1.0
    finally:
        await nc.close()


async def _succeeded_at_least(client: Client, job: str, count: int) -> bool:
    return await _succeeded(client, job) >= count


@pytest.fixture
def small_store(tmp_path: Path) -> Iterator[EmbeddedNats]:
    """One node whose JetStream store is 24 MB (max_file_store)."""
    server = EmbeddedNats(tmp_path / "nats", max_file_store="24MB")
    server.start(timeout=30)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def small_store_services(request: pytest.FixtureRequest, small_store: EmbeddedNats, tmp_path: Path
                         ) -> Iterator[Services]:
    yield from services_on(request, small_store, tmp_path)


async def test_a_full_server_store_lets_history_go_first(small_store_services: Services, small_store: EmbeddedNats
                                                         ) -> None:
    # Given a server whose JetStream store is 24 MB, most of it held by finished runs of a day ago
    await small_store_services.start_system(agents=1, **QUICK, **SMALL_RESERVED)
    client = await Client.connect(small_store.url, timeout=10)
    nc = await nats.connect(small_store.url)
    try:
        js = nc.jetstream(timeout=5)
        written = await _fill_with_history(js)

        async def created() -> bool:  # as a client does with a retryable refusal: the store is full until the
            try:                      # keeper's next pass (0.5 s here) lets history go
                await client.call("jobs.create", _every_second("tick"))
            except ApiError as exc:
                if exc.code != "storage_full":
                    raise
                return False
            return True

        # When a job that fires every second is created
        await wait_for(created, 15, what="the job to be created once history is let go")
        # Then history is let go for it and its runs are recorded and run
        await wait_for(lambda: _succeeded_at_least(client, "tick", 5), 40, what="5 runs of tick to succeed")
        assert len(await _history_ids(js)) < len(written)

        async def server_ratio() -> float | None:  # the gauge is set by the keeper's pass: read until it is
            ratio = await _tracker_metric(js, "jetcron_storage_used_ratio", stream="server")
            return ratio if ratio > 0 else None

        await wait_for(server_ratio, 10, what="the tracker to report the server store's used ratio")
    finally:
        await client.close()
        await nc.close()


async def test_a_store_full_of_what_cannot_be_let_go_refuses_with_a_named_error_and_firing_resumes_by_itself(
        small_store_services: Services, small_store: EmbeddedNats) -> None:
    # Given a running job and a store filled by something jetcron may not let go (another stream)
    await small_store_services.start_system(agents=1, **QUICK, **SMALL_RESERVED)
    client = await Client.connect(small_store.url, timeout=10)
    nc = await nats.connect(small_store.url)
    try:
        js = nc.jetstream(timeout=5)
        await client.call("jobs.create", _every_second("tick"))
        await client.call("jobs.create", {"spec": {"name": "manual", "command": ["true"],
                                                   "schedule": {"kind": "at", "at": "2099-01-01T00:00:00Z"}}})
        await wait_for(lambda: _succeeded_at_least(client, "tick", 2), 30, what="tick to run")
        await js.add_stream(StreamConfig(name="OTHER", subjects=["other.>"], storage=StorageType.FILE))
        chunk = b"x" * 65536
        while True:
            try:
                await js.publish("other.fill", chunk)
            except nats.js.errors.APIError:
                break
        # When a run is asked for while nothing can be stored
        with pytest.raises(ApiError) as refused:
            await client.call("jobs.trigger", {"name": "manual", "key": "k1"})
        # Then it is refused, naming the store and what to do, and nothing half-stored
        assert refused.value.code == "storage_full"
        assert "jc_runs" in str(refused.value) and "JETCRON_HISTORY_KEEP_SECONDS" in str(refused.value)
        stuck = await _succeeded(client, "tick")
        # When space returns
        await js.delete_stream("OTHER")
        # Then firing resumes by itself, the refused request can be made again, and every job is still there
        await wait_for(lambda: _succeeded_at_least(client, "tick", stuck + 3), 40, what="tick to run again")
        run = await client.call("jobs.trigger", {"name": "manual", "key": "k1"})
        assert run["state"] in ("scheduled", "assigned", "running", "succeeded")
        assert {j["spec"]["name"] for j in (await client.call("jobs.list", {}))["items"]} == {"tick", "manual"}
    finally:
        await client.close()
        await nc.close()


async def test_a_store_filled_past_the_leaders_check_still_lets_history_go_and_firing_resumes(
        small_store_services: Services, small_store: EmbeddedNats) -> None:
    # Given a job firing every second, and a tracker leader that looks at storage only once an hour
    await small_store_services.start_system(agents=1, JETCRON_STORAGE_CHECK_SECONDS="3600",
                                            JETCRON_HISTORY_MIN_SECONDS="1", **SMALL_RESERVED)
    client = await Client.connect(small_store.url, timeout=10)
    nc = await nats.connect(small_store.url)
    try:
        js = nc.jetstream(timeout=5)
        await client.call("jobs.create", _every_second("tick"))
        await wait_for(lambda: _succeeded_at_least(client, "tick", 2), 30, what="tick to run")
        # When history fills the server's whole store between two of its looks (then no lease can be renewed:
        # the tracker's leadership and the trigger's shards are given up)
        written = await _fill_with_history(js)
        stuck = await _succeeded(client, "tick")
        # Then, once something frees a lease's room, a tracker leads again and lets history go at once (its first
        # look as a new leader), and firing resumes by itself
        await wait_for(lambda: _succeeded_at_least(client, "tick", stuck + 3), 60, what="tick to run again")
        assert len(await _history_ids(js)) < len(written)
    finally:
        await client.close()
        await nc.close()
