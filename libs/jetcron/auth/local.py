"""The credentials of a one-machine system (`jetcron up`): one per service role and agent, and the admin's."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from jetcron.auth.authority import Authority
from jetcron.auth.keyfile import ensure_key_file
from jetcron.auth.roles import Role

SERVICE_ROLES = {"api": Role.API, "trigger": Role.TRIGGER, "placement": Role.PLACEMENT,
                 "run_tracker": Role.TRACKER, "gateway": Role.GATEWAY, "notifier": Role.NOTIFIER}


@dataclass
class LocalCreds:
    authority: Authority
    root: Path

    @property
    def admin(self) -> Path:
        return self.root / "admin.creds"

    def path(self, process: str) -> Path:
        return self.root / "creds" / f"{process}.creds"

    @classmethod
    def ensure(cls, root: Path, agents: int) -> LocalCreds:
        """Keys and credentials made on the first start and kept after (a restart mints nothing new)."""
        local = cls(Authority.ensure(root), root)
        if not local.admin.exists():
            local.authority.write_creds(local.admin, Role.ADMIN)
        for process, role in SERVICE_ROLES.items():
            if not local.path(process).exists():
                local.authority.write_creds(local.path(process), role)
        for i in range(1, agents + 1):
            agent_id = f"agent-{i}"
            if not local.path(agent_id).exists():
                local.authority.write_creds(local.path(agent_id), Role.AGENT, agent_id=agent_id)
        return local

    def env(self, process: str) -> dict[str, str]:
        """What a child process needs to connect as itself (the api: also the key that signs runs' credentials)."""
        env = {"JETCRON_NATS_CREDS": str(self.path(process))}
        if process == "api":
            env["JETCRON_JOB_SIGNING_KEY_FILE"] = str(self.authority.job_minter())
        if process in ("api", "notifier") or process.startswith("agent"):
            env["JETCRON_SECRETS_KEY_FILE"] = str(ensure_key_file(self.root / "secrets.key"))
        return env
