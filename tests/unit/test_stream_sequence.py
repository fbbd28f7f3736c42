"""The stream sequence read from a delivery's reply subject agrees with nats-py's own parse, in both formats."""

from __future__ import annotations

import pytest
from nats.aio.msg import Msg

from jetcron.bus.ordered import stream_sequence

V1 = "$JS.ACK.KV_jc_runs.consumer-1.1.48213.77.1764840000123456789.12"
V2 = "$JS.ACK.hub.ACCHASH.KV_jc_runs.consumer-1.3.90001.5.1764840000123456789.0.rnd"


@pytest.mark.parametrize("reply", [V1, V2])
def test_the_stream_sequence_is_the_one_nats_py_parses(reply: str) -> None:
    assert stream_sequence(reply) == Msg.Metadata._from_reply(reply).sequence.stream
    assert stream_sequence(V1) == 48213 and stream_sequence(V2) == 90001


@pytest.mark.parametrize("reply", ["", "_INBOX.abc", "$JS.ACK.too.short", "$JS.NAK.a.b.1.2.3.4.5"])
def test_a_reply_that_is_not_a_delivery_is_refused_naming_it(reply: str) -> None:
    with pytest.raises(ValueError, match="not a JetStream delivery: reply subject"):
        stream_sequence(reply)
