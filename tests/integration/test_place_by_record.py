"""The record hand-off beside the message one: a trigger that still publishes `PlaceRun` (`JETCRON_PLACE_BY=message`,
a cluster mid-upgrade) and an api whose `scheduled` records alone hand runs over share one placement leader; each
run is placed and run once, and only the trigger's runs cost a message."""

from __future__ import annotations

import nats
from harness import Services, wait_for
from placement_support import job, runs_of, start

from jetcron.sdk.client import Client
from jetcron.wire import subjects as s


async def test_runs_handed_over_by_message_and_by_record_share_one_placement_and_each_runs_once(
        services: Services, client: Client) -> None:
    # Given an api and a tracker that hand runs over by their records, and a trigger that publishes PlaceRun too
    await start(services, {"agent-1": {}}, core=("api", "run_tracker"))
    services.start("trigger", "trigger", JETCRON_PLACE_BY="message")
    await services["trigger"].wait_logged("trigger ready", 40)

    # When three runs come from the trigger (jobs due now) and three from the api (a yearly job run by hand)
    for i in range(3):
        await client.call("jobs.create", job(f"now{i}", "true"))
    by_hand = job("by-hand", "true")
    by_hand["spec"]["schedule"] = {"kind": "cron", "cron": "0 0 1 1 *"}
    await client.call("jobs.create", by_hand)
    for _ in range(3):
        await client.call("jobs.trigger", {"name": "by-hand"})

    # Then every one of the six runs once, at its first attempt
    async def all_done() -> dict[str, list[tuple[str, int]]] | None:
        seen = {n: sorted((r["state"], r["attempt"]) for r in await runs_of(client, n))
                for n in ("now0", "now1", "now2", "by-hand")}
        ok = all(seen[f"now{i}"] == [("succeeded", 1)] for i in range(3)) and seen["by-hand"] == [("succeeded", 1)] * 3
        return seen if ok else None

    await wait_for(all_done, 40, what="each of the six runs to succeed once")
    # And only the trigger's three runs were messages on JC_PLACE, each taken once and acked
    nc = await nats.connect(services.server.url)
    try:
        js = nc.jetstream()
        stream = await js.stream_info(s.STREAM_PLACE)
        consumer = await js.consumer_info(s.STREAM_PLACE, s.CONSUMER_PLACEMENT)
        assert (stream.state.last_seq, stream.state.messages) == (3, 0)
        assert (consumer.num_redelivered, consumer.num_ack_pending) == (0, 0)
    finally:
        await nc.close()
