"""What a job's process is given: a clean environment and an unprivileged user (docs/security.md, "Agents and
jobs"). Pure functions over values, plus the one lookup of the job user at the agent's start."""

from __future__ import annotations

import pwd
from collections.abc import Mapping
from dataclasses import dataclass

from jetcron.core.errors import Misconfigured

AS_AGENT = "@agent"
"""JETCRON_AGENT_JOB_USER value: run jobs as the agent's own user, no switch."""


@dataclass(frozen=True)
class JobUser:
    """Who a job runs as: `uid`/`gid` to switch to, or None to stay the agent's user."""

    name: str
    uid: int | None
    gid: int | None
    home: str


def job_user(setting: str, agent_uid: int) -> JobUser:
    """The user jobs run as. Only root can switch: an unprivileged agent runs jobs as itself."""
    if setting == AS_AGENT or agent_uid != 0:
        entry = _lookup(agent_uid)
        return JobUser(name=entry.pw_name if entry else str(agent_uid), uid=None, gid=None,
                       home=entry.pw_dir if entry else "/")
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


def root_refusal(wants_root: bool, allowed: bool) -> str:
    """Why a job may not run as root here (empty: it may, or it did not ask)."""
    if wants_root and not allowed:
        return "the job asks to run as root (run_as_root) and this agent does not allow it (JETCRON_AGENT_ALLOW_ROOT)"
    return ""


def job_env(*, path: str, home: str, job_env: Mapping[str, str], run_vars: Mapping[str, str]) -> dict[str, str]:
    """The whole environment of a job's process: a minimal PATH, HOME and LANG, the job's own variables, then
    the run's JETCRON_* variables (which the job's cannot override: validate.py refuses such names). Nothing of
    the agent's own environment, so none of its settings or credential paths."""
    return {"PATH": path, "HOME": home, "LANG": "C.UTF-8", **job_env, **run_vars}



