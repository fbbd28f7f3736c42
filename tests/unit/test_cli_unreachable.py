"""A CLI command against a local system that is not running says so at once, and asks whether `jetcron up` is."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from jetcron.bus.server import free_port
from jetcron.cli.identity import write_context
from jetcron.cli.main import app as cli


# A hang guard: nats-py's own retries of a refused server took over 4 s before the command could say anything
@pytest.mark.timeout(3)
@pytest.mark.parametrize("argv", [["jobs", "list"], ["status"]], ids=["jobs_list", "status"])
def test_a_stopped_local_system_is_named_at_once(argv: list[str], monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path) -> None:
    # Given the context a `jetcron up` that has stopped left behind (its port now free)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv("JETCRON_NATS_URL", raising=False)
    url = f"nats://127.0.0.1:{free_port()}"
    write_context(url, None, None)

    # When a command is run
    result = CliRunner().invoke(cli, argv)

    # Then it fails naming the server, and asks whether `jetcron up` runs
    printed = " ".join(result.output.split())
    assert result.exit_code == 1, printed
    assert f"NATS at {url} refused the connection: nothing listens there; is `jetcron up` running?" in printed
