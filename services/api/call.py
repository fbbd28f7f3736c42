"""One API request as a verb sees it: its body and the tenant it was made for (from the subject, never the body)."""

from __future__ import annotations

from dataclasses import dataclass

from jetcron.core.errors import Forbidden


@dataclass(frozen=True, slots=True)
class Call:
    data: bytes
    """The request body (JSON)."""
    tenant: str | None
    """The tenant whose subject the request came in on (`jc.api.<tenant>.<verb>`); None on the admin subject
    (`jc.admin.<verb>`), which sees every tenant."""


def visible(owner: str, caller: str | None) -> bool:
    """Whether a caller may see what `owner` (a tenant) owns: its own tenant, or the admin (caller None)."""
    return caller is None or owner == caller


def admin_only(call: Call, verb: str) -> None:
    if call.tenant is not None:
        raise Forbidden(f"{verb} is an admin verb: tenant {call.tenant!r} may not use it")
