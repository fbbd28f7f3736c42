"""The record hand-off on a real nats-server: a run's `scheduled` record alone hands it to placement, and no service
of this version writes to JC_PLACE; the PlaceRun a service of the previous release still publishes beside its record
(set to `JETCRON_PLACE_BY=message` there) joins the run's entry, whether it comes before the placement leader holds
the record or after. Each run is placed and run once, and each such message taken once and acked."""

from __future__ import annotations

import nats
from harness import Services, wait_for
from placement_support import job, runs_of

from jetcron.core.models import Run
from jetcron.sdk.client import Client
from jetcron.wire import subjects as s
from jetcron.wire.codec import decode, encode
from jetcron.wire.messages import place_run_for


async def place_as_the_previous_release(url: str, run_id: str) -> None:
    """What a service of the previous release set to hand runs over by message published once it had written a
    run's `scheduled` record: its PlaceRun, under the message id it gave it."""
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        entry = await (await js.key_value(s.BUCKET_RUNS)).get(run_id)
        run = decode(entry.value or b"", Run)
        message = place_run_for(run)
        await js.publish(s.place_subject(message.priority), encode(message),
                         headers={"Nats-Msg-Id": s.msg_id(run.run_id, run.attempt, "place")})
    finally:
        await nc.close()


async def place_stream(url: str) -> tuple[int, int, int, int]:
    """JC_PLACE's (last sequence, messages held) and placement's consumer's (redelivered, ack pending)."""
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        stream = await js.stream_info(s.STREAM_PLACE)
        consumer = await js.consumer_info(s.STREAM_PLACE, s.CONSUMER_PLACEMENT)
        return stream.state.last_seq, stream.state.messages, consumer.num_redelivered, consumer.num_ack_pending
    finally:
        await nc.close()


async def test_runs_handed_over_by_record_and_by_the_previous_releases_place_runs_each_run_once(
        services: Services, client: Client) -> None:
    # Given the system with no placement yet, and four runs recorded: two by the trigger (jobs due now), two by the
    # api (a yearly job run by hand)
    await services.start_system(agents=1, core=("api", "trigger", "run_tracker"))
    for i in range(2):
        await client.call("jobs.create", job(f"now{i}", "true"))
    by_hand = job("by-hand", "true")
    by_hand["spec"]["schedule"] = {"kind": "cron", "cron": "0 0 1 1 *"}
    await client.call("jobs.create", by_hand)
    manual = [(await client.call("jobs.trigger", {"name": "by-hand"}))["run_id"] for _ in range(2)]

    async def fired() -> list[str] | None:
        found = [r["run_id"] for n in ("now0", "now1") for r in await runs_of(client, n)]
        return found if len(found) == 2 else None

    now_runs = await wait_for(fired, 20, what="the trigger to record both runs due now")
    # And a service of the previous release published a PlaceRun for three of them (one is left to its record)
    for run_id in [*now_runs, manual[0]]:
        await place_as_the_previous_release(services.server.url, run_id)

    # When placement starts, and then one more run is recorded by hand and its PlaceRun follows it
    services.start("placement", "placement")
    await services["placement"].wait_logged("placement leader", 40)
    late = (await client.call("jobs.trigger", {"name": "by-hand"}))["run_id"]
    await place_as_the_previous_release(services.server.url, late)

    # Then every one of the five runs once, at its first attempt
    async def all_done() -> dict[str, list[tuple[str, int]]] | None:
        seen = {n: sorted((r["state"], r["attempt"]) for r in await runs_of(client, n))
                for n in ("now0", "now1", "by-hand")}
        ok = all(seen[f"now{i}"] == [("succeeded", 1)] for i in range(2)) and seen["by-hand"] == [("succeeded", 1)] * 3
        return seen if ok else None

    await wait_for(all_done, 40, what="each of the five runs to succeed once")
    # And JC_PLACE held only the four PlaceRuns published by hand, each taken once and acked
    assert await place_stream(services.server.url) == (4, 0, 0, 0)
