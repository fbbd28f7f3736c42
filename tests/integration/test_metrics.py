"""Every service serves /metrics, /livez and /readyz on the port it publishes in jc_services; values move."""

from __future__ import annotations

import nats
from harness import Services, wait_for
from metrics_support import http_get, local_url, samples
from prometheus_client.parser import text_string_to_metric_families

from jetcron.bus.registry import Registry
from jetcron.sdk.client import Client
from jetcron.wire.messages import ServiceInstance

# name -> type, as the text format declares them (a counter's family drops its _total suffix).
EXPECTED = {
    "jetcron_queue_depth": "gauge",
    "jetcron_run_wait_seconds": "histogram",
    "jetcron_fire_lateness_seconds": "histogram",
    "jetcron_runs_finished": "counter",
    "jetcron_retries": "counter",
    "jetcron_dead_lettered": "counter",
    "jetcron_leases_expired": "counter",
    "jetcron_agent_heartbeat_failures": "counter",
    "jetcron_takeovers": "counter",
    "jetcron_takeover_duration_seconds": "histogram",
    "jetcron_takeover_gap_seconds": "histogram",
    "jetcron_agents_lost": "counter",
    "jetcron_agents_alive": "gauge",
    "jetcron_reports_dropped": "counter",
    "jetcron_api_requests": "counter",
    "jetcron_agent_running_runs": "gauge",
    "jetcron_agent_free_cpu_cores": "gauge",
    "jetcron_agent_free_memory_bytes": "gauge",
    "jetcron_agent_free_gpus": "gauge",
    "jetcron_leases_held": "gauge",
}


async def _instances(url: str) -> dict[str, ServiceInstance]:
    nc = await nats.connect(url)
    try:
        registry = await Registry.open(nc.jetstream())

        async def all_ready() -> dict[str, ServiceInstance] | None:
            found = {i.service: i for i in await registry.instances()}
            names = {"api", "trigger", "placement", "run_tracker", "agent"}
            return found if names <= set(found) and all(found[n].ready for n in names) else None

        instances: dict[str, ServiceInstance] = await wait_for(all_ready, 20, what="every service registered ready")
        return instances
    finally:
        await nc.close()


async def test_metrics_are_served_named_by_convention_and_move(services: Services, client: Client) -> None:
    # Given a running system, each instance published where its metrics are
    await services.start_system(agents=1)
    instances = await _instances(services.server.url)

    for instance in instances.values():
        assert (await http_get(local_url(instance.metrics_url, "/livez")))[0] == 200
        assert (await http_get(local_url(instance.metrics_url, "/readyz")))[0] == 200
        assert (await http_get(local_url(instance.metrics_url, "/nope")))[0] == 404

    # Every metric is there with its type; queue depth has every priority before the first run
    _, text = await http_get(local_url(instances["placement"].metrics_url, "/metrics"))
    families = {f.name: f.type for f in text_string_to_metric_families(text)}
    missing = {name: kind for name, kind in EXPECTED.items() if families.get(name) != kind}
    assert not missing, f"missing or mistyped: {missing}"
    depth = {dict(s.labels)["priority"] for f in text_string_to_metric_families(text)
             if f.name == "jetcron_queue_depth" for s in f.samples}
    assert depth == {"critical", "high", "normal", "low"}

    before = {name: await samples(i) for name, i in instances.items()}

    # When a job runs to success
    await client.call("jobs.create", {"spec": {"name": "metered", "command": ["true"], "schedule": {"kind": "now"}}})

    async def succeeded() -> bool:
        page = await client.call("runs.list", {"job": "metered"})
        return any(r["state"] == "succeeded" for r in page["items"])

    await wait_for(succeeded, 20, what="the run to succeed")

    def key(name: str, **labels: str) -> tuple[str, frozenset[tuple[str, str]]]:
        return name, frozenset(labels.items())

    # Then the counters and histograms of the services that did the work moved
    checks = [
        ("api", key("jetcron_api_requests_total", verb="jobs.create", outcome="ok")),
        ("trigger", key("jetcron_fire_lateness_seconds_count")),
        ("agent", key("jetcron_run_wait_seconds_count")),
        ("run_tracker", key("jetcron_runs_finished_total", outcome="succeeded")),
    ]

    async def moved() -> list[str]:
        still = []
        for service, sample in checks:
            after = await samples(instances[service])
            if after.get(sample, 0.0) <= before[service].get(sample, 0.0):
                still.append(f"{service} {sample[0]}")
        return still

    async def all_moved() -> bool:
        return not await moved()

    await wait_for(all_moved, 10, what="every checked metric to increase")
    agent_now = await samples(instances["agent"])
    assert agent_now[key("jetcron_agent_free_cpu_cores")] > 0
    placement_now = await samples(instances["placement"])
    assert placement_now[key("jetcron_leases_held", kind="placement_leader")] == 1
