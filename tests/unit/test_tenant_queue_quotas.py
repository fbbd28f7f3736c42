"""tenants.set with quotas per named queue, on the twins: stored as given, a bad one refused naming the field and the
value with nothing stored; the tenant's other fields are checked as before."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from twin_support import twin_context

from jetcron.core.errors import InvalidSpec
from jetcron.core.models import QueueQuota, TenantPolicy
from jetcron_services.api.call import Call
from jetcron_services.api.tenants import Tenants


async def tenants_set(tenants: Tenants, request: dict[str, Any] | bytes) -> TenantPolicy:
    data = request if isinstance(request, bytes) else msgspec.json.encode(request)
    return await tenants.set(Call(data, None))


async def test_queue_quotas_are_stored_with_the_policy() -> None:
    ctx = twin_context()
    tenants = Tenants(ctx)
    policy = await tenants_set(tenants, {"tenant": "acme", "max_cpu": 10,
                                      "queues": {"batch": {"max_cpu": 8, "max_memory_mb": 16384, "max_gpus": 2},
                                                 "adhoc": {}}})
    assert policy.queues == {"batch": QueueQuota(max_cpu=8, max_memory_mb=16384, max_gpus=2), "adhoc": QueueQuota()}
    assert (await ctx.tenants.get("acme"))[0] == policy
    # a policy set without queues has none (the whole policy is replaced)
    assert (await tenants_set(tenants, {"tenant": "acme"})).queues == {}


@pytest.mark.parametrize(("queues", "match"), [
    pytest.param({"no/slash": {"max_cpu": 1}}, r"queues: a queue name must be .*\(got 'no/slash'\)", id="name"),
    pytest.param({"batch": {"max_cpu": -1}}, r"queues\.batch\.max_cpu: must be a number >= 0 .*\(got -1", id="cpu"),
    pytest.param({"batch": {"max_memory_mb": -1}}, r"queues\.batch\.max_memory_mb: .*\(got -1\)", id="memory"),
    pytest.param({"batch": {"max_gpus": 10**12}}, r"queues\.batch\.max_gpus: .*\(got 1000000000000\)", id="gpus"),
    pytest.param(b'{"batch": {"max_cpu": 1e400}}', r"queues\.batch\.max_cpu: .*\(got inf\)", id="overflows_to_inf"),
    pytest.param({"batch": {"cpu": 1}}, r"queues\.batch: Object contains unknown field `cpu` .*\(got \{'cpu': 1\}\)",
                 id="unknown_field"),
    pytest.param({"batch": {"max_gpus": 1.5}},
                 r"queues\.batch: Expected `int \| null`, got `float` - at `\$\.max_gpus` \(got \{'max_gpus': 1\.5\}\)",
                 id="fractional_gpus"),
    pytest.param({"batch": 8}, r"queues\.batch: Expected `object`, got `int` \(got 8\)", id="not_an_object"),
    pytest.param([1], r"Expected `object`, got `array`", id="queues_not_an_object"),
])
async def test_a_bad_queue_quota_is_refused_naming_it_and_nothing_is_stored(queues: Any, match: str) -> None:
    ctx = twin_context()
    tenants = Tenants(ctx)
    request = (b'{"tenant": "acme", "queues": ' + queues + b"}" if isinstance(queues, bytes)
               else {"tenant": "acme", "queues": queues})
    with pytest.raises(InvalidSpec, match=match):
        await tenants_set(tenants, request)
    assert await ctx.tenants.maybe("acme") is None


def test_the_rest_body_carries_queue_quotas_to_the_sdk_verb() -> None:
    import inspect

    from jetcron.sdk.verbs import Tenants
    from jetcron_services.gateway.admin import TenantPolicyBody

    body = msgspec.json.decode(b'{"weight": 2, "queues": {"batch": {"max_cpu": 8}}}', type=TenantPolicyBody)
    fields = msgspec.structs.asdict(body)
    assert fields["queues"] == {"batch": QueueQuota(max_cpu=8)}
    assert set(fields) <= set(inspect.signature(Tenants.set).parameters)  # PUT calls tenants.set(tenant, **fields)
    with pytest.raises(msgspec.ValidationError, match=r"unknown field `cpu`"):
        msgspec.json.decode(b'{"queues": {"batch": {"cpu": 8}}}', type=TenantPolicyBody)
