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
