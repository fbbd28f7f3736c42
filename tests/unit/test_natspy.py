"""jetcron.bus.natspy against the installed nats-py, without a server: nats-py's own objects, built as its public calls
build them, and messages fed through its own delivery path. A failure here means the installed nats-py moved one
of the private names natspy relies on: change natspy (and only natspy) before raising the pin in pyproject.toml."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
from nats.aio.client import Client
from nats.aio.subscription import Subscription
from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig
from nats.js.kv import KeyValue

from jetcron.bus import natspy


class _Sent:
    """Stands in for the connection a subscription answers flow control on."""

    def __init__(self) -> None:
        self.subjects: list[str] = []

    async def publish(self, subject: str, payload: bytes = b"", **_: Any) -> None:
        self.subjects.append(subject)


def test_the_info_block_is_a_dict_on_the_client() -> None:
    info = natspy.server_info(Client())
    assert isinstance(info, dict) and info == {}


def test_a_jetstream_context_gives_its_connection_timeout_and_prefix() -> None:
    nc = Client()
    js = nc.jetstream(timeout=3.5)
    assert natspy.connection_of(js) is nc
    assert natspy.request_timeout(js) == 3.5
    assert natspy.api_prefix(js) == "$JS.API"
    assert natspy.api_prefix(nc.jetstream(domain="hub")) == "$JS.hub.API"


@pytest.mark.parametrize(("key", "valid"), [
    ("job.acme.nightly", True), ("a/b=c-d_e.F9", True), ("", False), (".a", False), ("a.", False),
    ("a b", False), ("a.*", False), ("a.>", False),
])
def test_keys_are_judged_as_nats_pys_key_value_judges_them(key: str, valid: bool) -> None:
    assert natspy.valid_key(key) is valid


async def test_a_jetstream_subscription_names_its_stream_and_consumer() -> None:
    nc = Client()
    js = nc.jetstream()
    push = JetStreamContext.PushSubscription(js, Subscription(nc, 1, "_INBOX.a"), "KV_jc_runs", "watch1")
    pull = JetStreamContext.PullSubscription(js, Subscription(nc, 2, "_INBOX.b"), "JC_PLACE", "placement", b"_INBOX.b")
    assert natspy.consumer_of(push) == ("KV_jc_runs", "watch1")
    assert natspy.consumer_of(pull) == ("JC_PLACE", "placement")
    assert natspy.consumer_of(Subscription(nc, 3, "plain")) is None
    assert natspy.consumer_of(KeyValue(name="b", stream="KV_b", pre="$KV.b.", js=js, direct=False)) is None


async def test_a_delivered_message_is_taken_and_the_flow_control_it_held_back_answered() -> None:
    """An ordered consumer's push subscription, made as `js.subscribe_bind` makes it; the client's own MSG path
    queues a message, then a flow control request that must wait until that message is taken."""
    nc = Client()
    js = nc.jetstream()
    sent = _Sent()
    sub = Subscription(sent, 1, "_INBOX.w")
    live = JetStreamContext.PushSubscription(js, sub, "KV_jc_runs", "watch1")
    sub._jsi = JetStreamContext._JSI(js=js, conn=nc, stream="KV_jc_runs", ordered=True, psub=live, sub=sub,
                                     ccreq=ConsumerConfig())
    nc._subs[1] = sub
    assert natspy.take_delivered(live) is None

    await nc._process_msg(1, b"_INBOX.w", b"$JS.ACK.KV_jc_runs.watch1.1.5.1.1700000000000000000.0", b"abc", b"")
    await nc._process_msg(1, b"_INBOX.w", b"$JS.FC.KV_jc_runs.x.y", b"",
                          b"NATS/1.0 100 FlowControl Request\r\n\r\n")
    await natspy.answer_flow_control(live)
    assert sent.subjects == []  # the message before it is still waiting: not yet

    assert (sub.pending_msgs, sub.pending_bytes) == (1, 3)
    msg = natspy.take_delivered(live)
    assert msg is not None and msg.data == b"abc"
    assert (sub.pending_msgs, sub.pending_bytes) == (0, 0)  # as nats-py's next_msg leaves them
    await natspy.answer_flow_control(live)
    assert sent.subjects == ["$JS.FC.KV_jc_runs.x.y"]
    await natspy.answer_flow_control(live)
    assert sent.subjects == ["$JS.FC.KV_jc_runs.x.y"]  # answered once
    assert natspy.take_delivered(live) is None


def _private_reads(path: Path) -> list[str]:
    """`x._name` on anything but self and cls, getattr(x, "_name"), and `from nats... import _name`."""
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            owner = node.value.id if isinstance(node.value, ast.Name) else ""
            if owner not in ("self", "cls") and (path.name, owner) not in _OWN:
                found.append(f"{path.name}:{node.lineno} {owner or '...'}.{node.attr}")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "setattr")
              and len(node.args) > 1 and isinstance(node.args[1], ast.Constant)
              and str(node.args[1].value).startswith("_")):
            found.append(f"{path.name}:{node.lineno} {node.func.id} {node.args[1].value}")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("nats"):
            found += [f"{path.name}:{node.lineno} import {a.name}" for a in node.names if a.name.startswith("_")]
    return found


_OWN = {("consume.py", "queue")}
"""A classmethod's instance of its own class (PullQueue.bind), not a nats-py object."""


def test_no_other_module_of_bus_reads_nats_pys_private_names() -> None:
    bus = Path(natspy.__file__).parent
    assert _private_reads(Path(natspy.__file__))  # the check sees them where they are
    assert [hit for path in sorted(bus.rglob("*.py")) if path.name != "natspy.py" for hit in _private_reads(path)] == []
