"""Settings: the keys tenants' secrets and runs' own credentials are made with."""

from __future__ import annotations

from pydantic import Field

from jetcron.config.group import SettingsGroup


class CredentialSettings(SettingsGroup):
    """Where the secrets key, an agent's local secrets and the job signing key are, and how long a run's
    credential lives."""

    secrets_key_file: str | None = None
    """api and agents: the key tenants' secrets are encrypted under (`jetcron up` makes auth/secrets.key)."""
    agent_secrets_dir: str | None = None
    """agents: a folder of secrets kept on this host, <dir>/<tenant>/<NAME>; one there wins over the store."""
    job_signing_key_file: str | None = None
    """api only: the seed of the scoped job signing key (auth/job-signing.seed). Set, the api answers agents'
    requests for a run's own short-lived credential (jobs use it for once() and checkpoints); unset, jobs get
    none."""
    job_credential_seconds: float = Field(default=21600.0, gt=0)
    """How long a run's credential lives when its job has no timeout (with a timeout: the timeout, plus 10 min)."""
