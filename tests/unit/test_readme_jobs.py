"""The README's jobs that run by themselves soon after they are made (`--at now`, `--every`) work on a fresh machine:
a newcomer who types them gets runs that succeed, not a first dead letter from a service that is not there or a
script they do not have."""

from __future__ import annotations

import shlex
from pathlib import Path

README = Path(__file__).parents[2] / "README.md"


def soon_jobs() -> list[tuple[str, list[str]]]:
    """(the line, the job's command after `--`) of each `jetcron jobs create` in a code block that runs soon."""
    found = []
    for block in README.read_text().split("```")[1::2]:
        for line in block.replace("\\\n", " ").splitlines():
            if not line.startswith("jetcron jobs create"):
                continue
            words = shlex.split(line, comments=True)
            if "--" not in words:
                continue
            flags, command = words[:words.index("--")], words[words.index("--") + 1:]
            if "--every" in flags or ("--at" in flags and flags[flags.index("--at") + 1] == "now"):
                found.append((line, command))
    return found


def test_the_readmes_soon_running_jobs_need_no_network_and_no_file_of_the_readers() -> None:
    jobs = soon_jobs()
    assert len(jobs) >= 2, "the README's hello and tick examples"
    for line, command in jobs:
        text = " ".join(command)
        assert "://" not in text, f"calls the network, which a fresh machine may not answer: {line}"
        assert not command[0].startswith(("./", "/")) or command[0] in ("/bin/sh", "/usr/bin/env"), (
            f"runs a file the reader does not have: {line}")
