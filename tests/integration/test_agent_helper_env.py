"""No process that sets a job's child up as root sees the job's environment
(services/jetcron_services/agent/host/launch.py): jetcron-launch, its twin in Python (where it is not built) and a
spare start with nothing of the job's, and the job's environment reaches its own program alone; and names that only a
loader, libc or shell reads are refused at create. Real agents, a real server."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import stat
from pathlib import Path
from typing import Any

import nats
import pytest
from harness import Services, wait_for
from test_runs import state_is

from jetcron.core.ids import job_key
from jetcron.sdk.client import ApiError, Client
from jetcron.wire import subjects as s

pytestmark = pytest.mark.needs("root", reason="the helpers run as root only on a root agent (these tests run as "
                                               "root, like an agent container does)")
ENDED = state_is("succeeded", "failed", "dead")
NEVER_SOON = {"kind": "cron", "cron": "0 0 1 1 *"}  # fires only when triggered during a test
LOCALE = "jcx"
"""The locale the job names: glibc looks for its files under LOCPATH, which it honours for any process that is
not setuid, root included."""
OPENAT = (257, 56)
"""openat's number on x86_64 and on arm64 (open's, x86_64 only, is 2: its path is its first argument)."""
CATEGORIES = ("LC_CTYPE", "LC_NUMERIC", "LC_TIME", "LC_COLLATE", "LC_MONETARY", "LC_MESSAGES", "LC_PAPER", "LC_NAME",
              "LC_ADDRESS", "LC_TELEPHONE", "LC_MEASUREMENT", "LC_IDENTIFICATION")


def waiting_to_open(fifo: Path) -> list[str]:
    """The processes blocked opening `fifo` (no writer yet), as 'comm (uid N)': the kernel's wchan says where a
    process waits, /proc/PID/syscall which call and its arguments, /proc/PID/mem the path it names."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError, ValueError, IndexError):
            if Path(f"/proc/{pid}/wchan").read_text() != "wait_for_partner":
                continue
            call, *args = Path(f"/proc/{pid}/syscall").read_text().split()
            pointer = int(args[1] if int(call) in OPENAT else args[0], 16)
            with open(f"/proc/{pid}/mem", "rb") as mem:
                mem.seek(pointer)
                path = mem.read(4096).split(b"\0", 1)[0].decode()
            if path == str(fifo):
                comm = Path(f"/proc/{pid}/comm").read_text().strip()
                uid = Path(f"/proc/{pid}/status").read_text().split("Uid:")[1].split()[1]
                found.append(f"{comm} (uid {uid})")
    return found


async def watch(fifos: list[Path], seen: list[str], stop: asyncio.Event) -> None:
    """Note every process that opens one of `fifos` (glibc's open of a locale file blocks on it until a writer
    comes), then let it go on: open for writing and close (it reads nothing, and falls back to the C locale)."""
    while not stop.is_set():
        for fifo in fifos:
            waiting = waiting_to_open(fifo)
            try:
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as exc:
                assert exc.errno == errno.ENXIO, exc  # no reader
                continue
            os.close(fd)
            seen.extend(f"{name} opened {fifo.name}" for name in waiting or ["a process (not named)"])
        await asyncio.sleep(0.02)


async def store_as_an_older_api_did(url: str, key: str, renames: dict[str, str]) -> None:
    """Rename variables of a stored job in place: what the api accepted before it refused these names."""
    nc = await nats.connect(url)
    try:
        kv = await nc.jetstream().key_value(s.BUCKET_JOBS)
        entry = await kv.get(key)
        assert entry.value is not None
        value = entry.value
        for old, new in renames.items():
            value = value.replace(f'"{old}"'.encode(), f'"{new}"'.encode())
        await kv.update(key, value, last=entry.revision)
    finally:
        await nc.close()


async def test_loader_and_shell_variables_are_refused_at_create_by_name(services: Services, client: Client) -> None:
    services.start("api", "api")
    await services["api"].wait_logged("api ready", 30)
    for name in ("GCONV_PATH", "LOCPATH", "NLSPATH", "GLIBC_TUNABLES", "MALLOC_ARENA_MAX", "HOSTALIASES",
                 "RES_OPTIONS", "LOCALDOMAIN", "BASHOPTS", "CDPATH"):
        for where, spec in (("env", {"env": {name: "/tmp/x"}}), ("secrets", {"secrets": [name]})):
            with pytest.raises(ApiError) as caught:
                await client.call("jobs.create", {"spec": {"name": "j", "command": ["true"], **spec}})
            assert caught.value.code == "invalid" and name in str(caught.value), caught.value
            assert str(caught.value).startswith(f"{where}.{name}" if where == "env" else "secrets[0]"), caught.value
    assert (await client.call("jobs.list"))["items"] == []


@pytest.mark.parametrize(("launcher", "spare"), [("true", "false"), ("false", "false"), ("false", "true")],
                         ids=["jetcron-launch", "twin", "twin-spare"])
async def test_the_launcher_never_hands_the_jobs_environment_to_a_root_helper(
        services: Services, client: Client, tmp_path: Path, launcher: str, spare: str) -> None:
    # Given an agent running as root that starts children through jetcron-launch or its twin, spawned or in a spare
    await services.start_system(agents=1, JETCRON_AGENT_JOB_USER="nobody", JETCRON_AGENT_LAUNCHER=launcher,
                                JETCRON_AGENT_SPARE=spare)
    assert f'"launcher": {launcher}' in services["agent-1"].output()
    # And a locale whose files are pipes, in a folder only root may enter: a process that loads it waits there
    locales = tmp_path / "locales"
    (locales / LOCALE).mkdir(parents=True)
    locales.chmod(0o700)
    fifos = [locales / LOCALE / category for category in CATEGORIES]
    for fifo in fifos:
        os.mkfifo(fifo, 0o600)
        assert stat.S_ISFIFO(fifo.stat().st_mode)
    # And a job stored with LOCPATH pointing there, as the api stored such jobs before it refused the name
    spec: dict[str, Any] = {"name": "localised", "command": ["sh", "-c", 'echo "$LOCPATH $LC_ALL"'],
                            "schedule": NEVER_SOON, "env": {"LOCPATH_LATER": str(locales), "LC_ALL": LOCALE},
                            "retry": {"max_attempts": 1}}
    await client.call("jobs.create", {"spec": spec})
    await store_as_an_older_api_did(services.server.url, job_key("default", "localised"),
                                    {"LOCPATH_LATER": "LOCPATH"})

    # When it runs, while every process that opens the pipe is noted
    seen: list[str] = []
    stop = asyncio.Event()
    watcher = asyncio.ensure_future(watch(fifos, seen, stop))
    try:
        run_id = (await client.call("jobs.trigger", {"name": "localised"}))["run_id"]

        async def ended() -> dict[str, Any] | None:
            run: dict[str, Any] = await client.call("runs.get", {"run_id": run_id})
            return run if ENDED(run) else None

        run = await wait_for(ended, 30, what="the run to end")
    finally:
        stop.set()
        await watcher

    # Then no process of its launch loaded anything the job named: the launcher runs as root
    assert seen == [], f"opened as the job's LOCPATH named: {seen}"
    # And the job's own program got its variables, as it asked
    output = (await client.call("runs.logs", {"run_id": run_id}))["output"]
    assert (run["state"], output) == ("succeeded", f"{locales} {LOCALE}\n"), (run, output)
