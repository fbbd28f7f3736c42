"""How an attempt's child starts (libs/jetcron/core/host/launch_plan.py), decided as a value before anything is done."""

from __future__ import annotations

import pytest

from jetcron.core.host import launch_plan
from jetcron.core.host.launch_plan import HostFacts, Launch, container_name, passed_to_container
from jetcron.core.models import JobSpec, Resources

ENV = {"PATH": "/usr/bin", "HOME": "/nonexistent", "LANG": "C.UTF-8", "GREETING": "hello", "API_TOKEN": "s3cret",
       "JETCRON_RUN_ID": "r1", "JETCRON_NATS_CREDS": "/scratch/run.creds", "CUDA_VISIBLE_DEVICES": "3"}
CLI_ENV = {"PATH": "/usr/local/bin:/usr/bin", "HOME": "/root", "LANG": "C.UTF-8",
           "DOCKER_HOST": "unix:///run/engine.sock"}


def spec(**fields: object) -> JobSpec:
    given: dict[str, object] = {"env": {"GREETING": "hello"}, **fields}
    return JobSpec(name="j", command=["echo", "hi"], secrets=["API_TOKEN"],
                   resources=Resources(cpu=1.5, memory_mb=256), **given)  # type: ignore[arg-type]


def plan(job: JobSpec, argv: list[str], env: dict[str, str], facts: HostFacts) -> Launch | str:
    """Attempt 2 of run r1, given GPU 3."""
    return launch_plan.plan(job, argv, env, facts, container=container_name("r1", 2), gpus=[3])


def host(**facts: object) -> HostFacts:
    given: dict[str, object] = {"agent_id": "agent-1", "runtime": None, "max_pids": 64, "user": (65534, 65534),
                                "scratch_private_tmp": None, "spare_private_tmp": None, **facts}
    return HostFacts(**given)  # type: ignore[arg-type]


def test_a_job_runs_as_a_process_under_the_agents_limits_as_the_job_user() -> None:
    assert plan(spec(), ["echo", "hi"], ENV, host()) == Launch(
        argv=["echo", "hi"], container=None, agent_limits=True, user=(65534, 65534), scratch=False, spare=False)


def test_a_job_that_runs_as_root_is_not_switched_to_the_job_user() -> None:
    launch = plan(spec(run_as_root=True), ["id"], ENV, host())
    assert isinstance(launch, Launch) and launch.user is None


@pytest.mark.parametrize(("scratch", "spare", "takes_spare"), [
    (None, None, False),   # neither: spawned, in the agent's working directory
    (None, False, True),   # spares but no scratches
    (True, True, True),    # the spare waits behind a private /tmp as the run's scratch has one
    (False, False, True),
    (True, False, False),  # the spare's view of /tmp is not the run's: spawned instead
    (False, True, False),
])
def test_a_spare_is_taken_only_with_the_runs_own_view_of_tmp(scratch: bool | None, spare: bool | None,
                                                               takes_spare: bool) -> None:
    launch = plan(spec(), ["true"], ENV, host(scratch_private_tmp=scratch, spare_private_tmp=spare))
    assert isinstance(launch, Launch)
    assert (launch.scratch, launch.spare) == (scratch is not None, takes_spare)


def test_a_job_with_an_image_is_refused_where_no_engine_answers() -> None:
    assert plan(spec(image="alpine:3"), ["true"], ENV, host()) == \
        "image 'alpine:3': no working docker or podman on this agent"


def test_a_job_with_an_image_runs_in_a_container_its_engine_limits() -> None:
    # Given an agent with podman, spares and scratches
    facts = host(runtime="/usr/bin/podman", scratch_private_tmp=True, spare_private_tmp=True, cli_env=CLI_ENV)
    # When a job with an image is planned
    launch = plan(spec(image="alpine:3"), ["echo", "hi"], ENV, facts)
    # Then it is the engine's run of the image, limited by the engine, without a spare or a scratch, its CLI run by
    # the agent's own user (which reaches the engine; the job's code runs inside the container)
    assert isinstance(launch, Launch)
    assert (launch.container, launch.agent_limits, launch.scratch, launch.spare) == ("jc-r1-2", False, False, False)
    assert launch.user is None
    assert launch.argv == [
        "/usr/bin/podman", "run", "--name", "jc-r1-2", "--label", "jetcron.agent=agent-1", "--memory", "256m",
        "--pids-limit", "64", "--cpus", "1.5", "--device", "nvidia.com/gpu=3",
        "-e", "API_TOKEN", "-e", "GREETING", "-e", "JETCRON_NATS_CREDS", "-e", "JETCRON_RUN_ID",
        "alpine:3", "echo", "hi"]


def test_a_container_gets_the_jobs_variables_and_secrets_never_the_hosts() -> None:
    assert list(passed_to_container(ENV, spec())) == ["API_TOKEN", "GREETING", "JETCRON_NATS_CREDS",
                                                      "JETCRON_RUN_ID"]


def test_a_container_clis_environment_is_the_agents_whatever_a_stored_job_set() -> None:
    # Given a job stored before such names were refused, setting where the CLI finds its engine, configuration,
    # credential helpers and loader
    job = spec(image="alpine:3", env={"GREETING": "hello", "DOCKER_HOST": "tcp://evil:2375", "DOCKER_CONFIG": "/evil",
                                      "PATH": "/evil/bin", "HOME": "/evil", "LD_PRELOAD": "/evil.so"})
    env = {**ENV, **job.env}
    # When its run is planned on an agent with docker
    launch = plan(job, ["true"], env, host(runtime="/usr/bin/docker", cli_env=CLI_ENV))
    # Then the CLI starts with the agent's PATH, HOME and engine, and passes only the job's own variables on
    assert isinstance(launch, Launch) and launch.env is not None
    assert {k: launch.env[k] for k in CLI_ENV} == CLI_ENV
    assert "DOCKER_CONFIG" not in launch.env and "LD_PRELOAD" not in launch.env and "/evil" not in str(launch.env)
    passed = [launch.argv[i + 1] for i, arg in enumerate(launch.argv) if arg == "-e"]
    assert passed == ["API_TOKEN", "GREETING", "JETCRON_NATS_CREDS", "JETCRON_RUN_ID"]
