"""`jetcron --version`: the installed package's version, with no server, no command and no settings read."""

from __future__ import annotations

from importlib.metadata import version

from typer.testing import CliRunner

from jetcron.cli.main import app


def test_version_prints_the_installed_packages_version_and_exits() -> None:
    done = CliRunner().invoke(app, ["--version"])
    assert (done.exit_code, done.output) == (0, f"jetcron {version('jetcron')}\n"), done.output


def test_version_wins_over_a_command() -> None:
    done = CliRunner().invoke(app, ["--version", "status"])
    assert (done.exit_code, done.output) == (0, f"jetcron {version('jetcron')}\n"), done.output
