"""`jetcron --help` lists every command without importing any command's module, and each listed command is the
one that runs: its line is the command's own."""

from __future__ import annotations

import subprocess
import sys

import pytest

from jetcron.cli.main import COMMANDS, GROUPS, load

PROBE = """
import sys
from jetcron.cli.main import main
sys.argv = ["jetcron", "--help"]
try:
    main()
except SystemExit:
    pass
print(sorted(m for m in sys.modules if m.startswith(("jetcron.cli.", "jetcron_services", "nats", "jetcron.sdk",
                                                      "jetcron.bus", "jetcron.config", "structlog", "pydantic"))))
"""


def test_help_imports_no_command_module() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    assert "jobs" in done.stdout and "Create and manage jobs." in done.stdout
    assert done.stdout.strip().splitlines()[-1] == "['jetcron.cli.main']"


@pytest.mark.parametrize("name", [*COMMANDS, *GROUPS])
def test_each_listed_command_loads_with_its_own_line(name: str) -> None:
    command = load(name)
    assert command.name == name
    line = (GROUPS.get(name) or COMMANDS[name])[2]
    assert (command.help or "").startswith(line), (command.help, line)


LISTING = """
import sys
from jetcron.cli.main import main
sys.argv = ["jetcron", "--nats", "nats://127.0.0.1:1", "jobs", "list"]
try:
    main()
except SystemExit:
    pass
print(sorted({m.split(".")[0] for m in sys.modules} & {"pydantic", "croniter", "cron_descriptor", "icalendar",
                                                        "jetcron_services", "structlog"}))
"""


def test_jobs_list_imports_no_schedule_maths_and_no_pydantic() -> None:
    """What `jobs list` needs is the SDK, nats and a table: croniter, pydantic (typer's adapters from 0.29 on)
    and the rest are a tenth of a second of its start (bench/cli_start.py measures it)."""
    done = subprocess.run([sys.executable, "-c", LISTING], capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout + done.stderr
