"""What the agent asks jetcron-launch to set up for a run's child (services/jetcron_services/agent/host/launch.py): the
same steps the chain of tools takes, as options."""

from __future__ import annotations

from pathlib import Path

from jetcron.core.job_view import ChildView
from jetcron_services.agent.host import launch
from jetcron_services.agent.host.limits import CGROUP1, RLIMIT, LimitRoot, RunLimits

LAUNCHER = "/opt/jetcron/bin/jetcron-launch"
VIEW = ChildView(user=(60600, 60600), private_tmp=True, own_uid=True, max_file_bytes=1024 * 1024)


def grouped() -> RunLimits:
    limits = RunLimits(LimitRoot(CGROUP1, memory=Path("/cg/memory/a"), pids=Path("/cg/pids/a")), "run-1",
                       memory_mb=64, max_pids=32)
    limits.groups = [Path("/cg/memory/a/run-1"), Path("/cg/pids/a/run-1")]  # as create() leaves them
    return limits


def test_a_run_in_cgroups_joins_them_then_gets_its_tmp_its_file_bound_and_its_user() -> None:
    spawn = launch.command(["/bin/backup", "--all"], {"GREETING": "hi", "LANG": "C.UTF-8"}, grouped(), VIEW.user,
                           VIEW, "/scratch/x", LAUNCHER)
    assert spawn.preexec is None
    assert spawn.argv == [LAUNCHER, "--env-stdin", "--join", "/cg/memory/a/run-1/cgroup.procs",
                          "--join", "/cg/pids/a/run-1/cgroup.procs", "--private-tmp", "/scratch/x",
                          "--fsize", "1048576", "--user", "60600:60600", "--", "/bin/backup", "--all"]
    # The launcher, root until its last step, starts with nothing of the job's environment: the program gets it
    # through stdin
    assert spawn.env == {} and spawn.stdin == b"GREETING=hi\0LANG=C.UTF-8\0"


def test_without_cgroups_the_run_gets_rlimits_as_prlimit_gave_them() -> None:
    limits = RunLimits(LimitRoot(RLIMIT), "run-1", memory_mb=64, max_pids=32)
    spawn = launch.command(["/bin/true"], {}, limits, None, None, None, LAUNCHER)
    assert spawn.argv == [LAUNCHER, "--env-stdin", "--as", str(64 * launch.RLIMIT_AS_FACTOR * 1024 * 1024),
                          "--nproc", "32", "--", "/bin/true"]


def test_an_agent_with_no_view_and_no_limits_only_ties_the_child_to_its_life() -> None:
    assert launch.command(["/bin/true"], {"A": "1"}, None, None, None, None, LAUNCHER) == launch.Spawn(
        [LAUNCHER, "--env-stdin", "--", "/bin/true"], {}, b"A=1\0")


def test_the_chain_of_tools_gets_no_environment_and_ends_in_the_one_step_that_sets_the_jobs() -> None:
    spawn = launch.command(["/bin/backup"], {"GCONV_PATH": "/evil", "GREETING": "hi"}, grouped(), (60600, 60600))
    if spawn.preexec is not None:  # no setpriv or perl here: the program is the only exec, with the job's env
        assert spawn.argv == ["/bin/backup"] and spawn.env["GCONV_PATH"] == "/evil"
        return
    assert spawn.env == {} and spawn.stdin == b"GCONV_PATH=/evil\0GREETING=hi\0"
    perl = spawn.argv.index(launch.EXEC_WITH_ENV) - 2
    switch = spawn.argv[perl - 7:perl]
    assert switch[1:] == ["--reuid=60600", "--regid=60600", "--clear-groups", "--inh-caps=-all",
                          "--ambient-caps=-all", "--"]
    assert spawn.argv[perl + 1:] == ["-e", launch.EXEC_WITH_ENV, "--", "/bin/backup"]
    assert "/evil" not in " ".join(spawn.argv)


def test_a_spare_is_given_its_tmp_and_file_bound_in_the_same_one_exec() -> None:
    assert launch.spare_prefix(VIEW, "/scratch/s", LAUNCHER) == [
        LAUNCHER, "--private-tmp", "/scratch/s", "--fsize", "1048576", "--"]
    assert launch.spare_prefix(None, None, LAUNCHER) == [LAUNCHER, "--"]
