"""One API request as a verb sees it: its body and the tenant it was made for (from the subject, never the body)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Call:
    data: bytes
    """The request body (JSON)."""
    tenant: str | None
    """The tenant whose subject the request came in on (`jc.api.<tenant>.<verb>`); None on the admin subject
    (`jc.admin.<verb>`), which sees every tenant."""
