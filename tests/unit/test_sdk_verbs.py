"""The SDK's typed methods (libs/jetcron/sdk/verbs.py) against the contract (libs/jetcron/wire/verbs.py): every verb
`noun.action` has `client.noun.action`, returning the verb's reply type and sending that verb with the fields its
request struct reads (all of its required ones among them); every other public method of a group is a helper named here;
the blocking SyncClient has every group."""

from __future__ import annotations

import inspect
import re
import typing
from pathlib import Path
from typing import Any

import msgspec
import pytest

from jetcron.bus.memory import MemoryRpc
from jetcron.sdk.client import Client, SyncClient
from jetcron.sdk.verbs import Blocking, Verbs, _Group
from jetcron.wire.verbs import VERBS

HELPERS = {"runs.latest": "runs.list with latest=True, its page's one run or None"}
"""SDK methods that are not verbs of their own, and what they do instead."""


class Sent(Exception):
    pass


class Recorder:
    """The SDK's caller: keeps the verb and payload of the one call a method makes, then stops it."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []

    async def call(self, verb: str, payload: dict[str, Any] | None = None) -> Any:
        self.sent.append((verb, payload or {}))
        raise Sent


def _groups(caller: Any) -> dict[str, _Group]:
    return {name: group for name, group in vars(Verbs(caller)).items() if isinstance(group, _Group)}


def _method(caller: Any, verb: str) -> Any:
    noun, action = verb.split(".")
    group = _groups(caller).get(noun)
    assert group is not None, f"the SDK has no group for {noun} (Verbs.{noun} in libs/jetcron/sdk/verbs.py)"
    method = getattr(group, action, None)
    assert method is not None, f"the SDK has no method for {verb} ({type(group).__name__}.{action})"
    return method


@pytest.mark.parametrize("verb", list(VERBS))
def test_every_verb_has_a_typed_method_answering_its_reply_type(verb: str) -> None:
    assert typing.get_type_hints(_method(Recorder(), verb))["return"] == VERBS[verb].reply


@pytest.mark.parametrize("verb", list(VERBS))
async def test_a_verbs_method_sends_that_verb_with_its_requests_fields(verb: str) -> None:
    caller = Recorder()
    method = _method(caller, verb)
    # Every parameter given: a value of the wrong type is fine here, the api's check is not what is tested.
    given = {name: "x" for name in inspect.signature(method).parameters}
    with pytest.raises(Sent):
        await method(**given)
    [(sent, payload)] = caller.sent
    fields = msgspec.structs.fields(VERBS[verb].request)
    assert sent == verb
    assert set(payload) <= {f.encode_name for f in fields}, "a field the request struct does not read"
    assert {f.encode_name for f in fields if f.required} <= set(payload), "a required field the method cannot send"


def test_every_other_public_method_is_a_helper_named_here() -> None:
    public = {f"{noun}.{name}" for noun, group in _groups(Recorder()).items()
              for name, _ in inspect.getmembers(group, inspect.ismethod) if not name.startswith("_")}
    assert public - set(VERBS) == set(HELPERS)


def test_the_sync_client_has_every_group(monkeypatch: pytest.MonkeyPatch) -> None:
    async def connect(*_: Any, **__: Any) -> Client:
        return Client(rpc=MemoryRpc())

    monkeypatch.setattr(Client, "connect", connect)
    sync = SyncClient("nats://127.0.0.1:1")
    try:
        assert {name for name, group in vars(sync).items() if isinstance(group, Blocking)} == set(_groups(Recorder()))
    finally:
        sync.loop.close()


def test_the_sdk_guide_names_every_group() -> None:
    guide = (Path(__file__).resolve().parents[2] / "docs" / "sdk.md").read_text()
    named = set(re.findall(r"`(\w+)`", guide.split("in the groups", 1)[1].split("(docs/", 1)[0]))
    assert named == set(_groups(Recorder()))
