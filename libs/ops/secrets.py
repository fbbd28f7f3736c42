"""Tenants' secrets, encrypted at rest: a KV bucket of Fernet tokens (`cryptography`) under a key that only the
api and the agents hold (a file, JETCRON_SECRETS_KEY_FILE). The stream, its history, its backups and every
server's disk hold ciphertext only; records of jobs and runs hold secret names only."""

from __future__ import annotations

from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken

from jetcron.bus.kv import bind, scan_keys, translate
from jetcron.bus.ports import JetStream
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
    def __init__(self, js: JetStream, key_file: str | None) -> None:
        self.js = js
        self.kv = bind(js, s.BUCKET_SECRETS)
        self.key_file = key_file

    async def put(self, tenant: str, name: str, value: str) -> None:
        token = _fernet(self.key_file).encrypt(value.encode())
        try:
            await self.kv.put(secret_key(tenant, name), token)
        except Exception as exc:
            raise translate(exc, f"secret {name}") from exc

    async def get(self, tenant: str, name: str) -> str:
        try:
            entry = await self.kv.get(secret_key(tenant, name))
        except Exception as exc:
            if type(exc).__name__ in ("KeyNotFoundError", "KeyDeletedError"):
                raise NotFound("secret", name) from None
            raise translate(exc, f"secret {name}") from exc
        if not entry.value:
            raise NotFound("secret", name)
        try:
            return _fernet(self.key_file).decrypt(entry.value).decode()
        except InvalidToken:
            raise Misconfigured(f"secret {name} of {tenant} was encrypted under another key") from None

    async def delete(self, tenant: str, name: str) -> None:
        await self.get(tenant, name)  # NotFound for a name that is not there
        await self.kv.purge(secret_key(tenant, name))  # no history of the ciphertext kept either

    async def names(self, tenant: str) -> list[str]:
        return sorted(key.split(".", 1)[1] for key in await scan_keys(self.js, s.BUCKET_SECRETS, f"{tenant}.*"))


def from_file(directory: str | None, tenant: str, name: str) -> str | None:
    """A secret kept on the agent's host (`<dir>/<tenant>/<NAME>`), which wins over the store; None if absent."""
    if not directory:
        return None
    path = Path(directory) / tenant / name
    try:
        return path.read_text().rstrip("\n")
    except FileNotFoundError:
        return None
