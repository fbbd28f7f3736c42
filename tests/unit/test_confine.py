"""What a job's process is given, decided without a process: its environment, its user, root or not."""

from __future__ import annotations

import pytest

from jetcron.core.errors import Misconfigured
from jetcron.services.agent.host.confine import AS_AGENT, job_env, job_user, root_refusal


def test_a_jobs_environment_is_its_own_variables_and_the_runs_over_a_minimal_base() -> None:
    env = job_env(path="/bin", home="/home/job", job_env={"GREETING": "hi", "PATH": "/mine"},
                  run_vars={"JETCRON_RUN_ID": "j.1"})
    assert env == {"PATH": "/mine", "HOME": "/home/job", "LANG": "C.UTF-8", "GREETING": "hi", "JETCRON_RUN_ID": "j.1"}


def test_the_job_user_is_looked_up_once_and_an_unknown_one_is_a_named_refusal() -> None:
    nobody = job_user("nobody", agent_uid=0)
    assert nobody.name == "nobody" and nobody.uid not in (None, 0)
    assert job_user(AS_AGENT, agent_uid=0).uid is None  # run as the agent's own user
    assert job_user("nobody", agent_uid=1000).uid is None  # only root can switch
    with pytest.raises(Misconfigured, match="JETCRON_AGENT_JOB_USER='no-such-user': no such user"):
        job_user("no-such-user", agent_uid=0)


@pytest.mark.parametrize(("asks", "allowed", "refused"), [(False, False, False), (True, False, True),
                                                           (True, True, False), (False, True, False)])
def test_root_needs_both_the_job_to_ask_and_the_agent_to_allow(asks: bool, allowed: bool, refused: bool) -> None:
    assert bool(root_refusal(asks, allowed)) is refused


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
    from jetcron.services.agent.host.offer import parse_labels

    with pytest.raises(Misconfigured, match="JETCRON_AGENT_LABELS: label"):
        parse_labels(labels)


@pytest.mark.parametrize("agent_id", ["a.b", "a*", "a>", "", "a b"], ids=["dot", "star", "gt", "empty", "space"])
def test_an_agent_id_with_subject_metacharacters_refuses_to_start(agent_id: str) -> None:
    from jetcron.services.agent.host.offer import checked_agent_id

    with pytest.raises(Misconfigured, match="JETCRON_AGENT_ID="):
        checked_agent_id(agent_id)
    assert checked_agent_id("agent-1") == "agent-1"
    assert parse_labels_ok()


def parse_labels_ok() -> bool:
    from jetcron.services.agent.host.offer import parse_labels

    return parse_labels("zone=eu-1, leaf=l1.a") == {"zone": "eu-1", "leaf": "l1.a"}
