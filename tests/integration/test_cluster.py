"""The same system on a 3-node NATS cluster: streams and buckets at R3, a job runs end to end."""

from __future__ import annotations

import nats
from harness import Services, wait_for

from jetcron.sdk.client import Client
from jetcron.wire import subjects as s


async def test_a_job_runs_on_a_three_node_cluster_with_replicated_state(cluster_services: Services) -> None:
    # Given the system on three clustered servers
    await cluster_services.start_system(agents=1)
    url = cluster_services.server.url
    nc = await nats.connect(url.split(","))
    try:
        # Then its state is replicated three ways
        js = nc.jetstream()
        for stream in (s.STREAM_EVENTS, f"KV_{s.BUCKET_RUNS}", f"KV_{s.BUCKET_LEASES}", f"KV_{s.BUCKET_LEADERS}"):
            assert (await js.stream_info(stream)).config.num_replicas == 3, stream
    finally:
        await nc.close()

    # And a `now` job runs to success
    client = await Client.connect(url)
    try:
        await client.call("jobs.create", {"spec": {"name": "hello", "command": ["sh", "-c", "echo hi $JETCRON_RUN_ID"],
                                                   "schedule": {"kind": "now"}}})

        async def succeeded() -> dict | None:
            runs = (await client.call("runs.list", {"job": "hello"}))["items"]
            return runs[0] if runs and runs[0]["state"] == "succeeded" else None

        run = await wait_for(succeeded, 30, what="hello to succeed on the cluster")
        assert (await client.call("runs.logs", {"run_id": run["run_id"]}))["output"] == f"hi {run['run_id']}\n"
    finally:
        await client.close()
