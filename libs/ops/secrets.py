"""Tenants' secrets, encrypted at rest: a KV bucket of Fernet tokens (`cryptography`) under a key that only the
api and the agents hold (a file, JETCRON_SECRETS_KEY_FILE). The stream, its history, its backups and every
server's disk hold ciphertext only; records of jobs and runs hold secret names only."""

from __future__ import annotations

from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken

from jetcron.bus.ports import Publisher, Streams
from jetcron.core.errors import Misconfigured, NotFound
from jetcron.wire import subjects as s


def _fernet(key_file: str | None) -> Fernet:
    if not key_file:
        raise Misconfigured("secrets need a key: set JETCRON_SECRETS_KEY_FILE (jetcron up makes one in auth/)")
    try:
        return Fernet(Path(key_file).read_bytes().strip())
    except (OSError, ValueError) as exc:
        raise Misconfigured(f"JETCRON_SECRETS_KEY_FILE={key_file}: not a usable key ({exc})") from None


def secret_key(tenant: str, name: str) -> str:
    return f"{tenant}.{name}"


class Secrets:
    """The store of tenants' secrets over the ports: a value is a KV put of its token into the secrets bucket (a
    publish onto the bucket's stream), read back as the key's last message; a delete purges every revision."""

    def __init__(self, publisher: Publisher, streams: Streams, key_file: str | None) -> None:
        self.publisher = publisher
        self.streams = streams
        self.key_file = key_file
        self.stream = s.kv_stream(s.BUCKET_SECRETS)

    async def put(self, tenant: str, name: str, value: str) -> None:
        token = _fernet(self.key_file).encrypt(value.encode())
        await self.publisher.publish(s.kv_subject(s.BUCKET_SECRETS, secret_key(tenant, name)), token)

    async def get(self, tenant: str, name: str) -> str:
        found = await self.streams.last(self.stream, s.kv_subject(s.BUCKET_SECRETS, secret_key(tenant, name)))
        if found is None:
            raise NotFound("secret", name)
        try:
            return _fernet(self.key_file).decrypt(found.data).decode()
        except InvalidToken:
            raise Misconfigured(f"secret {name} of {tenant} was encrypted under another key") from None

    async def delete(self, tenant: str, name: str) -> None:
        await self.get(tenant, name)  # NotFound for a name that is not there
        # every revision purged, no marker: no history of the ciphertext is kept either
        await self.streams.purge(self.stream, subject=s.kv_subject(s.BUCKET_SECRETS, secret_key(tenant, name)))

    async def names(self, tenant: str) -> list[str]:
        prefix = s.kv_subject(s.BUCKET_SECRETS, f"{tenant}.")
        held = await self.streams.counts(self.stream, prefix + "*")
        return sorted(subject[len(prefix):] for subject in held)


def from_file(directory: str | None, tenant: str, name: str) -> str | None:
    """A secret kept on the agent's host (`<dir>/<tenant>/<NAME>`), which wins over the store; None if absent."""
    if not directory:
        return None
    path = Path(directory) / tenant / name
    try:
        return path.read_text().rstrip("\n")
    except FileNotFoundError:
        return None
