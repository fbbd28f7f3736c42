"""Bearer tokens for the HTTP gateway: each bound to one tenant (or to the admin), revocable, stored hashed.

A token is `jct_<id>_<secret>`: the id names it (to list and revoke it), the secret proves it. Only the
SHA-256 of the secret is stored: the secret is 256 random bits, so a plain digest cannot be reversed and a
leaked bucket grants nothing (GitHub's and Stripe's API keys are kept the same way). Pure: no I/O here.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from datetime import datetime

import msgspec

PREFIX = "jct"
_TOKEN_RE = re.compile(rf"^{PREFIX}_([0-9a-f]{{16}})_([A-Za-z0-9_-]{{43}})$")
TOKEN_ID_RE = re.compile(r"^[0-9a-f]{16}$")


class TokenRecord(msgspec.Struct, frozen=True, kw_only=True):
    """What jc_tokens holds under the token's id: never the token itself."""

    token_id: str
    tenant: str | None
    """The tenant the token acts for; None: the admin (every tenant, the admin verbs)."""
    name: str = ""
    """The operator's label for it (who or what holds it)."""
    digest: str
    created_at: datetime


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def issue(tenant: str | None, name: str, now: datetime) -> tuple[str, TokenRecord]:
    """A new token (shown to its holder once) and the record that verifies it."""
    token_id, secret = secrets.token_hex(8), secrets.token_urlsafe(32)
    return (f"{PREFIX}_{token_id}_{secret}",
            TokenRecord(token_id=token_id, tenant=tenant, name=name, digest=_digest(secret), created_at=now))


def token_id_of(token: str) -> str | None:
    """The id a well-formed token names (None: not a jetcron token at all)."""
    found = _TOKEN_RE.fullmatch(token)
    return found.group(1) if found else None


def verify(token: str, record: TokenRecord | None) -> bool:
    """Whether `token` is the one `record` was issued for (a constant-time comparison of the digests)."""
    found = _TOKEN_RE.fullmatch(token)
    if found is None or record is None or record.token_id != found.group(1):
        return False
    return hmac.compare_digest(_digest(found.group(2)), record.digest)
