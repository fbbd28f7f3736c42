"""Authentication and least privilege on the real server in operator mode: who may publish and subscribe to
what (the role x operation table of docs/security.md), refused and revoked credentials, tenants confined."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import nats.errors
import pytest
from harness import Services, mint, run_cli, wait_for

from jetcron.auth import jwt
from jetcron.auth.authority import Authority, mint_job
from jetcron.auth.roles import Role, job_inbox
from jetcron.bus.accounts import push_account
from jetcron.bus.connect import Identity
from jetcron.bus.server import EmbeddedNats
from jetcron.core.errors import Unauthorized
from jetcron.sdk.client import ApiError, Client
from jetcron.wire.subjects import checkpoint_subject

pytestmark = pytest.mark.timeout(90)


class Session:
    """One connection as one identity, collecting the permission errors the server sends it."""

    def __init__(self, nc: Any, errors: list[str]) -> None:
        self.nc, self.errors = nc, errors

    async def denied(self, action: str, subject: str) -> bool:
        """Publish to or subscribe on `subject`; True if the server answered with a permission violation."""
        self.errors.clear()
        if action == "pub":
            await self.nc.publish(subject, b"{}")
        else:
            await self.nc.subscribe(subject)
        # The server handles a PUB or SUB before the PING of this flush: its -ERR comes before the PONG.
        await self.nc.flush(timeout=5)
        await asyncio.sleep(0.05)
        return any("permissions violation" in e.lower() and subject.lower() in e.lower() for e in self.errors)


async def session(server: EmbeddedNats, creds: str) -> Session:
    errors: list[str] = []

    async def on_error(exc: Exception) -> None:
        errors.append(str(exc))

    identity = Identity(creds=creds)
    nc = await nats.connect(server.url, error_cb=on_error, allow_reconnect=False, **identity.options())
    return Session(nc, errors)


ACME, BETA, AGENT_A = {"tenant": "acme"}, {"tenant": "beta"}, {"agent_id": "agent-a"}

# (role, who, action, subject, allowed): the specification, written out rather than derived from roles.py.
TABLE = [
    (Role.TENANT, ACME, "pub", "jc.api.acme.jobs.create", True),
    (Role.TENANT, ACME, "pub", "jc.api.beta.jobs.list", False),
    (Role.TENANT, ACME, "pub", "jc.admin.tenants.set", False),
    (Role.TENANT, ACME, "pub", "$KV.jc_jobs.nightly", False),
    (Role.TENANT, ACME, "pub", "$JS.API.STREAM.INFO.KV_jc_runs", False),
    (Role.TENANT, ACME, "pub", "$JS.API.DIRECT.GET.KV_jc_runs", False),
    (Role.TENANT, ACME, "sub", "_INBOX.t-acme.x", True),
    (Role.TENANT, ACME, "sub", "_INBOX.t-beta.x", False),
    (Role.TENANT, ACME, "sub", "_INBOX.>", False),
    (Role.TENANT, ACME, "sub", "jc.logs.>", False),
    (Role.AGENT, AGENT_A, "sub", "jc.ctl.agent-a", True),
    (Role.AGENT, AGENT_A, "sub", "jc.ctl.agent-b", False),
    (Role.AGENT, AGENT_A, "sub", "jc.handoff.agent-a", True),
    (Role.AGENT, AGENT_A, "pub", "jc.report.finished.agent-a", True),
    (Role.AGENT, AGENT_A, "pub", "jc.report.finished.agent-b", False),
    (Role.AGENT, AGENT_A, "sub", "jc.report.>", False),
    (Role.AGENT, AGENT_A, "sub", "jc.handoff.agent-b", False),
    (Role.AGENT, AGENT_A, "pub", "jc.handoff.agent-b", False),
    (Role.AGENT, AGENT_A, "pub", "$JS.API.CONSUMER.MSG.NEXT.JC_ASSIGN.agent_agent-a", True),
    (Role.AGENT, AGENT_A, "pub", "$JS.API.CONSUMER.MSG.NEXT.JC_ASSIGN.agent_agent-b", False),
    (Role.AGENT, AGENT_A, "pub", "$JS.API.CONSUMER.DURABLE.CREATE.JC_ASSIGN.agent_agent-b", False),
    (Role.AGENT, AGENT_A, "pub", "$KV.jc_agents.agent-a", True),
    (Role.AGENT, AGENT_A, "pub", "$KV.jc_agents.agent-b", False),
    (Role.AGENT, AGENT_A, "pub", "jc.event.finished.agent-a", True),
    (Role.AGENT, AGENT_A, "pub", "jc.event.finished.agent-b", False),
    (Role.AGENT, AGENT_A, "pub", "jc.logs.job.20260101T000000000Z.agent-b", False),
    (Role.AGENT, AGENT_A, "pub", "$KV.jc_leases.run.agent-a.job.20260101T000000000Z", True),
    (Role.AGENT, AGENT_A, "pub", "$KV.jc_leases.run.agent-b.job.20260101T000000000Z", False),
    (Role.AGENT, AGENT_A, "pub", "$KV.jc_leases.run._revoker.job.20260101T000000000Z", False),
    (Role.AGENT, AGENT_A, "pub", "$KV.jc_leases.run.job.20260101T000000000Z", False),
    (Role.AGENT, AGENT_A, "pub", "$KV.jc_leases.gang.agent-a.job.20260101T000000000Z", True),
    (Role.AGENT, AGENT_A, "pub", "$KV.jc_leases.gang.agent-b.job.20260101T000000000Z", False),
    (Role.AGENT, AGENT_A, "pub", "$KV.jc_jobs.nightly", False),
    (Role.AGENT, AGENT_A, "pub", "$KV.jc_tenants.acme", False),
    (Role.AGENT, AGENT_A, "pub", "$KV.jc_placement.capacity", False),
    (Role.AGENT, AGENT_A, "pub", "$JS.API.STREAM.INFO.KV_jc_jobs", False),
    (Role.AGENT, AGENT_A, "pub", "$JS.API.STREAM.MSG.GET.KV_jc_jobs", False),
    (Role.AGENT, AGENT_A, "pub", "$JS.API.STREAM.MSG.GET.KV_jc_tenants", False),
    (Role.AGENT, AGENT_A, "pub", "$JS.API.STREAM.MSG.GET.KV_jc_placement", False),
    (Role.AGENT, AGENT_A, "pub", "jc.api.acme.jobs.list", False),
    (Role.TRIGGER, {}, "pub", "$KV.jc_cursors.nightly", True),
    (Role.TRIGGER, {}, "pub", "jc.place.normal", True),
    (Role.TRIGGER, {}, "pub", "$KV.jc_tenants.acme", False),
    (Role.TRIGGER, {}, "pub", "jc.assign.agent-a", False),
    (Role.PLACEMENT, {}, "pub", "jc.assign.agent-a", True),
    (Role.PLACEMENT, {}, "pub", "jc.handoff.agent-a", True),
    (Role.TRIGGER, {}, "pub", "jc.handoff.agent-a", False),
    (Role.TRACKER, {}, "pub", "jc.handoff.agent-a", False),
    (Role.PLACEMENT, {}, "pub", "$KV.jc_placement.capacity", True),
    (Role.PLACEMENT, {}, "pub", "$KV.jc_jobs.nightly", False),
    (Role.TRACKER, {}, "pub", "jc.dlq.nightly", True),
    (Role.TRACKER, {}, "sub", "jc.report.finished.agent-a", True),
    (Role.PLACEMENT, {}, "sub", "jc.report.finished.agent-a", False),
    (Role.TRACKER, {}, "pub", "jc.ctl.agent-a", True),
    (Role.TRACKER, {}, "pub", "$KV.jc_tenants.acme", False),
    (Role.TRACKER, {}, "pub", "$KV.jc_jobs.nightly", False),
    (Role.API, {}, "pub", "$KV.jc_jobs.nightly", True),
    (Role.API, {}, "pub", "$KV.jc_tenants.acme", True),
    (Role.API, {}, "sub", "jc.api.*.jobs.create", True),
    (Role.API, {}, "pub", "jc.assign.agent-a", False),
    (Role.API, {}, "pub", "jc.handoff.agent-a", False),
    (Role.API, {}, "pub", "$KV.jc_leases.run._revoker.job.20260101T000000000Z", True),
    (Role.API, {}, "pub", "$KV.jc_leases.run.agent-a.job.20260101T000000000Z", False),
    (Role.API, {}, "pub", "jc.ctl.agent-a", True),
    (Role.API, {}, "pub", "$KV.jc_leases.gang.agent-a.job.20260101T000000000Z", False),
    (Role.API, {}, "pub", "$KV.jc_tokens.0123456789abcdef", True),
    (Role.TRIGGER, {}, "pub", "$KV.jc_leases.run._revoker.job.20260101T000000000Z", True),
    (Role.TRIGGER, {}, "pub", "$JS.API.STREAM.MSG.GET.KV_jc_leases", True),
    (Role.TRIGGER, {}, "pub", "$KV.jc_leases.run.agent-a.job.20260101T000000000Z", False),
    (Role.TRIGGER, {}, "pub", "jc.ctl.agent-a", True),
    (Role.GATEWAY, {}, "pub", "$JS.API.CONSUMER.CREATE.KV_jc_tokens", True),
    (Role.GATEWAY, {}, "pub", "$KV.jc_tokens.0123456789abcdef", False),
    (Role.GATEWAY, {}, "pub", "$JS.API.STREAM.MSG.GET.KV_jc_runs", False),
    (Role.TENANT, ACME, "pub", "$JS.API.CONSUMER.CREATE.KV_jc_tokens", False),
    (Role.AGENT, AGENT_A, "pub", "$JS.API.STREAM.MSG.GET.KV_jc_tokens", False),
    (Role.GATEWAY, {}, "pub", "jc.api.acme.jobs.list", True),
    (Role.GATEWAY, {}, "pub", "$KV.jc_jobs.nightly", False),
    (Role.GATEWAY, {}, "sub", "jc.event.>", False),
    (Role.ADMIN, {}, "pub", "jc.admin.tenants.set", True),
    (Role.ADMIN, {}, "pub", "jc.api.acme.jobs.list", True),
    (Role.ADMIN, {}, "pub", "$JS.API.STREAM.INFO.KV_jc_runs", True),
    (Role.ADMIN, {}, "pub", "$KV.jc_jobs.nightly", False),
    (Role.ADMIN, {}, "pub", "$SRV.PING", True),
    (Role.TENANT, ACME, "pub", "$SRV.PING", False),
    (Role.TENANT, ACME, "pub", "jc.submit.acme", True),
    (Role.TENANT, ACME, "pub", "jc.submit.beta", False),
    (Role.TENANT, ACME, "pub", "$KV.jc_submissions.acme.req-1", False),
    (Role.AGENT, AGENT_A, "pub", "jc.submit.acme", False),
    (Role.API, {}, "pub", "$JS.API.CONSUMER.MSG.NEXT.JC_SUBMIT.api_intake", True),
    (Role.API, {}, "pub", "$KV.jc_submissions.acme.req-1", True),
    (Role.GATEWAY, {}, "pub", "jc.submit.acme", False),
    (Role.TRACKER, {}, "sub", "jc.tracker.runs", True),
    (Role.API, {}, "pub", "jc.tracker.runs", True),
    (Role.TENANT, ACME, "pub", "jc.tracker.runs", False),
    (Role.AGENT, AGENT_A, "sub", "jc.tracker.runs", False),
    # A latest join's marks: raised by the trigger and the tracker; each job's dependents: written by the api alone.
    (Role.TRIGGER, {}, "pub", "$KV.jc_joins.ran.report", True),
    (Role.TRIGGER, {}, "pub", "$KV.jc_joins.waiting.report", True),
    (Role.TRIGGER, {}, "pub", "$KV.jc_joins.dep.default.load.report", False),
    (Role.TRACKER, {}, "pub", "$KV.jc_joins.ok.load", True),
    (Role.TRACKER, {}, "pub", "$KV.jc_joins.dep.default.load.report", False),
    (Role.API, {}, "pub", "$KV.jc_joins.dep.default.load.report", True),
    (Role.API, {}, "pub", "$KV.jc_joins.ok.load", False),
    (Role.PLACEMENT, {}, "pub", "$KV.jc_joins.ok.load", False),
    (Role.AGENT, AGENT_A, "pub", "$KV.jc_joins.ok.load", False),
    (Role.AGENT, AGENT_A, "pub", "$JS.API.STREAM.MSG.GET.KV_jc_joins", False),
]


def _id(row: tuple[Role, dict[str, str], str, str, bool]) -> str:
    role, _, action, subject, allowed = row
    return f"{role.value}-{action}-{subject}-{'allowed' if allowed else 'denied'}"


async def test_every_role_may_do_exactly_what_the_table_says(secure_server: EmbeddedNats, authority: Authority,
                                                              tmp_path: Path) -> None:
    sessions: dict[str, Session] = {}
    try:
        mismatches = []
        for row in TABLE:
            role, who, action, subject, allowed = row
            key = f"{role.value}:{sorted(who.items())}"
            if key not in sessions:
                creds = mint(authority, tmp_path / f"{len(sessions)}.creds", role, **who)
                sessions[key] = await session(secure_server, creds)
            if await sessions[key].denied(action, subject) == allowed:
                mismatches.append(_id(row))
        assert mismatches == []
    finally:
        for s in sessions.values():
            await s.nc.close()


async def _refused(server: EmbeddedNats, **options: Any) -> str:
    with pytest.raises(nats.errors.Error) as caught:
        await nats.connect(server.url, allow_reconnect=False, max_reconnect_attempts=0, connect_timeout=3,
                           **options)
    return str(caught.value)


async def test_no_credential_a_foreign_one_and_a_revoked_one_are_refused(
        secure_server: EmbeddedNats, authority: Authority, tmp_path: Path) -> None:
    # Given no credential, and one minted by another installation's keys
    assert "Authorization Violation" in await _refused(secure_server)
    foreign = Authority.ensure(tmp_path / "other-auth")
    foreign_creds = mint(foreign, tmp_path / "foreign.creds", Role.ADMIN)
    assert "Authorization Violation" in await _refused(secure_server, user_credentials=foreign_creds)

    # Given a tenant credential that works, with a connection open on it
    creds = mint(authority, tmp_path / "acme.creds", Role.TENANT, tenant="acme")
    live = await session(secure_server, creds)
    closed = asyncio.Event()
    live.nc._closed_cb = lambda: closed.set()  # type: ignore[assignment]
    try:
        # When the admin revokes it and pushes the account to the running server (nothing restarts)
        issued = [i.public for i in authority.issued() if i.subject == "acme"]
        token = authority.revoke(issued)
        await push_account(secure_server.url, token, Identity(creds=str(authority.sys_creds())))

        # Then a new connection with it is refused, and the open one is dropped
        assert "Authorization Violation" in await _refused(secure_server, user_credentials=creds)
        await wait_for(lambda: not live.nc.is_connected, 10, what="the revoked connection to be dropped")
    finally:
        await live.nc.close()


async def test_the_sdk_names_a_refused_connection_and_a_refused_subject(
        secure_server: EmbeddedNats, authority: Authority, tmp_path: Path) -> None:
    with pytest.raises(Unauthorized, match="refused the connection"):
        await Client.connect(secure_server.url, timeout=2)
    agent = mint(authority, tmp_path / "agent.creds", Role.AGENT, agent_id="agent-a")
    client = await Client.connect(secure_server.url, timeout=10, identity=Identity(creds=agent))
    try:
        # An agent's credential may not ask the API anything: a named error at once, not a 10 s timeout
        loop = asyncio.get_running_loop()
        asked = loop.time()
        with pytest.raises(ApiError, match="refused it to this credential") as caught:
            await client.call("jobs.list")
        assert caught.value.code == "forbidden" and loop.time() - asked < 5
    finally:
        await client.close()


@pytest.fixture
async def tenants(secure_services: Services, authority: Authority,
                  tmp_path: Path) -> AsyncIterator[tuple[Client, Client, Client]]:
    """The api service with auth on, and SDK clients for tenants acme and beta and for the admin."""
    secure_services.start("api", "api")
    await secure_services["api"].wait_logged("api ready", 30)
    server = secure_services.server
    clients = []
    for name, role, who in (("acme", Role.TENANT, ACME), ("beta", Role.TENANT, BETA), ("admin", Role.ADMIN, {})):
        creds = mint(authority, tmp_path / f"{name}.creds", role, **who)
        clients.append(await Client.connect(server.url, timeout=10, identity=Identity(creds=creds)))
    try:
        yield clients[0], clients[1], clients[2]
    finally:
        for c in clients:
            await c.close()


def spec(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "command": ["true"], "schedule": {"kind": "cron", "cron": "0 3 * * *"}, **extra}


async def _not_found(call: Any) -> str:
    with pytest.raises(ApiError) as caught:
        await call
    assert caught.value.code == "not_found", caught.value
    return str(caught.value)


async def test_a_tenant_sees_and_touches_only_its_own_jobs_and_runs(tenants: tuple[Client, Client, Client]) -> None:
    acme, beta, admin = tenants
    # Given a job and a run of acme (the tenant comes from acme's credential, not from the body)
    job = await acme.call("jobs.create", {"spec": spec("nightly")})
    assert job["spec"]["tenant"] == "acme"
    run = await acme.call("jobs.trigger", {"name": "nightly"})
    assert run["tenant"] == "acme"

    # Then beta cannot learn that they exist: every verb answers exactly as for a missing name
    missing = await _not_found(beta.call("jobs.get", {"name": "no-such-job"}))
    assert await _not_found(beta.call("jobs.get", {"name": "nightly"})) == missing.replace("no-such-job", "nightly")
    for verb in ("jobs.pause", "jobs.resume", "jobs.delete", "jobs.trigger"):
        await _not_found(beta.call(verb, {"name": "nightly"}))
    await _not_found(beta.call("jobs.backfill", {"name": "nightly", "from": "2026-01-01T00:00:00Z",
                                                 "to": "2026-01-02T00:00:00Z"}))
    await _not_found(beta.call("jobs.update", {"spec": spec("nightly")}))
    for verb in ("runs.get", "runs.cancel", "runs.logs", "dlq.replay"):
        await _not_found(beta.call(verb, {"run_id": run["run_id"]}))
    assert (await beta.call("jobs.list"))["items"] == []
    assert (await beta.call("runs.list", {"job": "nightly"}))["items"] == []
    assert (await beta.call("runs.list"))["items"] == []

    # And a dependency on acme's job reads like a dependency on a job that does not exist
    with pytest.raises(ApiError, match="unknown job 'nightly'") as caught:
        await beta.call("jobs.create", {"spec": spec("after", depends_on=["nightly"])})
    assert caught.value.code == "invalid"

    # And names are per tenant: beta has a `nightly` of its own, and each tenant sees only its own
    theirs = await beta.call("jobs.create", {"spec": spec("nightly", command=["false"])})
    assert (theirs["spec"]["tenant"], theirs["version"]) == ("beta", 1)
    assert (await acme.call("jobs.get", {"name": "nightly"}))["job"]["spec"]["command"] == ["true"]
    assert (await beta.call("jobs.get", {"name": "nightly"}))["job"]["spec"]["command"] == ["false"]
    assert (await beta.call("jobs.trigger", {"name": "nightly"}))["run_id"].startswith("beta.nightly.")
    assert [r["tenant"] for r in (await beta.call("runs.list", {"job": "nightly"}))["items"]] == ["beta"]
    assert [r["run_id"] for r in (await acme.call("runs.list", {"job": "nightly"}))["items"]] == [run["run_id"]]
    assert (await admin.call("jobs.get", {"name": "acme.nightly"}))["job"]["spec"]["tenant"] == "acme"

    # And beta cannot put a job into acme's name space by writing the tenant in the body
    with pytest.raises(ApiError, match="set by your credential") as caught:
        await beta.call("jobs.create", {"spec": spec("sneaky", tenant="acme")})
    assert caught.value.field == "spec.tenant"

    # While acme and the admin see them
    assert [(j["spec"]["name"], j["spec"]["tenant"]) for j in (await acme.call("jobs.list"))["items"]] == [
        ("nightly", "acme")]
    assert (await admin.call("runs.get", {"run_id": run["run_id"]}))["tenant"] == "acme"
    assert (await acme.call("runs.cancel", {"run_id": run["run_id"]}))["state"] == "cancelled"


async def test_quotas_weights_and_agents_are_for_the_admin(tenants: tuple[Client, Client, Client]) -> None:
    acme, _, admin = tenants
    for verb, payload in (("tenants.set", {"tenant": "acme", "weight": 100}), ("tenants.list", {}),
                          ("agents.list", {}), ("cluster.status", {})):
        with pytest.raises(ApiError, match=f"{verb} is an admin verb") as caught:
            await acme.call(verb, payload)
        assert caught.value.code == "forbidden"
    assert (await admin.call("tenants.set", {"tenant": "acme", "weight": 5}))["weight"] == 5


async def test_the_cli_issues_a_tenant_credential_that_works_and_is_confined(
        secure_services: Services, authority: Authority, tmp_path: Path) -> None:
    secure_services.start("api", "api")
    await secure_services["api"].wait_logged("api ready", 30)
    url = secure_services.server.url
    creds = tmp_path / "acme-cli.creds"

    issued = run_cli(url, "tenants", "create", "acme", "--creds-out", str(creds), "--auth-dir", str(authority.root))
    assert issued.returncode == 0, issued.stderr
    assert f"written to {creds}" in issued.stdout

    created = run_cli(url, "--creds", str(creds), "jobs", "create", "hello", "--cron", "0 3 * * *", "--", "true")
    assert created.returncode == 0, created.stderr
    listed = run_cli(url, "--creds", str(creds), "tenants", "list")
    assert listed.returncode == 1 and "error (forbidden)" in listed.stderr
    anonymous = run_cli(url, "jobs", "list")
    assert anonymous.returncode == 1 and "error (unauthorized)" in anonymous.stderr


async def test_a_runs_credential_reaches_its_tenants_once_keys_and_nothing_else(
        secure_server: EmbeddedNats, authority: Authority) -> None:
    # Given a credential minted for a run of acme, as the api does for an agent (the agent keeps the seed)
    user = jwt.new_key("user")
    token = mint_job(authority.job_signer, authority.account.public, user.public, "acme", "acme.train.1", 60)
    identity = Identity(user_jwt=token, seed=user.seed, inbox=job_inbox("acme"))
    errors: list[str] = []

    async def on_error(exc: Exception) -> None:
        errors.append(str(exc))

    nc = await nats.connect(secure_server.url, error_cb=on_error, allow_reconnect=False, **identity.options())
    job = Session(nc, errors)
    try:
        # Then the scope of the job signing key decides, whatever the JWT asks for: its tenant's once() keys and
        # its own run's checkpoints, by subject
        own = checkpoint_subject("acme", "acme.train.1", "rec")
        for subject in ("$KV.jc_idem.once.acme.email", "$JS.API.DIRECT.GET.KV_jc_idem.$KV.jc_idem.once.acme.email",
                        "jc.room.acme", own, f"$JS.API.DIRECT.GET.JC_CKPT.{own}"):
            assert not await job.denied("pub", subject), subject
        assert not await job.denied("sub", "_INBOX.j-acme.x")
        other_run = checkpoint_subject("acme", "acme.train.2", "rec")
        other_tenant = checkpoint_subject("beta", "acme.train.1", "rec")
        for subject in ("$KV.jc_idem.once.beta.email", "$KV.jc_jobs.nightly", "jc.api.acme.jobs.list",
                        "$KV.jc_leases.run.agent-a.job.20260101T000000000Z", "jc.event.finished.agent-a",
                        "$JS.API.DIRECT.GET.KV_jc_idem.$KV.jc_idem.once.beta.email", "jc.room.beta",
                        other_run, other_tenant, f"$JS.API.DIRECT.GET.JC_CKPT.{other_run}",
                        f"$JS.API.DIRECT.GET.JC_CKPT.{other_tenant}", "$JS.API.DIRECT.GET.JC_CKPT",
                        "$JS.API.STREAM.MSG.GET.JC_CKPT", "$JS.API.STREAM.PURGE.JC_CKPT",
                        "$JS.API.STREAM.INFO.JC_CKPT", "$JS.API.STREAM.INFO.KV_jc_idem",
                        "$JS.API.STREAM.MSG.GET.KV_jc_idem", "$JS.API.DIRECT.GET.KV_jc_idem",
                        "$JS.API.STREAM.PURGE.OBJ_jc_checkpoints", "$O.jc_checkpoints.M.x",
                        "$JS.API.CONSUMER.CREATE.JC_CKPT", "$JS.API.CONSUMER.CREATE.KV_jc_idem"):
            assert await job.denied("pub", subject), subject
        assert await job.denied("sub", "_INBOX.j-beta.x")
    finally:
        await nc.close()


ONCE_SCRIPT = """
import os
from jetcron import once
with once(os.environ["JETCRON_IDEMPOTENCY_KEY"] + ":email") as first:
    print("first" if first else "again", flush=True)
print("agent creds leaked" if "JETCRON_NATS_CREDS" in os.environ else "no agent creds", flush=True)
"""


async def test_a_job_uses_once_with_its_own_credential_on_a_system_with_auth(
        secure_services: Services, authority: Authority, tmp_path: Path) -> None:
    # Given the whole system with auth on, every process with its own credential
    await secure_services.start_system(agents=1)
    admin = await Client.connect(secure_services.server.url, timeout=10,
                                 identity=Identity(creds=mint(authority, tmp_path / "admin.creds", Role.ADMIN)))
    try:
        # When a job calls once() (its process has no credential of the agent's)
        await admin.call("jobs.create", {"spec": {"name": "mailer", "command": [sys.executable, "-c", ONCE_SCRIPT],
                                                  "schedule": {"kind": "now"}, "tenant": "acme"}})

        async def finished() -> dict[str, Any] | None:
            runs = (await admin.call("runs.list", {"job": "acme.mailer"}))["items"]  # the admin names the key
            return runs[0] if runs and runs[0]["state"] in ("succeeded", "failed", "dead") else None

        run = await wait_for(finished, 30, what="mailer's run to end")
        output = (await admin.call("runs.logs", {"run_id": run["run_id"]}))["output"]
        # Then the effect was claimed through the run's own, tenant-scoped credential
        assert run["state"] == "succeeded", output
        assert output.split() == ["first", "no", "agent", "creds"]
    finally:
        await admin.close()
