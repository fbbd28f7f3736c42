"""Secrets: a value reaches its job's process and no stored byte, record, reply or log line."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Any

import pytest
from harness import Services, mint, wait_for

from jetcron.auth.authority import Authority
from jetcron.auth.roles import Role
from jetcron.bus.connect import Identity
from jetcron.sdk.client import ApiError, Client

STORED = "s3cret-in-the-store-7f2a"
ON_HOST = "s3cret-on-the-host-91bc"
CHECK = ('test "$(printf %s "$DB_PASSWORD" | sha256sum | cut -c1-64)" = "$1" && '
         'test "$(printf %s "$API_TOKEN" | sha256sum | cut -c1-64)" = "$2" && echo both-secrets-arrived')


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


async def _ended(client: Client, job: str) -> dict[str, Any]:
    async def ended() -> dict[str, Any] | None:
        runs = (await client.call("runs.list", {"job": job}))["items"]
        return runs[0] if runs and runs[0]["state"] in ("succeeded", "failed", "dead") else None

    found: dict[str, Any] = await wait_for(ended, 30, what=f"{job}'s run to end")
    return found


def _bytes_of(path: Path) -> bytes:
    """A file of the running server's store, or nothing when it went between the listing and the read (a temporary
    file renamed into place)."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""


async def test_a_secret_reaches_its_job_and_no_stored_byte(secure_services: Services, authority: Authority,
                                                          tmp_path: Path) -> None:
    # Given the system with auth on, an agent with a secret kept on its host, and one set by tenant acme
    host_dir = tmp_path / "agent-secrets"
    (host_dir / "acme").mkdir(parents=True)
    (host_dir / "acme" / "API_TOKEN").write_text(ON_HOST + "\n")
    await secure_services.start_system(agents=1, JETCRON_AGENT_SECRETS_DIR=str(host_dir))
    creds = mint(authority, tmp_path / "acme.creds", Role.TENANT, tenant="acme")
    acme = await Client.connect(secure_services.server.url, timeout=10, identity=Identity(creds=creds))
    try:
        stored = await acme.call("secrets.set", {"name": "DB_PASSWORD", "value": STORED})
        assert set(stored) == {"tenant", "name", "updated_at"} and stored["tenant"] == "acme"
        assert (await acme.call("secrets.list"))["items"] == ["DB_PASSWORD"]

        # When a job that names both runs (it checks their hashes, and prints neither)
        await acme.call("jobs.create", {"spec": {
            "name": "uses-secrets", "command": ["sh", "-c", CHECK, "sh", _sha(STORED), _sha(ON_HOST)],
            "schedule": {"kind": "now"}, "secrets": ["DB_PASSWORD", "API_TOKEN"]}})
        run = await _ended(acme, "uses-secrets")

        # Then both values reached the process
        output = (await acme.call("runs.logs", {"run_id": run["run_id"]}))["output"]
        assert run["state"] == "succeeded" and output == "both-secrets-arrived\n", (run, output)
        replies = [await acme.call("runs.get", {"run_id": run["run_id"]}),
                   await acme.call("jobs.get", {"name": "uses-secrets"}), await acme.call("secrets.list")]
    finally:
        await acme.close()

    # And neither value is in any reply, stored byte or log line: not in the clear, not in base64
    forms = [v.encode() for v in (STORED, ON_HOST)] + [base64.b64encode(v.encode()) for v in (STORED, ON_HOST)]
    assert not any(f.decode() in str(replies) for f in forms)
    # (listed twice: a temporary file renamed into place after the first listing is read by its new name)
    for _ in range(2):
        files = [p for node in secure_services.server.nodes for p in node.store_dir.rglob("*") if p.is_file()]
        files += [proc.log_path for proc in secure_services.procs.values()]
        assert len(files) > 10
        leaks = [str(p) for p in files if any(f in _bytes_of(p) for f in forms)]
        assert leaks == []


async def test_a_missing_secret_fails_the_start_naming_it_and_a_tenant_reads_no_other_tenants(
        secure_services: Services, authority: Authority, tmp_path: Path) -> None:
    await secure_services.start_system(agents=1)
    url = secure_services.server.url
    acme = await Client.connect(url, timeout=10, identity=Identity(
        creds=mint(authority, tmp_path / "acme.creds", Role.TENANT, tenant="acme")))
    beta = await Client.connect(url, timeout=10, identity=Identity(
        creds=mint(authority, tmp_path / "beta.creds", Role.TENANT, tenant="beta")))
    try:
        # Given acme's secret, beta cannot see or use it: beta's list is empty and its job misses it
        await acme.call("secrets.set", {"name": "DB_PASSWORD", "value": STORED})
        assert (await beta.call("secrets.list"))["items"] == []
        with pytest.raises(ApiError, match="set by your credential"):
            await beta.call("secrets.list", {"tenant": "acme"})
        await beta.call("jobs.create", {"spec": {"name": "needs", "command": ["true"], "schedule": {"kind": "now"},
                                                 "secrets": ["DB_PASSWORD"], "retry": {"max_attempts": 2}}})
        run = await _ended(beta, "needs")
        # Then the start failed, saying which secret, for each attempt of the policy and no more
        assert run["state"] == "dead" and run["attempt"] == 2
        assert "secret DB_PASSWORD of tenant beta is not set" in run["reason"]
        assert STORED not in str(run)
        # And a bad name is refused at the edge, naming the field
        with pytest.raises(ApiError, match="NATS_URL") as caught:
            await acme.call("secrets.set", {"name": "NATS_URL", "value": "x"})
        assert caught.value.field == "name"
    finally:
        await acme.close()
        await beta.close()
