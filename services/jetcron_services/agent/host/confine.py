"""What a job's process is given: a clean environment and an unprivileged user (docs/security.md, "Agents and
jobs"). Pure functions over values, plus the one lookup of the job user (and of whether this agent can switch
users at all) at the agent's start."""

from __future__ import annotations

import os
import pwd
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from jetcron.core.errors import Misconfigured

AS_AGENT = "@agent"
"""JETCRON_AGENT_JOB_USER value: run jobs as the agent's own user, no switch."""
SWITCH_CAPABILITIES = {"CAP_CHOWN": 0, "CAP_DAC_OVERRIDE": 1, "CAP_KILL": 5, "CAP_SETGID": 6, "CAP_SETUID": 7}
"""What running jobs as other users takes, by capability number: the switch itself (SETUID, SETGID, and SETGID to
clear the supplementary groups), a scratch handed to the job's user (CHOWN) and removed with whatever the job
left in it (DAC_OVERRIDE), and a uid's leftover processes killed (KILL)."""


@dataclass(frozen=True)
class JobUser:
    """Who a job runs as: `uid`/`gid` to switch to, or None to stay the agent's user."""

    name: str
    uid: int | None
    gid: int | None
    home: str
    cannot_switch: str | None = None
    """Why the agent cannot run jobs as another user (None: it can, or it was asked not to: @agent)."""


def cannot_switch(euid: int, status: str) -> str | None:
    """Why this agent cannot run jobs as other users (None: it can), from its /proc/self/status. Root needs
    CAP_SETUID and CAP_SETGID (a container may have dropped them); an agent that is not root needs every one of
    SWITCH_CAPABILITIES, effective and ambient (only ambient capabilities reach the launcher it execs to set a child
    up: jetcron-launch, or its twin in Python)."""
    sets = {}
    for line in status.splitlines():
        name, _, value = line.partition(":")
        if name in ("CapEff", "CapAmb"):
            sets[name] = int(value.strip() or "0", 16)
    if euid == 0:
        kinds, caps = ["CapEff"], {c: SWITCH_CAPABILITIES[c] for c in ("CAP_SETGID", "CAP_SETUID")}
    else:
        kinds, caps = ["CapEff", "CapAmb"], SWITCH_CAPABILITIES
    missing = [cap for cap, bit in caps.items() if any(not sets.get(kind, 0) >> bit & 1 for kind in kinds)]
    if not missing:
        return None
    if euid == 0:
        return f"it is root without {', '.join(missing)}"
    return f"it is not root, and {', '.join(missing)} not among its effective and ambient capabilities"


def agent_job_user(setting: str) -> JobUser:
    """job_user() for this process, at the agent's start. Misconfigured: a root agent that cannot switch users
    (it would run every job as root)."""
    euid = os.geteuid()
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        status = ""
    why = cannot_switch(euid, status)
    if euid == 0 and why is not None and setting != AS_AGENT:
        raise Misconfigured(f"JETCRON_AGENT_JOB_USER={setting!r}: the agent cannot run jobs as another user ({why}) "
                            f"and does not run them as root; give it the capabilities, or set {AS_AGENT}")
    return job_user(setting, euid, why)


def job_user(setting: str, agent_uid: int, cannot: str | None) -> JobUser:
    """The user jobs run as: `setting` (JETCRON_AGENT_JOB_USER) where the agent can switch users (`cannot`: why
    not, cannot_switch()); an agent that cannot runs jobs as itself."""
    if setting == AS_AGENT or cannot is not None:
        entry = _lookup(agent_uid)
        return JobUser(name=entry.pw_name if entry else str(agent_uid), uid=None, gid=None,
                       home=entry.pw_dir if entry else "/", cannot_switch=None if setting == AS_AGENT else cannot)
    try:
        entry = pwd.getpwnam(setting)
    except KeyError:
        raise Misconfigured(f"JETCRON_AGENT_JOB_USER={setting!r}: no such user on this host (create it, or set "
                            f"{AS_AGENT} to run jobs as the agent's own user)") from None
    return JobUser(name=entry.pw_name, uid=entry.pw_uid, gid=entry.pw_gid, home=entry.pw_dir)


def _lookup(uid: int) -> pwd.struct_passwd | None:
    try:
        return pwd.getpwuid(uid)
    except KeyError:
        return None


def root_refusal(wants_root: bool, allowed: bool, tenant_allows: bool, tenant: str) -> str:
    """Why a job may not run as root here (empty: it may, or it did not ask). Both must allow it: the tenant's
    policy (as placement read it when it sent the attempt) and this agent."""
    if not wants_root:
        return ""
    if not tenant_allows:
        return (f"the job asks to run as root (run_as_root) and tenant {tenant!r}'s policy does not allow it "
                f"(TenantPolicy.allow_run_as_root: jetcron tenants set {tenant} --allow-run-as-root)")
    if not allowed:
        return "the job asks to run as root (run_as_root) and this agent does not allow it (JETCRON_AGENT_ALLOW_ROOT)"
    return ""


def job_env(*, path: str, home: str, job_env: Mapping[str, str], run_vars: Mapping[str, str]) -> dict[str, str]:
    """The whole environment of a job's process: a minimal PATH, HOME and LANG, the job's own variables, then
    the run's JETCRON_* variables (which the job's cannot override: validate.py refuses such names). Nothing of
    the agent's own environment, so none of its settings or credential paths."""
    return {"PATH": path, "HOME": home, "LANG": "C.UTF-8", **job_env, **run_vars}



