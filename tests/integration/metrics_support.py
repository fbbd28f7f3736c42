"""Reading a service's /metrics, /livez and /readyz as Prometheus would, over loopback."""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.parse
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from jetcron.wire.messages import ServiceInstance

Sample = tuple[str, frozenset[tuple[str, str]]]


def local_url(url: str, path: str) -> str:
    """The instance's URL, reached over loopback (it advertises its host name)."""
    port = urllib.parse.urlsplit(url).port
    return f"http://127.0.0.1:{port}{path}"


async def http_get(url: str) -> tuple[int, str]:
    def fetch() -> tuple[int, str]:
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                return int(resp.status), resp.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    return await asyncio.to_thread(fetch)


async def samples(instance: ServiceInstance) -> dict[Sample, float]:
    status, text = await http_get(local_url(instance.metrics_url, "/metrics"))
    assert status == 200
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}
