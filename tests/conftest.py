"""Shared fixtures: the real nats-server on random loopback ports with a temporary store, one node or three."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import FAILURE_REPORTS, add_failure_report

from jetcron.bus.server import EmbeddedNats

@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    """Attach the logs of every process the test started to a failing test's report."""
    rep = yield
    if rep.failed and rep.when in ("setup", "call"):
        for name, report in item.stash.get(FAILURE_REPORTS, {}).items():
            try:
                text = report()  # type: ignore[operator]
            except Exception as exc:  # noqa: BLE001 - a broken report must not hide the failure
                text = f"(could not collect: {exc})"
            rep.sections.append((name, str(text)))
    return rep


def _server_log(server: EmbeddedNats, lines: int = 40) -> str:
    parts = []
    for node in server.nodes:
        log = node.log_path.read_text(errors="replace").splitlines()[-lines:] if node.log_path else []
        parts.append(f"----- nats-server {node.name}\n" + "\n".join(log))
    return "\n".join(parts)


def _running_server(request: pytest.FixtureRequest, base: Path, **kw: object) -> Iterator[EmbeddedNats]:
    server = EmbeddedNats(base, **kw)  # type: ignore[arg-type]
    try:
        server.start(timeout=30)  # waits for /healthz?js-enabled-only=true on every node
        add_failure_report(request, "nats-server log", lambda: _server_log(server))
        yield server
    finally:
        server.stop()  # SIGTERM, then SIGKILL, of the pids this object started, nothing else


@pytest.fixture
def nats_server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EmbeddedNats]:
    """One node, `sync_interval: always`, random client and monitor ports, store under tmp_path."""
    yield from _running_server(request, tmp_path / "nats")


@pytest.fixture
def nats_cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EmbeddedNats]:
    """Three clustered nodes (for chaos tests: stop_node / start_node one of `cluster.nodes`)."""
    yield from _running_server(request, tmp_path / "nats", nodes=3)
