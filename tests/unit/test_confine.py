"""What a job's process is given, decided without a process: its environment, its user, root or not."""

from __future__ import annotations

import pytest

from jetcron.core.errors import Misconfigured
from jetcron.services.agent.confine import AS_AGENT, job_env, job_user, root_refusal


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
