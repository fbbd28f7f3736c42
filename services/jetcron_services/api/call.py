"""One API request as a verb sees it: its body and the tenant it was made for (from the subject, never the body)."""

from __future__ import annotations

from dataclasses import dataclass

from jetcron.core.errors import Forbidden, InvalidSpec, NotFound
from jetcron.core.ids import JOB_KEY_RE, JOB_NAME_RE, job_key


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


def job_named(name: str | None, tenant: str | None, field: str = "name") -> str:
    """The key of the job a caller names: a tenant names its own jobs (`nightly`), the admin any by its key
    (`acme.nightly`). A key from a tenant names another tenant's job, so it reads as missing (NotFound), as that
    job would; a name no job could have is invalid."""
    if name is None or not JOB_KEY_RE.fullmatch(name):
        raise InvalidSpec(field, name, "is not a valid job name")
    if tenant is None:
        return name
    if not JOB_NAME_RE.fullmatch(name):
        raise NotFound("job", name)
    return job_key(tenant, name)
