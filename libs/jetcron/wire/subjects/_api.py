"""The API's subjects (a verb's, every tenant's and the admin's), the trackers' index, and service discovery."""

from __future__ import annotations

from jetcron.wire.subjects._names import PREFIX

API_SERVICE = "jetcron"
API_GROUP = f"{PREFIX}.api"
"""Tenant verbs: jc.api.<tenant>.<verb>. A tenant's credential may publish under its own tenant only, so the
API takes the tenant from the subject a request came in on, never from its body."""
ADMIN_GROUP = f"{PREFIX}.admin"
"""Admin verbs and every tenant's data: jc.admin.<verb>, open to the admin credential alone."""
API_QUEUE = "jetcron-api"


def api_subject(verb: str, tenant: str | None = None) -> str:
    """Where a verb is asked: for one tenant, or (tenant None) on the admin subject that sees every tenant."""
    return f"{ADMIN_GROUP}.{verb}" if tenant is None else f"{API_GROUP}.{tenant}.{verb}"


def api_endpoint(verb: str) -> tuple[str, str]:
    """The two subjects one verb is served on: every tenant's (a wildcard token) and the admin's."""
    return f"{API_GROUP}.*.{verb}", f"{ADMIN_GROUP}.{verb}"


def parse_api_subject(subject: str) -> str | None:
    """The tenant a request was made for (None: the admin subject)."""
    if subject.startswith(API_GROUP + "."):
        return subject.split(".", 3)[2]
    return None


TRACKER_RUNS = f"{PREFIX}.tracker.runs"
"""Core NATS request/reply: the non-terminal runs in one state, from the trackers' index (runs.list?state=)."""
TRACKER_RUNS_QUEUE = "run_tracker"


SRV_PING = "$SRV.PING"
"""nats.micro discovery: every service instance answers."""


def health_service_name(service: str) -> str:
    """The nats.micro service every instance registers so `$SRV.PING` finds it (api: also `jetcron`)."""
    return f"jetcron_{service}"
