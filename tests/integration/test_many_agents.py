"""An agent's assignments come through a durable consumer of its own on JC_ASSIGN. nats-server takes 1,000
consumers on a stream whose max_consumers is unset and refuses the next, so the topology sets it (agents_max): a
1,001st agent registers like the first."""

from __future__ import annotations

import nats
import pytest

from jetcron.bus.consume import ServerConsumers
from jetcron.bus.server import EmbeddedNats
from jetcron.bus.topology import Limits, agent_durable, ensure_topology
from jetcron.core.errors import Misconfigured
from jetcron.wire import subjects as s


async def test_a_thousand_and_first_agent_gets_its_consumer_and_the_limit_is_a_setting(
        nats_server: EmbeddedNats) -> None:
    nc = await nats.connect(nats_server.url)
    try:
        js = nc.jetstream(timeout=10)
        await ensure_topology(js, limits=Limits(agents_max=1_001))
        consumers = ServerConsumers(js)
        names = [await consumers.ensure(s.STREAM_ASSIGN, agent_durable(f"agent-{i}")) for i in range(1_001)]
        assert names[-1] == s.assign_consumer("agent-1000")
        assert (await js.stream_info(s.STREAM_ASSIGN)).state.consumer_count == 1_001
        # The limit is the setting's: one more is refused, saying which setting raises it
        with pytest.raises(Misconfigured) as refused:
            await consumers.ensure(s.STREAM_ASSIGN, agent_durable("agent-1001"))
        assert str(refused.value) == (
            f"make consumer {s.STREAM_ASSIGN}/{s.assign_consumer('agent-1001')}: {s.STREAM_ASSIGN} takes no more "
            "consumers (its max_consumers; each agent has one on the assignment stream: raise JETCRON_AGENTS_MAX)")
    finally:
        await nc.close()
