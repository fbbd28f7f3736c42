"""jetcron-launch (services/jetcron_services/agent/host/jetcron_launch.c) and its twin in Python (jetcron_launch.py),
each run as the agent runs it: what a run's child is given, in which order, what a spare waits for, and what a bad
option or a failed step says, the same from both. Real processes; the user switch and the namespace need root."""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from harness import wait_until

from jetcron_services.agent.host import launch
from jetcron_services.agent.host.jetcron_launch import NOT_STARTED, SETUP_FAILED

root_only = pytest.mark.needs("root", reason="a user switch and a mount namespace take root")
# A child that reports its ids, its groups, its parent-death signal, its file size limit and its working directory.
REPORT = ("import ctypes, os, resource; sig = ctypes.c_int(); ctypes.CDLL(None).prctl(2, ctypes.byref(sig)); "
          "print(os.getresuid(), os.getresgid(), os.getgroups(), sig.value, "
          "resource.getrlimit(resource.RLIMIT_FSIZE)[0], os.getcwd())")


@pytest.fixture(scope="module")
def binary() -> str:
    path = launch.launcher_path()
    assert path is not None, "jetcron-launch is not built or does not run here (make builds it)"
    return path


@pytest.fixture(scope="module", params=["jetcron-launch", "twin"])
def launcher(request: pytest.FixtureRequest) -> list[str]:
    """How the agent runs its launcher: the binary, or (where it is not built) its twin by the agent's interpreter."""
    return launch.launcher_argv(request.getfixturevalue("binary") if request.param == "jetcron-launch" else None)


# The system's interpreter, which any user may run (this one may live where the job's user may not search).
PYTHON = "/usr/bin/python3"


def launched(launcher: list[str], *options: str, program: tuple[str, ...] = (PYTHON, "-c", REPORT),
             **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*launcher, *options, "--", *program], capture_output=True, text=True, timeout=10,
                          check=False, **kw)  # type: ignore[call-overload]


@root_only
@pytest.mark.skipif(not os.access(PYTHON, os.X_OK), reason=f"the child reports through {PYTHON}, missing here")
def test_the_child_gets_its_tmp_limits_and_user_and_still_dies_with_the_agent(launcher: list[str],
                                                                             tmp_path: Path) -> None:
    # Given a scratch folder the job's user (nobody) owns
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    os.chown(scratch, 65534, 65534)
    # When a program is launched in it as nobody, with /tmp bound to it and files bounded at 1 MiB
    done = launched(launcher, "--private-tmp", str(scratch), "--fsize", "1048576", "--user", "65534:65534")
    # Then it runs as nobody in every id, with no supplementary group, the parent-death signal set again after the
    # switch (a credential change clears it), the file size bound, in /tmp
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[0] == ("(65534, 65534, 65534) (65534, 65534, 65534) [] 9 1048576 /tmp")
    # And its /tmp is the scratch: what it writes there lands in the folder, the host's /tmp untouched
    mark = f"mark-{os.getpid()}"
    wrote = launched(launcher, "--private-tmp", str(scratch), "--user", "65534:65534",
                     program=("/bin/sh", "-c", f"touch /tmp/{mark}"))
    assert wrote.returncode == 0, wrote.stderr
    assert (scratch / mark).exists() and not (Path("/tmp") / mark).exists()


def test_with_env_stdin_the_program_gets_exactly_the_environment_read_and_the_launcher_none(
        launcher: list[str]) -> None:
    # Given a launcher started, as the agent starts it, with an empty environment and the job's on its stdin
    items = b"GREETING=hello world\0EMPTY=\0ODD=a=b\0"
    done = subprocess.run([*launcher, "--env-stdin", "--", "/bin/sh", "-c", "env; cat; echo end"], input=items,
                          capture_output=True, timeout=10, check=False, env={})
    # Then the program has exactly those variables (sh adds PWD), and /dev/null as its stdin
    assert done.returncode == 0, done.stderr
    lines = done.stdout.decode().splitlines()
    assert lines[-1] == "end" and sorted(lines[:-1]) == ["EMPTY=", "GREETING=hello world", "ODD=a=b",
                                                       f"PWD={os.getcwd()}"]
    # And an item not ended by a NUL runs nothing
    cut = subprocess.run([*launcher, "--env-stdin", "--", "/bin/true"], input=b"A=1", capture_output=True,
                         timeout=10, check=False, env={})
    assert (cut.returncode, cut.stderr.decode().strip()) == (
        SETUP_FAILED,
        "jetcron: could not read the environment from stdin (an item not ended by a NUL): Invalid argument")
    # Nor does an item exec could not pass on
    nameless = subprocess.run([*launcher, "--env-stdin", "--", "/bin/true"], input=b"=1\0", capture_output=True,
                              timeout=10, check=False, env={})
    assert (nameless.returncode, nameless.stderr.decode().strip()) == (
        SETUP_FAILED,
        "jetcron: could not read the environment from stdin (an item that is not NAME=value): Invalid argument")


def test_without_env_stdin_the_program_gets_exactly_the_environment_the_launcher_was_given(
        launcher: list[str]) -> None:
    done = subprocess.run([*launcher, "--", "/usr/bin/env"], capture_output=True, timeout=10, check=False,
                          env={"ONLY": "this"})
    assert (done.returncode, done.stdout) == (0, b"ONLY=this\n"), done.stderr


@root_only
@pytest.mark.needs("setpriv", reason="the launching agent is made with setpriv")
def test_a_switch_from_an_agent_that_is_not_root_leaves_the_job_no_capability_and_no_group(
        launcher: list[str]) -> None:
    # Given an agent that is not root, holds a supplementary group (disk's, as an engine socket's group would be),
    # and CAP_SETUID and the rest as ambient capabilities
    caps = "+chown,+dac_override,+kill,+setgid,+setuid"
    done = subprocess.run(["setpriv", "--reuid=1", "--regid=1", "--groups=6", f"--inh-caps={caps}",
                           f"--ambient-caps={caps}", "--", *launcher, "--user", "65534:65534", "--",
                           "/bin/grep", "-E", "^(Cap|Groups)", "/proc/self/status"],
                          capture_output=True, text=True, timeout=10, check=False)
    # When it launches a program as nobody, the program holds none of them (the kernel keeps them through a switch
    # that does not start from root), and none of its groups
    assert done.returncode == 0, done.stderr
    held = dict(line.replace("\t", "").split(":") for line in done.stdout.splitlines())
    assert {k: v.strip() for k, v in held.items() if k != "CapBnd"} == {
        "Groups": "", "CapInh": "0" * 16, "CapPrm": "0" * 16, "CapEff": "0" * 16, "CapAmb": "0" * 16}, held


def test_a_bad_option_is_refused_naming_it_and_nothing_runs(launcher: list[str], tmp_path: Path) -> None:
    ran = tmp_path / "ran"
    touch = ("/bin/sh", "-c", f"touch {ran}")
    for options, said in [
            (("--fsize", "12x"), "jetcron-launch: --fsize is not a whole number: 12x"),
            (("--fsize", "-1"), "jetcron-launch: --fsize is not a whole number: -1"),
            (("--user", "5"), "jetcron-launch: --user is not UID:GID: 5"),
            (("--user", "5:x"), "jetcron-launch: --user is not a whole number: 5:x"),
            # (uid_t)-1 would leave the id as it is, 2**32 wrap to root
            (("--user", "4294967295:1"), "jetcron-launch: --user is out of range: 4294967295:1"),
            (("--user", "4294967296:0"), "jetcron-launch: --user is out of range: 4294967296:0"),
            (("--private-tmp", "relative"), "jetcron-launch: --private-tmp is not an absolute path: relative"),
            (("--bogus", "1"), "jetcron-launch: option is not known: --bogus"),
            # a valid step before the bad one is not taken either: every option is read first
            (("--join", str(tmp_path / "missing"), "--nproc", "many"), "jetcron-launch: --nproc is not a whole "
                                                                         "number: many")]:
        done = launched(launcher, *options, program=touch)
        assert (done.returncode, done.stderr.strip()) == (SETUP_FAILED, said)
    relative = launched(launcher, program=("sh", "-c", "true"))
    assert (relative.returncode, relative.stderr.strip()) == (
        SETUP_FAILED, "jetcron-launch: the program is not an absolute path: sh")
    assert not ran.exists()


def test_a_failed_step_or_a_missing_program_says_which(launcher: list[str], tmp_path: Path) -> None:
    missing = tmp_path / "no-such-group" / "cgroup.procs"
    joined = launched(launcher, "--join", str(missing), program=("/bin/true",))
    assert (joined.returncode, joined.stderr.strip()) == (
        SETUP_FAILED, f"jetcron: could not join {missing}: No such file or directory")
    absent = launched(launcher, program=(str(tmp_path / "absent"),))
    assert (absent.returncode, absent.stderr.strip()) == (
        NOT_STARTED, f"jetcron: could not start {tmp_path / 'absent'}: No such file or directory")


def test_the_program_dies_with_the_process_that_launched_it(launcher: list[str], tmp_path: Path) -> None:
    # Given a parent that launched a long sleep and printed its pid
    parent = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys, time; p = subprocess.Popen(sys.argv[1:]); "
                               "print(p.pid, flush=True); time.sleep(60)", *launcher, "--", "/bin/sleep", "60"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert wait_until(lambda: _command(child) == "sleep", 5, what="the sleep to start")
        # When the parent is killed
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        # Then the kernel kills the sleep too
        assert wait_until(lambda: _command(child) in (None, "zombie"), 5, what="the sleep to die with its parent")
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


def _command(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None
    name, state = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2]
    return "zombie" if state == "Z" else name


def test_it_is_static_so_no_loader_reads_the_jobs_environment_as_root(binary: str) -> None:
    # A dynamic binary names its loader in a PT_INTERP program header; that loader would honour a job's LD_PRELOAD
    # while the launcher is still root. (64-bit little-endian ELF: the layout this build makes.) The twin's
    # interpreter is dynamic: it is started with an empty environment, the job's on its stdin.
    data = Path(binary).read_bytes()
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    kinds = [struct.unpack_from("<I", data, phoff + i * phentsize)[0] for i in range(phnum)]
    assert kinds and 3 not in kinds  # PT_INTERP = 3


def spare(launcher: list[str], *options: str, run: bytes, **kw: object) -> subprocess.CompletedProcess[str]:
    """A spare as the agent makes one (no environment but its id), given `run` on its stdin."""
    return subprocess.run([*launcher, "--spare", *options], input=run.decode(), capture_output=True, text=True,
                          timeout=10, check=False, env={"JETCRON_AGENT_ID": "agent-t"},
                          **kw)  # type: ignore[call-overload]


@root_only
@pytest.mark.skipif(not os.access(PYTHON, os.X_OK), reason=f"the child reports through {PYTHON}, missing here")
def test_a_spare_takes_its_steps_then_starts_the_run_from_its_stdin_as_its_user(launcher: list[str],
                                                                              tmp_path: Path) -> None:
    # Given a spare with /tmp bound to a scratch and files bounded at 1 MiB, and a run for nobody in that scratch
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    os.chown(scratch, 65534, 65534)
    env = {"GREETING": "hello world", "EQ": "a=b"}
    # (the environment as exec gave it: the report's own Python adds LC_CTYPE to os.environ in the C locale)
    given = "; print(sorted(open('/proc/self/environ').read().split(chr(0))[:-1]))"
    run = launch.spare_run(env, [PYTHON, "-c", REPORT + given], (65534, 65534), "/tmp")
    # When the run comes on its stdin
    done = spare(launcher, "--private-tmp", str(scratch), "--fsize", "1048576", run=run)
    # Then the program ran as nobody in every id, with no supplementary group, the parent-death signal set again,
    # the file size bound, in /tmp, with exactly the run's environment (nothing of the spare's own)
    assert done.returncode == 0, done.stderr
    report, environ = done.stdout.splitlines()
    assert report == "(65534, 65534, 65534) (65534, 65534, 65534) [] 9 1048576 /tmp"
    assert environ == str(["EQ=a=b", "GREETING=hello world"])


def test_a_spare_given_nothing_ends_and_one_given_a_bad_run_says_so_and_runs_nothing(launcher: list[str],
                                                                                   tmp_path: Path) -> None:
    ran = tmp_path / "ran"
    touch = ["/bin/sh", "-c", f"touch {ran}"]
    # An agent ending a spare unused closes its stdin: it exits 0
    assert spare(launcher, run=b"").returncode == 0
    for run, said in [
            (launch.spare_run({}, touch, (2**32 - 1, 2**32 - 1)),
             "jetcron: could not switch to uid 4294967295 gid 4294967295: Invalid argument"),
            (launch.spare_run({}, touch)[:-1], "jetcron: could not read the run from stdin (an item not ended by a "
                                               "NUL): Invalid argument"),
            (b"\0\0\0" b"3\0A=1\0/bin/true\0", "jetcron: could not read the run from stdin (not a user, a directory, "
                                              "an environment and a program): Invalid argument"),
            (launch.spare_run({}, ["sh", "-c", "true"]), "jetcron-launch: the program is not an absolute path: sh"),
            (launch.spare_run({}, touch, None, str(tmp_path / "missing")),
             f"jetcron: could not enter {tmp_path / 'missing'}: No such file or directory")]:
        done = spare(launcher, run=run)
        assert (done.returncode, done.stderr.strip()) == (SETUP_FAILED, said)
    # And its user and program come on stdin, never on its command line
    for options, said in [(("--user", "1:1"), "jetcron-launch: --user is not taken with: --spare (the run's user "
                                              "comes on stdin)"),
                          (("--", "/bin/true"), "jetcron-launch: -- is not taken with: --spare (the program comes on "
                                                "stdin)")]:
        done = spare(launcher, *options, run=launch.spare_run({}, touch))
        assert (done.returncode, done.stderr.strip()) == (SETUP_FAILED, said)
    assert not ran.exists()


GLIBC_OWN = (1 << 31) | (1 << 32)
"""Signals 32 and 33, which glibc keeps out of reach of sigaction: a launcher passes them on as it was given them."""


def test_the_program_starts_with_no_signal_ignored_or_blocked(launcher: list[str]) -> None:
    # CPython ignores SIGPIPE and SIGXFSZ in itself, and the agent may have been given more (nohup's SIGHUP): an
    # exec would pass every one on to the program. Given a launcher that itself ignores SIGHUP and blocks SIGUSR1
    def given() -> None:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})

    done = launched(launcher, program=("/bin/grep", "-E", "^Sig(Ign|Blk)", "/proc/self/status"),
                    stdin=subprocess.DEVNULL, preexec_fn=given)
    assert done.returncode == 0, done.stderr
    # Then the program it starts ignores and blocks none of them
    found = dict(line.split(":") for line in done.stdout.splitlines() if line)
    assert int(found["SigIgn"], 16) & ~GLIBC_OWN == 0, found
    assert int(found["SigBlk"], 16) & ~GLIBC_OWN == 0, found


def test_the_twins_interpreter_imports_nothing_from_the_folder_it_starts_in(tmp_path: Path) -> None:
    # Given a working directory (a job's scratch is its user's) holding modules named as the twin's imports
    marker = tmp_path / "imported"
    for name in ("ctypes", "os", "resource", "errno", "jetcron_launch", "sitecustomize"):
        (tmp_path / f"{name}.py").write_text(f"open({str(marker)!r}, 'a').write({name!r})\nraise SystemExit(99)\n")
    # When the twin starts a program there, as the agent runs it
    done = subprocess.run([*launch.launcher_argv(None), "--env-stdin", "--", "/bin/true"], input=b"",
                          capture_output=True, timeout=10, check=False, env={}, cwd=tmp_path)
    # Then it ran the program, and none of them
    assert (done.returncode, done.stderr) == (0, b"")
    assert not marker.exists()
