"""An attempt's child on this host: what it starts with (the root rule, the run's secrets and credential), how it
starts (jetcron.core.host.launch_plan's plan carried out: a container or the agent's limits, a spare, a scratch and a
uid), how it is stopped and what it leaves to clear; on a simulated agent, a stand-in that runs nothing."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from functools import partial
from typing import Protocol

from jetcron.core.host.launch_plan import HostFacts, Launch, container_name, plan
from jetcron.core.lifecycle.attempt_state import AttemptPhase
from jetcron.wire.messages import AssignRun
from jetcron_services.agent.attempt_deps import AttemptDeps
from jetcron_services.agent.host import container as containers
from jetcron_services.agent.host.confine import root_refusal
from jetcron_services.agent.host.executor import Execution, Outcome
from jetcron_services.agent.host.limits import RunLimits
from jetcron_services.agent.host.scratch import NoRoom, Room
from jetcron_services.agent.ports import ChildPorts
from jetcron_services.agent.run_creds import run_credential
from jetcron_services.agent.secrets import resolve_secrets

P = AttemptPhase


class Starting(Protocol):
    """What the child's start reads of its attempt (whether it is still to start, and how it was stopped if not),
    and tells it."""

    phase: AttemptPhase
    why: str | None
    graceful: bool
    grace_seconds: float | None

    async def output(self, stream: str, data: bytes) -> None: ...

    async def spawned(self, pid: int) -> None: ...


class Child:
    """Started by `run`, which is given its attempt: only the execution holds the attempt (its output's callback),
    and lets it go once the child has ended (an attempt must not be left in a reference cycle: docs/benchmarks.md,
    "What an agent holds")."""

    # One per attempt, and a staged herd holds tens of thousands of attempts.
    __slots__ = ("cmd", "ctx", "deps", "env", "execution", "room", "sim_end")

    def __init__(self, ctx: ChildPorts, deps: AttemptDeps, cmd: AssignRun, env: Callable[[], dict[str, str]]) -> None:
        self.ctx, self.deps, self.cmd = ctx, deps, cmd
        self.env = env
        """Builds the child's environment when it starts: held from assignment, tens of thousands of staged
        attempts' copies of it were much of what the cycle collector walked in a herd (and a sim runs none)."""
        self.execution: Execution | None = None
        self.room: Room | None = None
        """Its scratch and uid, from just before it starts until it has ended."""
        self.sim_end: asyncio.Event | None = None
        """Set when a simulated child is stopped (fenced, handed back): it has none to kill."""

    async def run(self, attempt: Starting, argv: list[str]) -> Outcome:
        """Start it, unless its attempt was fenced or handed back first, and wait for it to end."""
        if attempt.phase is not P.STARTING:
            return _not_started(attempt.phase)
        if self.ctx.settings.agent_sim:
            return await self._simulate(attempt)
        spec, env = self.cmd.spec, self.env()
        refused = root_refusal(spec.run_as_root, self.ctx.settings.agent_allow_root, self.cmd.root_allowed, spec.tenant)
        if refused:
            return Outcome("start_failed", None, refused)
        if spec.secrets:
            values, missing = await resolve_secrets(self.ctx, spec)
            if missing:
                return Outcome("start_failed", None, missing)
            env.update(values)
        if self.ctx.settings.nats_creds:  # auth on: the run gets its own credential, never the agent's
            creds, why = await run_credential(self.ctx.rpc, self.cmd)
            if why:
                self.ctx.log.warning("run starts without a NATS credential", run_id=self.cmd.run_id, reason=why)
            env.update(creds)
        if attempt.phase is not P.STARTING:  # fenced or handed back while its secrets were read: spawn nothing
            return _not_started(attempt.phase)
        launch = plan(spec, argv, env, self._host_facts(),
                      container=container_name(self.cmd.run_id, self.cmd.attempt), gpus=self.cmd.gpu_indices)
        if isinstance(launch, str):
            return Outcome("start_failed", None, launch)
        failed = await self._prepare(launch, env, attempt)
        if failed is not None:
            return failed
        try:
            return await self._spawn(attempt)
        finally:
            runtime = self.deps.setup.runtime
            if launch.container is not None and runtime is not None:
                await containers.remove(runtime, launch.container)
                self.deps.strays.remove_container(launch.container)

    async def _prepare(self, launch: Launch, env: dict[str, str], attempt: Starting) -> Outcome | None:
        """Its execution, made (not started yet): its limits, its container known to the reaper, a spare, its room.
        The outcome instead when it cannot start."""
        spec, settings, deps, on_kill = self.cmd.spec, self.ctx.settings, self.deps, None
        limits = RunLimits(deps.setup.limits, f"{self.cmd.run_id}-{self.cmd.attempt}",
                           memory_mb=spec.resources.memory_mb, max_pids=settings.agent_max_pids) \
            if launch.agent_limits else None
        if launch.env is not None:  # a container's CLI: the agent's environment and the variables it passes on
            env = launch.env
        if launch.container is not None and deps.setup.runtime is not None:
            on_kill = partial(containers.remove, deps.setup.runtime, launch.container)
            deps.strays.add_container(launch.container)
        spare = deps.spares.take() if launch.spare and deps.spares is not None else None
        switch, view, scratch = launch.user, None, None
        if launch.scratch and deps.scratches is not None:
            try:
                self.room = await deps.scratches.open_soon(spec.run_as_root,
                                                           spare.hand_over() if spare is not None else None)
            except NoRoom as exc:
                if spare is not None:
                    await spare.discard()
                return Outcome("start_failed", None, str(exc))
            view, scratch = self.room.view, str(self.room.path)
            switch = view.user
            env.update(view.env(scratch, spec.env))
        self.execution = Execution(launch.argv, env, limits=limits, timeout=spec.timeout_seconds, user=switch,
                                   kill_grace=settings.kill_grace, on_output=attempt.output, on_kill=on_kill,
                                   spare=spare, view=view, scratch=scratch, launcher=deps.setup.launcher)
        return None

    async def _spawn(self, attempt: Starting) -> Outcome:
        """Start the execution made and wait for its end; one whose attempt was stopped meanwhile is stopped."""
        execution = self.execution
        assert execution is not None
        failed = await execution.start()
        if failed is not None:
            return failed
        if attempt.phase is not P.STARTING:  # fenced or handed back while it spawned, before it could be stopped
            self.stop(attempt.why or str(attempt.phase), grace=attempt.phase is P.HANDED_BACK or attempt.graceful,
                      seconds=attempt.grace_seconds)
        self.deps.strays.add(execution.pid)
        try:
            await attempt.spawned(execution.pid)
            return await execution.wait()
        finally:
            self.deps.strays.remove(execution.pid)

    async def _simulate(self, attempt: Starting) -> Outcome:
        """Run nothing for the drawn time and exit with the drawn code (deps.sim); stopped as a child is."""
        seconds, code = self.deps.sim.draw(self.cmd.run_id, self.cmd.attempt)
        limit = self.cmd.spec.timeout_seconds
        if seconds > 0:
            self.sim_end = asyncio.Event()
        await attempt.spawned(0)
        if self.sim_end is None:
            # Yield before reporting: the rest of a herd due at this instant starts before this one's report
            # (encode, publish) takes its turn on the loop, as a real child's exit would come later anyway.
            await asyncio.sleep(0)
        else:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.sim_end.wait(), min(seconds, limit) if limit else seconds)
            if self.sim_end.is_set():
                return Outcome("killed", None, attempt.why or "stopped")
            if limit and seconds > limit:
                return Outcome("timed_out", None, f"timed out after {limit}s")
        return Outcome("succeeded", 0) if code == 0 else Outcome("failed", code, f"exit code {code}")

    def _host_facts(self) -> HostFacts:
        user, scratches, spares = self.deps.user, self.deps.scratches, self.deps.spares
        switch = (user.uid, user.gid) if user is not None and user.uid is not None and user.gid is not None else None
        return HostFacts(agent_id=self.cmd.agent, runtime=self.deps.setup.runtime,
                         max_pids=self.ctx.settings.agent_max_pids, user=switch,
                         scratch_private_tmp=None if scratches is None
                         else scratches.view(self.cmd.spec.run_as_root).private_tmp,
                         spare_private_tmp=None if spares is None else spares.private_tmp,
                         cli_env=containers.cli_env() if self.deps.setup.runtime is not None else {})

    def stop(self, why: str, *, grace: bool, seconds: float | None = None) -> None:
        """Kill its group now, or with `grace` stop it as a timeout does (SIGTERM, grace, SIGKILL)."""
        if self.execution is not None:
            if grace:
                self.execution.stop(why, seconds)
            else:
                self.execution.kill_now(why)
        elif self.sim_end is not None:
            self.sim_end.set()

    async def clear_room(self) -> None:
        """It has ended (or never started): its scratch goes, and its uid back to the pool (after its attempt's
        report: a large scratch takes a while to remove)."""
        room, self.room = self.room, None
        if room is None or self.deps.scratches is None:
            return
        gone = False
        with contextlib.suppress(OSError):
            gone = await self.deps.scratches.close_soon(room)
        if not gone:
            self.ctx.log.warning("scratch directory not removed; the agent's next start removes it",
                                 run_id=self.cmd.run_id, attempt=self.cmd.attempt, path=str(room.path))


def _not_started(phase: AttemptPhase) -> Outcome:
    return Outcome("killed", None, "fenced before start" if phase is P.FENCED else "handed back before start")
