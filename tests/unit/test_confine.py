"""What a job's process is given, decided without a process: its environment, its user, root or not."""

from __future__ import annotations

import pytest

from jetcron.core.errors import Misconfigured
from jetcron_services.agent.host.confine import AS_AGENT, cannot_switch, job_env, job_user, root_refusal


def test_a_jobs_environment_is_its_own_variables_and_the_runs_over_a_minimal_base() -> None:
    env = job_env(path="/bin", home="/home/job", job_env={"GREETING": "hi", "PATH": "/mine"},
                  run_vars={"JETCRON_RUN_ID": "j.1"})
    assert env == {"PATH": "/mine", "HOME": "/home/job", "LANG": "C.UTF-8", "GREETING": "hi", "JETCRON_RUN_ID": "j.1"}


def test_the_job_user_is_looked_up_once_and_an_unknown_one_is_a_named_refusal() -> None:
    nobody = job_user("nobody", 0, None)
    assert nobody.name == "nobody" and nobody.uid not in (None, 0) and nobody.cannot_switch is None
    assert job_user(AS_AGENT, 0, None).uid is None  # run as the agent's own user
    unprivileged = job_user("nobody", 1000, "it is not root, and CAP_SETUID not among ...")
    assert unprivileged.uid is None and unprivileged.cannot_switch  # runs jobs as itself, and says why
    with pytest.raises(Misconfigured, match="JETCRON_AGENT_JOB_USER='no-such-user': no such user"):
        job_user("no-such-user", 0, None)


ALL = (1 << 41) - 1
SWITCHING = (1 << 0) | (1 << 1) | (1 << 5) | (1 << 6) | (1 << 7)  # CHOWN, DAC_OVERRIDE, KILL, SETGID, SETUID


def _status(eff: int, amb: int) -> str:
    return f"Name:\tpython\nCapInh:\t{0:016x}\nCapEff:\t{eff:016x}\nCapAmb:\t{amb:016x}\n"


@pytest.mark.parametrize(("euid", "eff", "amb", "why"), [
    (0, ALL, 0, None),
    (0, SWITCHING & ~(1 << 5), 0, None),  # root needs only to switch: leftovers are its own business
    (0, ALL & ~(1 << 7), 0, "it is root without CAP_SETUID"),
    (1000, 0, 0, "it is not root, and CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_KILL, CAP_SETGID, CAP_SETUID not among"),
    (1000, SWITCHING, SWITCHING, None),
    (1000, SWITCHING, 0, "CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_KILL, CAP_SETGID, CAP_SETUID not among its effective "
                         "and ambient"),  # held, but the helpers it execs would not keep them
    (1000, SWITCHING, SWITCHING & ~(1 << 5), "CAP_KILL not among"),
], ids=["root", "root_without_kill", "root_without_setuid", "unprivileged", "ambient_caps", "effective_only",
        "no_kill"])
def test_an_agent_switches_users_as_root_or_with_the_capabilities_its_helpers_keep(
        euid: int, eff: int, amb: int, why: str | None) -> None:
    said = cannot_switch(euid, _status(eff, amb))
    assert said is None if why is None else (said is not None and why in said), said


@pytest.mark.parametrize(("asks", "agent", "tenant", "refused"), [
    (False, False, False, ""), (True, False, True, "this agent does not allow it (JETCRON_AGENT_ALLOW_ROOT)"),
    (True, True, False, "tenant 'acme''s policy does not allow it"), (True, True, True, ""),
    (False, True, True, "")])
def test_root_needs_the_job_to_ask_the_tenants_policy_and_the_agent_to_allow(
        asks: bool, agent: bool, tenant: bool, refused: str) -> None:
    said = root_refusal(asks, agent, tenant, "acme")
    assert (refused in said) if refused else said == ""


@pytest.mark.parametrize(("names", "env", "field", "problem"), [
    (["DB_PASSWORD", "DB_PASSWORD"], {}, "secrets[1]", "more than once"),
    (["NATS_CREDS"], {}, "secrets[0]", "not allowed"),
    (["JETCRON_RUN_ID"], {}, "secrets[0]", "not allowed"),
    (["LD_PRELOAD"], {}, "secrets[0]", "not allowed"),
    (["9LIVES"], {}, "secrets[0]", "not a valid variable name"),
    (["TOKEN"], {"TOKEN": "x"}, "secrets[0]", "also set in env"),
    ([f"S{i}" for i in range(65)], {}, "secrets", "more than 64"),
], ids=["duplicate", "nats_prefix", "jetcron_prefix", "loader", "bad_name", "also_in_env", "too_many"])
def test_secret_names_are_checked_like_variable_names(names: list[str], env: dict[str, str], field: str,
                                                      problem: str) -> None:
    from jetcron.core.errors import InvalidSpec
    from jetcron.core.validate import validate_secrets

    with pytest.raises(InvalidSpec, match=problem) as caught:
        validate_secrets(names, env)
    assert caught.value.field == field


@pytest.mark.parametrize("labels", ["zone=eu,bad label=x", "zone=e*u", "leaf>=1", "=x"],
                         ids=["space", "star", "gt", "empty_key"])
def test_an_agent_with_a_bad_label_refuses_to_start_naming_it(labels: str) -> None:
    from jetcron_services.agent.host.offer import parse_labels

    with pytest.raises(Misconfigured, match="JETCRON_AGENT_LABELS: label"):
        parse_labels(labels)


@pytest.mark.parametrize("agent_id", ["a.b", "a*", "a>", "", "a b"], ids=["dot", "star", "gt", "empty", "space"])
def test_an_agent_id_with_subject_metacharacters_refuses_to_start(agent_id: str) -> None:
    from jetcron_services.agent.host.offer import checked_agent_id

    with pytest.raises(Misconfigured, match="JETCRON_AGENT_ID="):
        checked_agent_id(agent_id)
    assert checked_agent_id("agent-1") == "agent-1"
    assert parse_labels_ok()


def parse_labels_ok() -> bool:
    from jetcron_services.agent.host.offer import parse_labels

    return parse_labels("zone=eu-1, leaf=l1.a") == {"zone": "eu-1", "leaf": "l1.a"}
