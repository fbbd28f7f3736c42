"""Every bad input gets `invalid` naming the field through the real API: never `internal`, never silence,
nothing stored. Raw bytes, as a publisher in any language may send them."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from harness import Services

from jetcron.sdk.client import Client
from jetcron.wire import subjects as s

BIG = b"9" * 5000


def create(spec: bytes) -> bytes:
    return b'{"spec": ' + spec + b"}"


ROWS = [
    pytest.param(create(b'{"name": "a", "command": ["true"], "resources": {"cpu": ' + BIG + b"}}"), "body",
                 "out of any range", id="5000_digit_number"),
    pytest.param(create(b'{"name": "a", "command": ["true"], "retry": {"max_attempts": ' + BIG + b"}}"), "body",
                 "out of any range", id="5000_digit_integer"),
    pytest.param(create(b'{"name": "a\\ud800", "command": ["true"]}'), "spec.name", "unpaired surrogate",
                 id="surrogate_in_name"),
    pytest.param(create(b'{"name": "a", "command": ["true"], "env": {"A": "\\udc00"}}'), "spec.env.A",
                 "unpaired surrogate", id="surrogate_in_env_value"),
    pytest.param(create(b'{"name": "a", "command": ["true"], "env": {"\\ud800": "x"}}'), "spec.env",
                 "unpaired surrogate", id="surrogate_in_env_key"),
    pytest.param(create(b'{"name": "a", "command": ["true", "\\ud800"]}'), "spec.command[1]", "unpaired surrogate",
                 id="surrogate_in_argument"),
    pytest.param(create(b'{"name": "a", "command": ["true"], "require": {"zone": "\\ud800"}}'), "spec.require.zone",
                 "unpaired surrogate", id="surrogate_in_label"),
    pytest.param(create(b'{"name": "a", "command": ' + b"[" * 500 + b"]" * 500 + b"}"), "body",
                 "nested deeper than", id="deep_nesting"),
    pytest.param(create(b'{"name": "a", "command": ["true"], "env": {"NATS_URL": "nats://elsewhere"}}'),
                 "env.NATS_URL", "not allowed", id="reserved_nats_env"),
    pytest.param(create(b'{"name": "a", "command": ["true"], "env": {"JETCRON_RUN_ID": "x"}}'),
                 "env.JETCRON_RUN_ID", "not allowed", id="reserved_jetcron_env"),
    pytest.param(create(b'{"name": "a", "command": ["true"], "env": {"A=B": "x"}}'), "env.A=B",
                 "not a valid variable name", id="equals_in_env_name"),
    pytest.param(create(b'{"name": "a.b", "command": ["true"]}'), "name", "must be 1-63", id="dot_in_name"),
    pytest.param(create(b'{"name": "a*", "command": ["true"]}'), "name", "must be 1-63", id="star_in_name"),
    pytest.param(create(b'{"name": "a", "command": ["true"], "tenant": "t>"}'), "tenant", "must be 1-63",
                 id="gt_in_tenant"),
    pytest.param(create(b'{"name": "a", "command": ["true"], "require": {"zone": "e u"}}'), "require.zone",
                 "labels are", id="space_in_label"),
    pytest.param(b"x" * (70 * 1024), "body", "larger than", id="huge_body"),
    pytest.param(create(b'{"name": "a", "command": ["true"], "env": {"A\\u0000B": "x"}}'), "env.A\x00B",
                 "not a valid variable name", id="nul_in_env_name"),
    pytest.param(create(b'{"name": "a", "command": ["true"], "priority": 7}'), "spec.priority", "Expected",
                 id="wrong_type"),
    pytest.param(create(b'{"name": "a", "command": ["true"], "colour": "red"}'), "spec.colour", "unknown",
                 id="unknown_field"),
]


@pytest.mark.parametrize(("body", "field", "problem"), ROWS)
async def test_bad_input_is_invalid_naming_the_field_and_stores_nothing(
        services: Services, client: Client, body: bytes, field: str, problem: str,
        record_property: Callable[[str, object], None]) -> None:
    record_property("checks", f"`invalid` naming `{field}` ({problem}); nothing stored")
    services.start("api", "api")
    await services["api"].wait_logged("api ready", 30)

    reply = await client.nc.request(s.api_subject("jobs.create"), body, timeout=10)

    error = json.loads(reply.data)["error"]
    assert (error["code"], error["field"], error["retryable"]) == ("invalid", field, False), error
    assert problem in error["message"]
    assert (await client.call("jobs.list"))["items"] == []
