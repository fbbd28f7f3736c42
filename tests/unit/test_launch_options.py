"""What the agent asks jetcron-launch to set up for a run's child (services/agent/host/launch.py): the same steps the
chain of tools takes, as options."""

from __future__ import annotations

from pathlib import Path

from jetcron.core.job_view import ChildView
from jetcron.services.agent.host import launch
from jetcron.services.agent.host.limits import CGROUP1, RLIMIT, LimitRoot, RunLimits

LAUNCHER = "/opt/jetcron/bin/jetcron-launch"
VIEW = ChildView(user=(60600, 60600), private_tmp=True, own_uid=True, max_file_bytes=1024 * 1024)


def grouped() -> RunLimits:
    limits = RunLimits(LimitRoot(CGROUP1, memory=Path("/cg/memory/a"), pids=Path("/cg/pids/a")), "run-1",
                       memory_mb=64, max_pids=32)
    limits.groups = [Path("/cg/memory/a/run-1"), Path("/cg/pids/a/run-1")]  # as create() leaves them
    return limits


def test_a_run_in_cgroups_joins_them_then_gets_its_tmp_its_file_bound_and_its_user() -> None:
    argv, preexec = launch.command(["/bin/backup", "--all"], grouped(), VIEW.user, VIEW, "/scratch/x", LAUNCHER)
    assert preexec is None
    assert argv == [LAUNCHER, "--join", "/cg/memory/a/run-1/cgroup.procs", "--join", "/cg/pids/a/run-1/cgroup.procs",
                    "--private-tmp", "/scratch/x", "--fsize", "1048576", "--user", "60600:60600",
                    "--", "/bin/backup", "--all"]


def test_without_cgroups_the_run_gets_rlimits_as_prlimit_gave_them() -> None:
    limits = RunLimits(LimitRoot(RLIMIT), "run-1", memory_mb=64, max_pids=32)
    argv, _ = launch.command(["/bin/true"], limits, None, None, None, LAUNCHER)
    assert argv == [LAUNCHER, "--as", str(64 * launch.RLIMIT_AS_FACTOR * 1024 * 1024), "--nproc", "32",
                    "--", "/bin/true"]


def test_an_agent_with_no_view_and_no_limits_only_ties_the_child_to_its_life() -> None:
    assert launch.command(["/bin/true"], None, None, None, None, LAUNCHER) == ([LAUNCHER, "--", "/bin/true"], None)


def test_a_spare_is_given_its_tmp_and_file_bound_in_the_same_one_exec() -> None:
    assert launch.spare_prefix(VIEW, "/scratch/s", LAUNCHER) == [
        LAUNCHER, "--private-tmp", "/scratch/s", "--fsize", "1048576", "--"]
    assert launch.spare_prefix(None, None, LAUNCHER) == [LAUNCHER, "--"]
