"""A test that needs root or a tool (tests/host_needs.py) is skipped without it on a developer's machine and fails in
CI, naming what is missing: CI never passes on a test it did not run."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import host_needs
import pytest
from host_needs import message, missing, required

TESTS = Path(host_needs.__file__).parent
INNER = '''
import pytest
from host_needs import need

@pytest.mark.needs("jetcron-no-such-tool", reason="it checks the rules")
def test_marked():
    pass

@pytest.fixture
def tool():
    need("jetcron-no-such-tool", "sh")

def test_from_a_fixture(tool):
    pass

@pytest.mark.needs("sh")
def test_with_what_it_needs():
    pass
'''


@pytest.mark.parametrize(("env", "must_run"), [
    pytest.param({}, False, id="a_developer"),
    pytest.param({"CI": "true"}, True, id="a_ci_runner"),
    pytest.param({"CI": "false"}, False, id="ci_false"),
    pytest.param({"JETCRON_REQUIRE_TOOLS": "1"}, True, id="asked_by_ci_run"),
    pytest.param({"CI": "true", "JETCRON_REQUIRE_TOOLS": "0"}, False, id="ci_that_opts_out"),
])
def test_tools_are_required_where_ci_runs_or_asks(env: dict[str, str], must_run: bool) -> None:
    assert required(env) is must_run


def test_a_missing_need_is_found_and_named_with_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert missing(["sh", "root", "jetcron-no-such-tool"]) == ["root", "jetcron-no-such-tool"]
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert missing(["root", "sh"]) == []
    assert message(["promtool"], must_run=False, why="it checks the rules") == (
        "promtool is missing (apt-get install prometheus (Debian's package brings promtool)): it checks the rules")
    assert message(["jetcron-no-such-tool"], must_run=True).startswith(
        "jetcron-no-such-tool is missing (install jetcron-no-such-tool). Every test must run here "
        "(JETCRON_REQUIRE_TOOLS=1, or CI set)")


def _outcomes(tmp_path: Path, **env: str) -> dict[str, tuple[str, str]]:
    """Each test of INNER run in a pytest session of its own with the plugin loaded: its outcome and message."""
    (tmp_path / "test_inner.py").write_text(INNER)
    report = tmp_path / f"report-{len(env)}.xml"
    clean = {k: v for k, v in os.environ.items() if k not in ("CI", host_needs.REQUIRE_ENV)}
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "host_needs", "-q", f"--junitxml={report}",
                           "test_inner.py"], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={**clean, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONPATH": str(TESTS), **env})
    assert report.exists(), done.stdout + done.stderr
    found = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        outcome = next(((child.tag, child.get("message", "")) for child in case
                        if child.tag in ("skipped", "failure", "error")), ("passed", ""))
        found[case.get("name", "")] = outcome
    return found


def test_without_its_tool_a_test_is_skipped_on_a_developers_machine(tmp_path: Path) -> None:
    outcomes = _outcomes(tmp_path)
    assert {name: kind for name, (kind, _) in outcomes.items()} == {
        "test_marked": "skipped", "test_from_a_fixture": "skipped", "test_with_what_it_needs": "passed"}
    assert outcomes["test_marked"][1] == (
        "jetcron-no-such-tool is missing (install jetcron-no-such-tool): it checks the rules")


def test_without_its_tool_a_test_fails_in_ci_naming_what_is_missing(tmp_path: Path) -> None:
    outcomes = _outcomes(tmp_path, JETCRON_REQUIRE_TOOLS="1")
    assert {name: kind for name, (kind, _) in outcomes.items()} == {
        "test_marked": "error", "test_from_a_fixture": "error", "test_with_what_it_needs": "passed"}
    for name in ("test_marked", "test_from_a_fixture"):
        assert "jetcron-no-such-tool is missing (install jetcron-no-such-tool)" in outcomes[name][1], outcomes[name]
        assert "Every test must run here" in outcomes[name][1]
