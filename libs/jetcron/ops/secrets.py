"""Tenants' secrets, encrypted at rest under a key that only the api and the agents hold (a file,
JETCRON_SECRETS_KEY_FILE). The stream, its history, its backups and every server's disk hold ciphertext only; records
of jobs and runs hold secret names only.

A value is sealed with AES-256-GCM under a key derived from the key file (HKDF-SHA256), with its tenant and name as
associated data, and stored as `jcs2:` + base64url(nonce, ciphertext and tag): a ciphertext copied or moved to
another tenant's or another name's key does not open, so whoever can write the bucket but lacks the key cannot hand
one tenant's secret to another tenant's jobs. A value without the marker is a Fernet token (`cryptography`), which
binds neither: it is still read, and `secrets set` seals it anew (docs/security.md, "Secrets")."""

from __future__ import annotations

import base64
import binascii
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from jetcron.bus.ports import Publisher, Streams
from jetcron.core.errors import Misconfigured, NotFound
from jetcron.wire import subjects as s

SEALED = b"jcs2:"
"""What a value sealed with its tenant and name starts with (a Fernet token starts with `gAAAAA`)."""
_NONCE = 12
# A key of its own for AES-GCM, so the key file's bytes are never used by two ciphers.
_AEAD_INFO = b"jetcron secrets: AES-256-GCM, bound to tenant and name"


@dataclass(frozen=True)
class SecretsKey:
    """The two ciphers over the key file: `aead` seals new values, `fernet` opens the unbound ones still stored."""

    fernet: Fernet
    aead: AESGCM

    @classmethod
    def of(cls, key: bytes) -> SecretsKey:
        """From the key file's text (a Fernet key: 32 bytes, base64url); ValueError for anything else."""
        fernet = Fernet(key)
        derived = HKDF(algorithm=SHA256(), length=32, salt=None, info=_AEAD_INFO).derive(base64.urlsafe_b64decode(key))
        return cls(fernet=fernet, aead=AESGCM(derived))


def _key(key_file: str | None) -> SecretsKey:
    if not key_file:
        raise Misconfigured("secrets need a key: set JETCRON_SECRETS_KEY_FILE (jetcron up makes one in auth/)")
    try:
        return SecretsKey.of(Path(key_file).read_bytes().strip())
    except (OSError, ValueError) as exc:
        raise Misconfigured(f"JETCRON_SECRETS_KEY_FILE={key_file}: not a usable key ({exc})") from None


def _bound_to(tenant: str, name: str) -> bytes:
    # NUL cannot occur in a tenant or a secret name: the pair reads back one way only.
    return b"jetcron secret\x00" + tenant.encode() + b"\x00" + name.encode()


def seal(key: SecretsKey, tenant: str, name: str, value: str) -> bytes:
    """`value` encrypted for secret `name` of `tenant` alone."""
    nonce = os.urandom(_NONCE)
    return SEALED + base64.urlsafe_b64encode(nonce + key.aead.encrypt(nonce, value.encode(), _bound_to(tenant, name)))


def unseal(key: SecretsKey, tenant: str, name: str, stored: bytes) -> str:
    """The value stored under secret `name` of `tenant`; Misconfigured, naming both, when it does not open: another
    key sealed it, or it was sealed for another tenant or name and copied here."""
    if stored.startswith(SEALED):
        try:
            raw = base64.urlsafe_b64decode(stored[len(SEALED):])
            return key.aead.decrypt(raw[:_NONCE], raw[_NONCE:], _bound_to(tenant, name)).decode()
        except (InvalidTag, ValueError, binascii.Error):
            raise Misconfigured(f"secret {name} of tenant {tenant} does not decrypt: it was sealed under another key, "
                                "or for another tenant or name and copied here (set it again)") from None
    try:
        return key.fernet.decrypt(stored).decode()
    except InvalidToken:
        raise Misconfigured(f"secret {name} of {tenant} was encrypted under another key") from None


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
        sealed = seal(_key(self.key_file), tenant, name, value)
        await self.publisher.publish(s.kv_subject(s.BUCKET_SECRETS, secret_key(tenant, name)), sealed)

    async def get(self, tenant: str, name: str) -> str:
        found = await self.streams.last(self.stream, s.kv_subject(s.BUCKET_SECRETS, secret_key(tenant, name)))
        if found is None:
            raise NotFound("secret", name)
        return unseal(_key(self.key_file), tenant, name, found.data)

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
