"""Credentials and the permission table, without a server: JWTs, the authority's files, who may do what."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from jetcron.auth import jwt, table
from jetcron.auth.authority import Authority, identity_of
from jetcron.auth.roles import Role, for_role, grant
from jetcron.cli.identity import resolve, write_context


def test_a_signed_jwt_decodes_to_its_claims_with_issuer_and_a_content_hash() -> None:
    issuer = jwt.new_key("account")
    token = jwt.encode({"sub": "UABC", "name": "x", "nats": {"type": "user", "version": 2}}, issuer)

    claims = jwt.decode(token)

    assert claims["iss"] == issuer.public and issuer.public.startswith("A")
    assert (claims["sub"], claims["nats"]["type"]) == ("UABC", "user")
    assert len(claims["jti"]) == 52  # base32 of a 32-byte SHA-512/256, unpadded
    header, _body, signature = token.split(".")
    assert json.loads(jwt._unb64(header)) == {"typ": "JWT", "alg": "ed25519-nkey"}
    assert len(jwt._unb64(signature)) == 64  # an ed25519 signature


@pytest.mark.parametrize("text", ["not-a-jwt", "a.b", "a.%%%.c"], ids=["no_dots", "two_parts", "bad_base64"])
def test_a_malformed_jwt_is_a_named_error(text: str) -> None:
    with pytest.raises(ValueError, match="not a valid NATS JWT"):
        jwt.decode(text)


def test_creds_file_round_trip_and_a_file_without_a_jwt_is_refused() -> None:
    user = jwt.new_key("user")
    text = jwt.creds("HEADER.BODY.SIG", user)
    assert jwt.creds_jwt(text) == "HEADER.BODY.SIG"
    assert user.seed in text and user.seed.startswith("SU")
    with pytest.raises(ValueError, match=r"not a NATS \.creds file"):
        jwt.creds_jwt("hello\n")


def test_the_authority_is_made_once_kept_private_and_reused(tmp_path: Path) -> None:
    root = tmp_path / "auth"
    first = Authority.ensure(root)
    again = Authority.ensure(root)

    assert (first.operator.public, first.account.public) == (again.operator.public, again.account.public)
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    for seed in ("operator.seed", "sys.seed", "account.seed", "signing.seed", "sys-user.creds"):
        assert stat.S_IMODE((root / seed).stat().st_mode) == 0o600, seed
    config = first.server_config()
    assert f"system_account: {first.system.public}" in config and "type: full" in config
    assert first.account.public in config and "seed" not in config.lower()


def test_a_minted_tenant_credential_says_who_it_is_and_is_signed_by_the_signing_key(tmp_path: Path) -> None:
    authority = Authority.ensure(tmp_path / "auth")
    issued = authority.write_creds(tmp_path / "acme.creds", Role.TENANT, tenant="acme", expires_in=60)

    text = (tmp_path / "acme.creds").read_text()
    claims = jwt.decode(jwt.creds_jwt(text))
    assert stat.S_IMODE((tmp_path / "acme.creds").stat().st_mode) == 0o600
    assert claims["iss"] == authority.signer.public
    assert claims["nats"]["issuer_account"] == authority.account.public
    assert claims["nats"]["pub"]["allow"] == ["jc.api.acme.>", "jc.submit.acme"]
    # its own replies, and its own tenant's notifications (rules with a `subject` target)
    assert claims["nats"]["sub"]["allow"] == ["_INBOX.t-acme.>", "jc.notify.acme.>"]
    assert claims["exp"] - claims["iat"] == 60
    assert identity_of(text) == {"role": "tenant", "tenant": "acme", "agent": None, "inbox": "_INBOX.t-acme"}
    assert [(i.public, i.role, i.subject) for i in authority.issued()] == [(issued.public, "tenant", "acme")]


def test_revoking_writes_a_new_account_jwt_listing_the_revoked_users(tmp_path: Path) -> None:
    authority = Authority.ensure(tmp_path / "auth")
    before = authority.account_jwt()
    _, issued = authority.mint(Role.TENANT, tenant="acme")

    token = authority.revoke([issued.public])

    assert token != before and authority.account_jwt() == token
    assert issued.public in jwt.decode(token)["nats"]["revocations"]
    assert issued.public in authority.revocations()


# --- the permission table ------------------------------------------------------------------------------


def test_a_tenant_reaches_only_its_own_api_verbs_and_no_stream_or_bucket() -> None:
    perms = for_role(Role.TENANT, tenant="acme")
    assert perms.pub == ("jc.api.acme.>", "jc.submit.acme")
    assert not any(p.startswith(("$JS", "$KV", "$O", "_INBOX.>")) for p in perms.pub + perms.sub)


def test_an_agents_grant_names_only_its_own_id() -> None:
    perms = for_role(Role.AGENT, agent_id="agent-a")
    own = [p for p in perms.pub + perms.sub if "agent-" in p]
    assert own and all("agent-a" in p for p in own)
    assert "$KV.jc_agents.agent-a" in perms.pub and "$KV.jc_agents.>" not in perms.pub
    assert "jc.event.*.agent-a" in perms.pub and "jc.event.>" not in perms.pub
    assert "jc.ctl.agent-a" in perms.sub
    for bucket in ("jc_jobs", "jc_tenants", "jc_placement", "jc_cursors", "jc_idem"):
        assert not any(f"$KV.{bucket}" in p for p in perms.pub), bucket
    assert not any(p.startswith("$JS.API.STREAM.CREATE") for p in perms.pub)


@pytest.mark.parametrize("role", [Role.API, Role.TRIGGER, Role.PLACEMENT, Role.TRACKER])
def test_core_services_answer_requests_from_their_own_inbox_only(role: Role) -> None:
    perms = for_role(role)
    assert f"_INBOX.{role.value}.>" in perms.sub and "_INBOX.>" not in perms.sub
    assert "_INBOX.>" in perms.pub  # replies go to whoever asked


def test_only_the_api_and_admin_may_write_tenants_and_only_the_trigger_cursors() -> None:
    writers = {role for role in Role if role not in (Role.AGENT, Role.TENANT)
               and "$KV.jc_tenants.>" in grant(role).writes}
    assert writers == {Role.API}
    assert {role for role in (Role.API, Role.TRIGGER, Role.PLACEMENT, Role.TRACKER, Role.GATEWAY)
            if "$KV.jc_cursors.>" in grant(role).writes} == {Role.TRIGGER}


@pytest.mark.parametrize(("role", "who"), [(Role.AGENT, {}), (Role.TENANT, {})], ids=["agent", "tenant"])
def test_a_grant_that_needs_a_name_refuses_without_one(role: Role, who: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="names its"):
        grant(role, **who)


# --- where the CLI finds its credential ----------------------------------------------------------------


def test_the_cli_uses_the_context_for_its_url_and_flags_win(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.chdir(tmp_path)
    write_context("nats://127.0.0.1:9", tmp_path / "admin.creds", None, tmp_path)

    assert resolve(None, None, None).identity.creds == str(tmp_path / "admin.creds")
    assert resolve(None, None, None).url == "nats://127.0.0.1:9"
    assert resolve(None, "mine.creds", None).identity.creds == "mine.creds"
    # another server than the context's: the context's credential is not offered to it
    other = resolve("nats://127.0.0.1:10", None, None)
    assert (other.url, other.identity.creds) == ("nats://127.0.0.1:10", None)


def test_the_permission_table_in_the_docs_is_the_one_the_code_grants() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "security.md").read_text()
    start, end = doc.index(table.START), doc.index(table.END) + len(table.END)
    stale = "docs/security.md is stale: run python -m jetcron.auth.table docs/security.md"
    assert doc[start:end] == table.render(), stale


@pytest.mark.parametrize(("agent", "attempt", "state", "why"), [
    pytest.param("a1", 1, "running", "", id="its_own_running_attempt"),
    pytest.param("a2", 1, "running", "not assigned to a2", id="another_agents_run"),
    pytest.param("a1", 2, "running", "at attempt 1, not 2", id="another_attempt"),
    pytest.param("a1", 1, "succeeded", "has ended", id="ended_run"),
])
def test_an_agent_gets_a_credential_only_for_an_attempt_it_holds(agent: str, attempt: int, state: str,
                                                                  why: str) -> None:
    from datetime import UTC, datetime

    from jetcron.core.models import Run, RunState
    from jetcron_services.api.mint import refusal

    now = datetime(2026, 12, 1, tzinfo=UTC)
    run = Run(run_id="job.20261201T000000000Z", job="job", state=RunState(state), attempt=1, scheduled_at=now,
              due_at=now, created_at=now, agent="a1", agents=["a1"])
    assert (why in refusal(run, agent, attempt)) if why else refusal(run, agent, attempt) == ""


@pytest.mark.parametrize(("tenant", "name", "key"), [
    pytest.param("default", "nightly", "nightly", id="default_tenant_bare_name"),
    pytest.param("acme", "nightly", "acme.nightly", id="tenant_qualified"),
])
def test_job_names_are_per_tenant_and_run_ids_start_with_the_jobs_key(tenant: str, name: str, key: str) -> None:
    from datetime import UTC, datetime

    from jetcron.core.ids import JOB_KEY_RE, RUN_ID_RE, job_key, job_of, manual_run_id, run_id, stamp_of

    assert job_key(tenant, name) == key and JOB_KEY_RE.match(key)
    rid = run_id(key, datetime(2026, 12, 2, 3, tzinfo=UTC))
    manual = manual_run_id(key, datetime(2026, 12, 2, 3, tzinfo=UTC), "k1")
    for r in (rid, manual, rid + "-r1"):
        assert RUN_ID_RE.match(r) and job_of(r) == key, r
    assert stamp_of(rid) == "20261202T030000000Z"
    assert not RUN_ID_RE.match("a.b.c.20261202T030000000Z") and not JOB_KEY_RE.match("a.b.c")
