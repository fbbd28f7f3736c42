"""How an attempt's child is to start, decided before anything is done: in a container the engine limits, or as a
process under the agent's own limits; as which user; in a scratch of its own; in a spare child already in its
groups. Pure: the host's facts come in as values, and attempt.py carries the plan out."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from jetcron.core.models import JobSpec
from jetcron.services.agent.host import container as containers
from jetcron.wire.messages import AssignRun


@dataclass(frozen=True)
class HostFacts:
    """What the plan needs to know of this agent and its host."""

    runtime: str | None
    """A docker or podman CLI whose engine answers; None: a run with an image is refused here."""
    max_pids: int
    user: tuple[int, int] | None
    """The job user's uid and gid; None: jobs run as the agent's own user."""
    scratch_private_tmp: bool | None
    """Whether this run's scratch comes with a private /tmp; None: the agent gives no scratches."""
    spare_private_tmp: bool | None
    """Whether the agent's spare children wait in a private /tmp; None: the agent keeps no spares."""


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


def passed_to_container(env_names: Collection[str], spec: JobSpec) -> list[str]:
    """The variables a container gets: the job's own, its secrets and the run's JETCRON_* ones, never the host's
    (PATH, HOME, CUDA_VISIBLE_DEVICES: the host's GPU numbers would name the wrong devices inside)."""
    mine = set(spec.env) | set(spec.secrets)
    return sorted(name for name in env_names if name in mine or name.startswith("JETCRON_"))


def plan(cmd: AssignRun, argv: list[str], env_names: Collection[str], host: HostFacts) -> Launch | str:
    """The launch of the attempt's child, or why it cannot start here."""
    spec = cmd.spec
    user = None if spec.run_as_root else host.user
    if spec.image is not None:
        if host.runtime is None:
            return f"image {spec.image!r}: no working docker or podman on this agent"
        name = containers.container_name(cmd.run_id, cmd.attempt)
        wrapped = containers.run_argv(host.runtime, name=name, agent_id=cmd.agent, image=spec.image, command=argv,
                                      env_names=passed_to_container(env_names, spec),
                                      memory_mb=spec.resources.memory_mb, max_pids=host.max_pids,
                                      cpu=spec.resources.cpu, gpus=list(cmd.gpu_indices))
        return Launch(argv=wrapped, container=name, agent_limits=False, user=user, scratch=False, spare=False)
    scratch = host.scratch_private_tmp is not None
    spare = host.spare_private_tmp is not None and (not scratch or host.scratch_private_tmp == host.spare_private_tmp)
    return Launch(argv=argv, container=None, agent_limits=True, user=user, scratch=scratch, spare=spare)
