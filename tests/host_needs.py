"""What a test needs of the host it runs on: root, or a tool (promtool, chromium, setpriv).

Where it is missing, the test is skipped on a developer's machine and fails where the suite must run whole: CI
(`.ci/run` installs the tools and sets JETCRON_REQUIRE_TOOLS=1; where that is unset, a CI runner's `CI=true` asks
the same), so that CI never passes on a test it did not run. The failure names what was missing and how to get it.

A test says what it needs with the marker `@pytest.mark.needs("root", "setpriv", reason=...)`, checked before its
set-up (this module is a pytest plugin: tests/conftest.py loads it), or from a fixture with `need("chromium")`.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable, Mapping

import pytest

REQUIRE_ENV = "JETCRON_REQUIRE_TOOLS"

HOW = {
    "root": "run the suite as root (CI does): an agent isolates jobs by user, scratch and private /tmp only as root",
    "promtool": "apt-get install prometheus (Debian's package brings promtool)",
    "chromium": "apt-get install chromium",
    "setpriv": "apt-get install util-linux",
}
"""How to get each need; any other name is a command looked up on PATH."""


def required(env: Mapping[str, str] = os.environ) -> bool:
    """Whether a missing need fails the test rather than skipping it: JETCRON_REQUIRE_TOOLS (1 or 0) when set,
    otherwise whether a CI runner set CI."""
    chosen = env.get(REQUIRE_ENV, "").strip().lower()
    if chosen:
        return chosen not in ("0", "false", "no")
    return env.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _chromium() -> bool:
    from bench.browser import find_chromium  # the lookup the dashboard's tests launch it by

    return find_chromium() is not None


FINDERS: dict[str, Callable[[], bool]] = {"root": lambda: os.geteuid() == 0, "chromium": _chromium}
"""How each need other than a command on PATH is found here."""


def present(name: str) -> bool:
    find = FINDERS.get(name)
    return find() if find is not None else shutil.which(name) is not None


def missing(names: Iterable[str]) -> list[str]:
    """The needs of `names` this host lacks, in their order."""
    return [name for name in names if not present(name)]


def message(lacking: list[str], *, must_run: bool, why: str = "") -> str:
    """Why the test does not run: each need missing and how to get it, what the test does with it (`why`); and,
    where it must run, that it fails."""
    what = "; ".join(f"{name} is missing ({HOW.get(name, f'install {name}')})" for name in lacking)
    what += f": {why}" if why else ""
    if must_run:
        return f"{what}. Every test must run here ({REQUIRE_ENV}=1, or CI set): this one fails rather than skip"
    return what


def need(*names: str, why: str = "", env: Mapping[str, str] = os.environ) -> None:
    """Skip the calling test, or fail it where every test must run, when any of `names` is missing here."""
    lacking = missing(names)
    if not lacking:
        return
    if required(env):
        pytest.fail(message(lacking, must_run=True, why=why), pytrace=False)
    pytest.skip(message(lacking, must_run=False, why=why))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "needs(*what, reason=...): root or tools the test needs of its host "
                                       "(tests/host_needs.py): skipped without them, failed in CI")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    markers = list(item.iter_markers("needs"))
    names = [name for marker in markers for name in marker.args]
    if names:
        need(*dict.fromkeys(names), why="; ".join(m.kwargs["reason"] for m in markers if m.kwargs.get("reason")))
