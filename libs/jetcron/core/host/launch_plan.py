"""How an attempt's child is to start, decided before anything is done: in a container the engine limits, or as a
process under the agent's own limits; as which user; in a scratch of its own; in a spare child already in its
groups. And a container run's command line (docker or podman), which never holds a value of the environment.
Pure: the host's facts come in as values, and the agent (services/jetcron_services/agent/child.py) carries the plan
out."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from jetcron.core.host import env_names
from jetcron.core.models import JobSpec

LABEL_AGENT = "jetcron.agent"
"""The label a container carries naming the agent that started it (an agent's restart removes its own)."""


def runtime_name(runtime: str) -> str:
    """docker or podman, from a full path."""
    return runtime.rsplit("/", 1)[-1]


def container_name(run_id: str, attempt: int) -> str:
    return "jc-" + re.sub(r"[^A-Za-z0-9_.-]", "_", f"{run_id}-{attempt}")[:200]


def gpu_args(runtime: str, gpus: list[int]) -> list[str]:
    """The host GPUs an attempt was given, handed to its container: docker's `--gpus` (the NVIDIA container
    toolkit), podman's CDI devices (`nvidia-ctk cdi generate`). Inside, they are numbered from 0."""
    if not gpus:
        return []
    if runtime_name(runtime) == "podman":
        return [arg for i in gpus for arg in ("--device", f"nvidia.com/gpu={i}")]
    # docker reads --gpus as CSV: a list of devices must be quoted inside the value
    return ["--gpus", '"device=' + ",".join(str(i) for i in gpus) + '"']


def run_argv(runtime: str, *, name: str, agent_id: str, image: str, command: list[str], env_names: list[str],
             memory_mb: int, max_pids: int, cpu: float, gpus: list[int] | None = None) -> list[str]:
    """`docker run` for one attempt. Env values come from the CLI's own environment (`-e NAME`), so they never
    appear in a process listing; the engine enforces the limits (memory, pids, cpu) itself. No `--rm`: the docker
    CLI talking to podman's socket (an agent in a container, its jobs beside it) then exits 0 whatever the
    container's exit code; the agent removes the container once the CLI has exited (`remove`)."""
    argv = [runtime, "run", "--name", name, "--label", f"{LABEL_AGENT}={agent_id}",
            "--memory", f"{memory_mb}m", "--pids-limit", str(max_pids), "--cpus", f"{cpu:g}"]
    argv += gpu_args(runtime, gpus or [])
    for env_name in sorted(env_names):
        argv += ["-e", env_name]
    return [*argv, image, *command]


@dataclass(frozen=True)
class HostFacts:
    """What the plan needs to know of this agent and its host."""

    agent_id: str
    runtime: str | None
    """A docker or podman CLI whose engine answers; None: a run with an image is refused here."""
    max_pids: int
    user: tuple[int, int] | None
    """The job user's uid and gid; None: jobs run as the agent's own user."""
    scratch_private_tmp: bool | None
    """Whether this run's scratch comes with a private /tmp; None: the agent gives no scratches."""
    spare_private_tmp: bool | None
    """Whether the agent's spare children wait in a private /tmp; None: the agent keeps no spares."""
    cli_env: Mapping[str, str] = field(default_factory=dict)
    """The container CLI's own environment, the agent's: its PATH and HOME, and how it reaches its engine
    (DOCKER_HOST, ...). An image run's variables are added to it, never the other way round."""


@dataclass(frozen=True)
class Launch:
    argv: list[str]
    """What is executed: the job's argv, or the container CLI's `run` around it."""
    container: str | None
    """The container's name; None: the job runs as a process of this host."""
    agent_limits: bool
    """Whether the agent limits the child (cgroups or rlimits); a container is limited by its engine."""
    user: tuple[int, int] | None
    """Who the child runs as, unless its scratch gives it a uid of its own; None: the agent's own user."""
    scratch: bool
    """Whether the child gets a scratch of its own (a container has a filesystem of its own instead)."""
    spare: bool
    """Whether the child starts in a spare: only under the agent's limits, and only in a spare with the same view
    of /tmp as the run's scratch."""
    env: dict[str, str] | None = None
    """The child's whole environment where it is not the job's own (a container's CLI: container_cli_env)."""


def passed_to_container(env: Mapping[str, str], spec: JobSpec) -> dict[str, str]:
    """The variables a container gets: the job's own, its secrets and the run's JETCRON_* ones, never the host's
    (PATH, HOME, CUDA_VISIBLE_DEVICES: the host's GPU numbers would name the wrong devices inside), nor any the
    container CLI would read itself (jetcron.core.host.env_names: the api refuses them in an image job; a job stored
    before that loses them here)."""
    mine = set(spec.env) | set(spec.secrets)
    return {name: value for name, value in sorted(env.items())
            if (name in mine and env_names.refusal(name, image=True) is None) or name.startswith("JETCRON_")}


def container_cli_env(env: Mapping[str, str], spec: JobSpec, cli_env: Mapping[str, str]) -> dict[str, str]:
    """The environment a container run's CLI starts with: the agent's own for the CLI (cli_env), which runs with
    the agent's access to its engine, plus the variables it passes into the container by name. Nothing else of
    the job's reaches it: not its PATH or HOME (where the CLI finds credential helpers and its configuration), not
    an engine's address."""
    return {**passed_to_container(env, spec), **cli_env}


def plan(spec: JobSpec, argv: list[str], env: Mapping[str, str], host: HostFacts, *, container: str,
         gpus: Sequence[int] = ()) -> Launch | str:
    """The launch of an attempt's child, or why it cannot start here. `env`: the job's environment; `container`:
    the name its container gets if it runs in one (container_name); `gpus`: the host's devices it was given.

    A container's CLI is the agent's tool, not the job's code (that runs inside the container): it runs as the
    agent's own user, which holds the access to the engine (its socket's group, or root), with an environment of
    the agent's making. A job's own process never holds that access: it runs as the job's user, which has no
    supplementary group."""
    user = None if spec.run_as_root else host.user
    if spec.image is not None:
        if host.runtime is None:
            return f"image {spec.image!r}: no working docker or podman on this agent"
        cli_env = container_cli_env(env, spec, host.cli_env)
        wrapped = run_argv(host.runtime, name=container, agent_id=host.agent_id, image=spec.image, command=argv,
                           env_names=list(passed_to_container(env, spec)), memory_mb=spec.resources.memory_mb,
                           max_pids=host.max_pids, cpu=spec.resources.cpu, gpus=list(gpus))
        return Launch(argv=wrapped, container=container, agent_limits=False, user=None, scratch=False, spare=False,
                      env=cli_env)
    scratch = host.scratch_private_tmp is not None
    spare = host.spare_private_tmp is not None and (not scratch or host.scratch_private_tmp == host.spare_private_tmp)
    return Launch(argv=argv, container=None, agent_limits=True, user=user, scratch=scratch, spare=spare)
