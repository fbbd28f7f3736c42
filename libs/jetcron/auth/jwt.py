"""NATS decentralized-auth JWTs (operator, account, user) signed with nkeys, and `.creds` files.

A small module over `nkeys` rather than the `nats-jwt` package: that one pins pytz < 2025, pulls in three more
libraries and calls itself not well tested; what the server needs is a JSON body and an ed25519 signature made
by nkeys (see docs/security.md). No cryptography here: signing and key generation are nkeys' (PyNaCl's).
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from dataclasses import dataclass
from typing import Any, Literal

import nkeys

Kind = Literal["operator", "account", "user"]
_PREFIX = {"operator": nkeys.PREFIX_BYTE_OPERATOR, "account": nkeys.PREFIX_BYTE_ACCOUNT,
           "user": nkeys.PREFIX_BYTE_USER}
_HEADER = {"typ": "JWT", "alg": "ed25519-nkey"}


@dataclass(frozen=True)
class Key:
    """An nkey pair: `public` names it (O..., A..., U...), `seed` (S...) signs and must stay secret."""

    public: str
    seed: str

    def sign(self, data: bytes) -> bytes:
        pair = nkeys.from_seed(self.seed.encode())
        try:
            signature: bytes = pair.sign(data)
        finally:
            pair.wipe()
        return signature


def new_key(kind: Kind) -> Key:
    seed = nkeys.encode_seed(secrets.token_bytes(32), _PREFIX[kind])
    return key_from_seed(seed.decode())


def key_from_seed(seed: str) -> Key:
    pair = nkeys.from_seed(seed.encode())
    try:
        return Key(public=pair.public_key.decode(), seed=seed)
    finally:
        pair.wipe()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def encode(claims: dict[str, Any], issuer: Key) -> str:
    """Sign `claims` (sub, name, nats, optional exp) as `issuer`; iat, iss and jti are filled in here."""
    body = {**claims, "iss": issuer.public, "iat": claims.get("iat") or _now()}
    body.pop("jti", None)
    # jti: the claims' own hash, as nats-io/jwt computes it (base32 of SHA-512/256, no padding).
    digest = hashlib.new("sha512_256", json.dumps(body, sort_keys=True).encode()).digest()
    body["jti"] = base64.b32encode(digest).decode().rstrip("=")
    signing_input = f"{_b64(json.dumps(_HEADER).encode())}.{_b64(json.dumps(body).encode())}"
    return f"{signing_input}.{_b64(issuer.sign(signing_input.encode()))}"


def decode(token: str) -> dict[str, Any]:
    """The claims of a JWT, unverified: for a client reading its own credential (who am I, where do my replies
    come); trust is the server's business, which verifies the whole chain up to the operator."""
    try:
        _header, body, _signature = token.strip().split(".")
        claims = json.loads(_unb64(body))
    except ValueError as exc:
        raise ValueError(f"not a valid NATS JWT: {type(exc).__name__}") from None
    if not isinstance(claims, dict):
        raise ValueError("not a valid NATS JWT: its claims are not an object")
    return claims


def _now() -> int:
    import time  # the one clock read: a JWT's issue time is wall-clock by definition

    return int(time.time())


BEGIN_JWT, END_JWT = "-----BEGIN NATS USER JWT-----", "------END NATS USER JWT------"
BEGIN_SEED, END_SEED = "-----BEGIN USER NKEY SEED-----", "------END USER NKEY SEED------"


def creds(user_jwt: str, user: Key) -> str:
    """The `.creds` file nats clients read (nats.connect(user_credentials=PATH))."""
    return (f"{BEGIN_JWT}\n{user_jwt}\n{END_JWT}\n\n"
            "************************* IMPORTANT *************************\n"
            "NKEY Seed printed below can be used to sign and prove identity.\n"
            "NKEYs are sensitive and should be treated as secrets.\n\n"
            f"{BEGIN_SEED}\n{user.seed}\n{END_SEED}\n\n"
            "*************************************************************\n")


def creds_jwt(text: str) -> str:
    """The user JWT out of a `.creds` file's text."""
    lines = text.splitlines()
    try:
        return lines[lines.index(BEGIN_JWT) + 1].strip()
    except (ValueError, IndexError):
        raise ValueError("not a NATS .creds file (no user JWT block)") from None
