"""The intake: a service publishes hand-written JSON to `jc.submit.<tenant>` with the plain nats client (no
jetcron code), and is done once JetStream acks it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import nats.errors
import pytest
from harness import Services, mint, wait_for
from nats.aio.client import Client as Nats

from jetcron.auth.authority import Authority
from jetcron.auth.roles import Role


@pytest.fixture
async def publisher(secure_services: Services, authority: Authority, tmp_path: Path) -> AsyncIterator[Nats]:
    """A plain nats-py connection with tenant acme's credential (its replies come under its own inbox)."""
    await secure_services.start_system(agents=1)
    nc = await nats.connect(secure_services.server.url, user_credentials=mint(
        authority, tmp_path / "acme.creds", Role.TENANT, tenant="acme"), inbox_prefix="_INBOX.t-acme")
    try:
        yield nc
    finally:
        await nc.close()


async def ask(nc: Nats, subject: str, body: dict[str, Any]) -> dict[str, Any]:
    reply = await nc.request(subject, json.dumps(body).encode(), timeout=10)
    answer: dict[str, Any] = json.loads(reply.data)
    return answer


async def outcome(nc: Nats, request_id: str) -> dict[str, Any]:
    async def settled() -> dict[str, Any] | None:
        answer = await ask(nc, "jc.api.acme.submissions.get", {"request_id": request_id})
        return answer["result"] if answer["ok"] else None

    found: dict[str, Any] = await wait_for(settled, 20, what=f"the outcome of {request_id}")
    return found


async def publish(nc: Nats, request_id: str, payload: bytes) -> Any:
    return await nc.jetstream().publish("jc.submit.acme", payload, headers={"Nats-Msg-Id": request_id}, timeout=5)


async def test_a_request_is_durable_once_acked_and_runs_once(publisher: Nats, secure_services: Services) -> None:
    # Given the api is down: the request is still taken, durably
    secure_services["api"].stop()
    body = {"spec": {"name": "from-intake", "command": ["sh", "-c", "echo via intake"], "schedule": {"kind": "now"}}}
    first = await publish(publisher, "req-1", json.dumps(body).encode())
    again = await publish(publisher, "req-1", json.dumps(body).encode())
    assert first.seq == again.seq and again.duplicate is True

    # When an api starts, the request becomes a job, and its outcome is kept under the request id
    await secure_services.start("api-2", "api").wait_logged("api ready", 30)
    created = await outcome(publisher, "req-1")
    assert (created["outcome"], created["job"], created["tenant"]) == ("created", "from-intake", "acme")

    async def finished() -> list[dict[str, Any]] | None:
        runs = (await ask(publisher, "jc.api.acme.runs.list", {"job": "from-intake"}))["result"]["items"]
        return runs if runs and runs[0]["state"] == "succeeded" else None

    runs = await wait_for(finished, 30, what="the intake job's run")
    assert len(runs) == 1


async def test_a_bad_request_is_rejected_once_with_the_field_named(publisher: Nats, secure_services: Services,
                                                                  authority: Authority, tmp_path: Path) -> None:
    await publish(publisher, "bad-1", json.dumps({"spec": {"name": "bad", "command": []}}).encode())
    await publish(publisher, "bad-2", b'{"spec": {"name": ')
    await publish(publisher, "bad-3", json.dumps({"spec": {"name": "x", "command": ["true"],
                                                           "tenant": "beta"}}).encode())
    rejected = [await outcome(publisher, f"bad-{i}") for i in (1, 2, 3)]
    assert [r["outcome"] for r in rejected] == ["rejected"] * 3
    assert [r["error"]["code"] for r in rejected] == ["invalid"] * 3
    assert rejected[0]["error"]["field"] == "command" and rejected[2]["error"]["field"] == "spec.tenant"
    assert "job" not in rejected[0] or rejected[0]["job"] == ""

    # settled once: nothing pending, nothing redelivered, no job stored
    admin = await nats.connect(secure_services.server.url,
                               user_credentials=mint(authority, tmp_path / "admin.creds", Role.ADMIN),
                               inbox_prefix="_INBOX.admin")
    try:
        info = await admin.jetstream().consumer_info("JC_SUBMIT", "api_intake")
        assert (info.num_pending, info.num_ack_pending, info.num_redelivered) == (0, 0, 0)
        jobs = json.loads((await admin.request("jc.admin.jobs.list", b"{}", timeout=10)).data)
        assert jobs["result"]["items"] == []
    finally:
        await admin.close()


async def test_a_tenant_submits_and_reads_only_its_own(publisher: Nats, secure_services: Services,
                                                      authority: Authority, tmp_path: Path) -> None:
    spec = {"name": "mine", "command": ["true"], "schedule": {"kind": "cron", "cron": "0 0 1 1 *"}}
    await publish(publisher, "mine-1", json.dumps({"spec": spec}).encode())
    assert (await outcome(publisher, "mine-1"))["outcome"] == "created"
    beta = await nats.connect(secure_services.server.url, inbox_prefix="_INBOX.t-beta", user_credentials=mint(
        authority, tmp_path / "beta.creds", Role.TENANT, tenant="beta"))
    try:
        theirs = await ask(beta, "jc.api.beta.submissions.get", {"request_id": "mine-1"})
        assert (theirs["ok"], theirs["error"]["code"]) == (False, "not_found")
        # and the server refuses a publish to another tenant's intake
        with pytest.raises((nats.errors.Error, TimeoutError)):
            await beta.jetstream().publish("jc.submit.acme", b"{}", timeout=2)
    finally:
        await beta.close()
