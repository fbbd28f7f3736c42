"""What the agent asks its launcher to set up for a run's child (services/jetcron_services/agent/host/launch.py):
jetcron-launch, or where it is not built its twin in Python, with the same options; and the one place the launch
path's exit codes are spelled."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from jetcron.core.host.job_view import ChildView
from jetcron_services.agent.host import jetcron_launch, launch
from jetcron_services.agent.host.limits import CGROUP1, RLIMIT, RLIMIT_AS_FACTOR, LimitRoot, RunLimits

ROOT = Path(__file__).resolve().parents[2]

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
    assert spawn.argv == [LAUNCHER, "--env-stdin", "--join", "/cg/memory/a/run-1/cgroup.procs",
                          "--join", "/cg/pids/a/run-1/cgroup.procs", "--private-tmp", "/scratch/x",
                          "--fsize", "1048576", "--user", "60600:60600", "--", "/bin/backup", "--all"]
    # The launcher, root until its last step, starts with nothing of the job's environment: the program gets it
    # through stdin
    assert spawn.env == {} and spawn.stdin == b"GREETING=hi\0LANG=C.UTF-8\0"


def test_without_cgroups_the_run_gets_rlimits_as_prlimit_gave_them() -> None:
    limits = RunLimits(LimitRoot(RLIMIT), "run-1", memory_mb=64, max_pids=32)
    spawn = launch.command(["/bin/true"], {}, limits, None, None, None, LAUNCHER)
    assert spawn.argv == [LAUNCHER, "--env-stdin", "--as", str(64 * RLIMIT_AS_FACTOR * 1024 * 1024),
                          "--nproc", "32", "--", "/bin/true"]


def test_an_agent_with_no_view_and_no_limits_only_ties_the_child_to_its_life() -> None:
    assert launch.command(["/bin/true"], {"A": "1"}, None, None, None, None, LAUNCHER) == launch.Spawn(
        [LAUNCHER, "--env-stdin", "--", "/bin/true"], {}, b"A=1\0")


def test_without_the_binary_its_python_twin_is_run_isolated_with_the_same_options_and_no_environment() -> None:
    spawn = launch.command(["/bin/backup"], {"GCONV_PATH": "/evil", "GREETING": "hi"}, grouped(), (60600, 60600))
    # -I: no PYTHON* variable, no user site; -S: no site, so no .pth file of the environment runs as root
    assert spawn.argv == [sys.executable, "-I", "-S", "-c", launch.TWIN_MAIN, str(launch.TWIN.parent), "--env-stdin",
                          "--join", "/cg/memory/a/run-1/cgroup.procs", "--join", "/cg/pids/a/run-1/cgroup.procs",
                          "--user", "60600:60600", "--", "/bin/backup"]
    assert launch.TWIN.name == "jetcron_launch.py" and launch.TWIN.is_file()
    assert spawn.env == {} and spawn.stdin == b"GCONV_PATH=/evil\0GREETING=hi\0"
    assert "/evil" not in " ".join(spawn.argv)


@pytest.mark.parametrize("launcher", [LAUNCHER, None], ids=["jetcron-launch", "twin"])
def test_a_spare_joins_its_groups_and_takes_its_tmp_and_file_bound_in_the_same_one_exec(
        launcher: str | None) -> None:
    runner = [LAUNCHER] if launcher else [sys.executable, "-I", "-S", "-c", launch.TWIN_MAIN, str(launch.TWIN.parent)]
    assert launch.spare_command(grouped(), VIEW, "/scratch/s", launcher) == [
        *runner, "--spare", "--join", "/cg/memory/a/run-1/cgroup.procs", "--join", "/cg/pids/a/run-1/cgroup.procs",
        "--private-tmp", "/scratch/s", "--fsize", "1048576"]
    # Its user comes with its run, on stdin, never on its command line
    assert "--user" not in launch.spare_command(grouped(), VIEW, "/scratch/s", launcher)


def test_the_spare_reads_the_user_the_directory_then_counted_env_items_then_the_argv_and_refuses_a_nul() -> None:
    assert launch.spare_run({"A": "1", "B": "x=y"}, ["/bin/echo", "hi"]) == (
        b"\0\0\0" b"2\0A=1\0B=x=y\0/bin/echo\0hi\0")
    assert launch.spare_run({}, ["/bin/true"], (65534, 100), "/tmp") == b"65534\0" b"100\0" b"/tmp\0" b"0\0/bin/true\0"
    with pytest.raises(ValueError, match="NUL"):
        launch.spare_run({"A": "a\0b"}, ["/bin/true"])


def test_the_launch_paths_exit_codes_are_spelled_in_the_python_twin_alone() -> None:
    assert (jetcron_launch.SETUP_FAILED, jetcron_launch.NOT_STARTED) == (125, 127)
    # The C launcher takes them, and its bounds, as -D flags the twin prints, and refuses to build without them
    printed = subprocess.run([sys.executable, "-I", "-S", str(launch.TWIN), "--c-defines"], capture_output=True,
                             text=True, check=True).stdout.split()
    assert printed == ["-DSETUP_FAILED=125", "-DNOT_STARTED=127", "-DMAX_JOINS=8", "-DMAX_STDIN_BYTES=67108864"]
    source = (launch.TWIN.parent / "jetcron_launch.c").read_text()
    assert not re.findall(r"#define (?:SETUP_FAILED|NOT_STARTED|MAX_JOINS|MAX_STDIN_BYTES)\b|\b12[57]\b", source)
    assert "#error" in source
    # And both of its builds pass them
    makefile = (ROOT / "Makefile").read_text()
    containerfile = (ROOT / "Containerfile").read_text()
    assert "$$($(BIN)/python $(word 2,$^) --c-defines)" in makefile
    assert "$(python3 jetcron_launch.py --c-defines)" in containerfile
    # No other script of the launch path is left to spell them: no shell or perl program in a string
    host = launch.TWIN.parent
    for module in sorted(host.glob("*.py")):
        text = module.read_text()
        assert not re.search(r"\b(perl|setpriv|prlimit)\b|exit 12[57]", text), module.name
