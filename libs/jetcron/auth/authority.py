"""The keys of one jetcron installation: operator, accounts, and the credentials minted from them.

Decentralized NATS auth (docs/security.md): an operator signs two accounts, `SYS` (the server's own) and
`JETCRON` (everything jetcron does, JetStream on); every user, service, agent, tenant or admin, is signed by the
JETCRON account's signing key with the permissions of its role (jetcron.auth.roles). The servers trust the operator
alone, so users are minted and revoked at run time without touching any server's config: a revocation is a new
account JWT pushed to `$SYS.REQ.CLAIMS.UPDATE`, which the servers' full resolver stores and shares.

Everything lives in one directory, mode 0700, seeds in files of mode 0600; only the admin's host keeps it.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jetcron.auth import jwt
from jetcron.auth.roles import RUN_TAG, Role, for_role, inbox, job_template
from jetcron.wire.subjects import checkpoint_token

ACCOUNT_NAME = "JETCRON"
_UNLIMITED = {"subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1, "wildcards": True, "conn": -1,
              "leaf": -1}
# An account JWT without JetStream limits has no JetStream at all (10039, docs/decisions-nats.md): -1 is "no limit".
_JETSTREAM = {"mem_storage": -1, "disk_storage": -1, "streams": -1, "consumer": -1, "max_ack_pending": -1,
              "mem_max_stream_bytes": -1, "disk_max_stream_bytes": -1, "max_bytes_required": False}


@dataclass(frozen=True)
class Issued:
    """One minted credential, as the ledger keeps it (its public key, never its seed)."""

    public: str
    role: str
    subject: str
    """The agent id, the tenant, or the role name."""
    issued_at: int


def _write_secret(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(path, 0o600)


class Authority:
    """The operator and account keys in `root`; `Authority.ensure(root)` makes them on first use."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.operator = jwt.key_from_seed(self._read("operator.seed"))
        self.system = jwt.key_from_seed(self._read("sys.seed"))
        self.account = jwt.key_from_seed(self._read("account.seed"))
        self.signer = jwt.key_from_seed(self._read("signing.seed"))
        self.job_signer = jwt.key_from_seed(self._read("job-signing.seed"))

    def _read(self, name: str) -> str:
        return (self.root / name).read_text().strip()

    @classmethod
    def exists(cls, root: Path) -> bool:
        return (root / "operator.jwt").exists()

    @classmethod
    def ensure(cls, root: Path) -> Authority:
        """The authority in `root`, created with fresh keys if there is none yet (kept as it is if there is)."""
        if not cls.exists(root):
            root.mkdir(parents=True, exist_ok=True, mode=0o700)
            os.chmod(root, 0o700)
            for name, kind in (("operator", "operator"), ("sys", "account"), ("account", "account"),
                               ("signing", "account"), ("job-signing", "account")):
                _write_secret(root / f"{name}.seed", jwt.new_key(kind).seed)  # type: ignore[arg-type]
            authority = cls(root)
            authority._write_account({})
            (root / "sys.jwt").write_text(jwt.encode({"sub": authority.system.public, "name": "SYS", "nats": {
                "type": "account", "version": 2, "limits": _UNLIMITED}}, authority.operator))
            (root / "operator.jwt").write_text(jwt.encode({"sub": authority.operator.public, "name": "jetcron",
                                                           "nats": {"type": "operator", "version": 2,
                                                                    "system_account": authority.system.public}},
                                                          authority.operator))
            sys_user = jwt.new_key("user")
            _write_secret(root / "sys-user.creds", jwt.creds(jwt.encode(
                {"sub": sys_user.public, "name": "sys", "nats": {"type": "user", "version": 2, "subs": -1,
                                                                 "data": -1, "payload": -1}}, authority.system),
                sys_user))
        authority = cls(root)
        authority._keep_job_scope()
        return authority

    def _keep_job_scope(self) -> None:
        """Sign the account again when its job signing key's scope is not today's job_template(): keys made by an
        earlier release keep working, and a server started on this config (resolver_preload takes the newer JWT)
        or sent it (every revocation pushes the whole account JWT) holds runs' credentials to today's scope."""
        claims = jwt.decode(self.account_jwt())
        scopes = [k for k in claims.get("nats", {}).get("signing_keys", []) if isinstance(k, dict)]
        if not scopes or scopes[0].get("template") != job_template():
            self._write_account(self.revocations())

    # --- the account and its revocations --------------------------------------------------------------

    def revocations(self) -> dict[str, int]:
        path = self.root / "revocations.json"
        return dict(json.loads(path.read_text())) if path.exists() else {}

    def _write_account(self, revocations: dict[str, int]) -> str:
        token = jwt.encode({"sub": self.account.public, "name": ACCOUNT_NAME, "nats": {
            "type": "account", "version": 2, "limits": {**_UNLIMITED, **_JETSTREAM},
            "signing_keys": [self.signer.public, {"kind": "user_scope", "key": self.job_signer.public, "role": "job",
                                                  "template": job_template()}],
            "revocations": revocations,
            "default_permissions": {"pub": {}, "sub": {}}}}, self.operator)
        (self.root / "account.jwt").write_text(token)
        (self.root / "revocations.json").write_text(json.dumps(revocations, indent=1, sort_keys=True))
        return token

    def account_jwt(self) -> str:
        return self._read("account.jwt")

    def revoke(self, publics: list[str]) -> str:
        """A new account JWT revoking these users (every credential issued to them so far); push it with
        `push_account` (bus/authority_push) so running servers drop their connections."""
        now = int(time.time())
        revocations = self.revocations()
        for public in publics:
            revocations[public] = now
        return self._write_account(revocations)

    # --- the servers' side ------------------------------------------------------------------------------

    def server_config(self, resolver_dir: str | None = None) -> str:
        """The lines of a nats-server config that make it trust this operator (operator mode, full resolver).
        `resolver_dir`: where the server keeps account JWTs (a node's own volume in a deploy); default, beside
        the keys."""
        if resolver_dir is None:
            local = self.root / "resolver"
            local.mkdir(exist_ok=True, mode=0o700)
            resolver_dir = str(local)
        return "\n".join([
            # A client's CONNECT line carries its user JWT, permission lists and all: more than the 4 KiB default.
            "max_control_line: 65536",
            f'operator: "{self._read("operator.jwt")}"',
            f"system_account: {self.system.public}",
            "resolver: {",
            "  type: full",
            f'  dir: "{resolver_dir}"',
            "  allow_delete: false",
            '  interval: "2m"',
            "}",
            "resolver_preload: {",
            f'  {self.system.public}: "{self._read("sys.jwt")}"',
            f'  {self.account.public}: "{self.account_jwt()}"',
            "}",
        ])

    # --- users ------------------------------------------------------------------------------------------

    def mint(self, role: Role, *, agent_id: str = "", tenant: str = "", expires_in: float | None = None,
             name: str = "") -> tuple[str, Issued]:
        """A new user credential (.creds text) for one role, and its ledger entry."""
        user = jwt.new_key("user")
        perms = for_role(role, agent_id=agent_id, tenant=tenant)
        subject = agent_id or tenant or role.value
        claims: dict[str, Any] = {
            "sub": user.public, "name": name or f"{role.value}:{subject}",
            "nats": {"type": "user", "version": 2, "issuer_account": self.account.public,
                     "pub": {"allow": list(perms.pub)}, "sub": {"allow": list(perms.sub)},
                     "subs": -1, "data": -1, "payload": -1},
            # Not read by the server: tells our own clients who they are and where their replies come.
            "jetcron": {"role": role.value, "tenant": tenant or None, "agent": agent_id or None,
                        "inbox": inbox(role, agent_id=agent_id, tenant=tenant)},
        }
        now = int(time.time())
        if expires_in is not None:
            claims["exp"] = now + int(expires_in)
        token = jwt.encode(claims, self.signer)
        issued = Issued(public=user.public, role=role.value, subject=subject, issued_at=now)
        with (self.root / "issued.jsonl").open("a") as ledger:
            ledger.write(json.dumps(issued.__dict__) + "\n")
        return jwt.creds(token, user), issued

    def write_creds(self, path: Path, role: Role, *, agent_id: str = "", tenant: str = "",
                    expires_in: float | None = None) -> Issued:
        text, issued = self.mint(role, agent_id=agent_id, tenant=tenant, expires_in=expires_in)
        _write_secret(path, text)
        return issued

    def issued(self) -> list[Issued]:
        path = self.root / "issued.jsonl"
        if not path.exists():
            return []
        return [Issued(**json.loads(line)) for line in path.read_text().splitlines() if line.strip()]

    def job_minter(self) -> Path:
        """The seed of the scoped job signing key: what the api needs to mint runs' credentials, and all."""
        return self.root / "job-signing.seed"

    def sys_creds(self) -> Path:
        return self.root / "sys-user.creds"


def identity_of(creds_text: str) -> dict[str, Any]:
    """What a .creds file says of its holder (role, tenant, agent, inbox), from its JWT's jetcron claim."""
    claims = jwt.decode(jwt.creds_jwt(creds_text))
    found = claims.get("jetcron")
    return dict(found) if isinstance(found, dict) else {}


def mint_job(minter: jwt.Key, account: str, user_public: str, tenant: str, run_id: str, expires_in: float) -> str:
    """A run's own credential (its JWT; the agent keeps the seed): signed by the scoped job key, so it can do
    what roles.job_template() allows for `tenant` and the run `run_id` (its tag) and nothing else, until it
    expires."""
    now = int(time.time())
    return jwt.encode({"sub": user_public, "name": tenant, "exp": now + int(expires_in),
                       "nats": {"type": "user", "version": 2, "issuer_account": account,
                                "tags": [f"{RUN_TAG}:{checkpoint_token(run_id)}"]}}, minter)
