"""Shared fixtures: the real nats-server (random loopback ports, temporary store; one node or three), services
as subprocesses against it, an SDK client."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path

# Imported at collection rather than by hypothesis's pytest plugin at the session's end: pytest rewrites a module's
# asserts as it imports it, and Python 3.11.7's ast.parse can refuse that late in a long run of asyncio tests
# ("SystemError: AST constructor recursion depth mismatch"), failing a run whose tests all passed.
import hypothesis  # noqa: F401
import nats
import pytest
from harness import FAILURE_REPORTS, Services, add_failure_report, mint, services_on
from nats.js import JetStreamContext

from jetcron.auth.authority import Authority
from jetcron.auth.keyfile import ensure_key_file
from jetcron.auth.local import SERVICE_ROLES
from jetcron.auth.roles import Role
from jetcron.bus.server import EmbeddedNats
from jetcron.bus.topology import ensure_topology
from jetcron.sdk.client import Client

pytest_plugins = ["host_needs"]
"""`@pytest.mark.needs("root", "promtool", ...)`: skipped without them, failed in CI (tests/host_needs.py)."""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    """Attach the logs of every process the test started to a failing test's report."""
    rep = yield
    if rep.failed and rep.when in ("setup", "call"):
        for name, report in item.stash.get(FAILURE_REPORTS, {}).items():
            try:
                text = report()
            except Exception as exc:
                text = f"(could not collect: {exc})"
            rep.sections.append((name, str(text)))
    return rep


GUARANTEES_REPORT = os.environ.get("JETCRON_GUARANTEES_REPORT")
"""Set (make chaos): every test's outcome, duration and recorded properties (a chaos test's figures, a bad
input's row) go to this JSON file at the end of the session; tests/chaos/guarantees.py makes the table of
docs/guarantees.md from it."""
_results: dict[str, dict[str, object]] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if not GUARANTEES_REPORT:
        return
    entry = _results.setdefault(report.nodeid, {"outcome": "passed", "duration_s": 0.0})
    entry["duration_s"] = round(float(entry["duration_s"]) + report.duration, 3)  # type: ignore[arg-type]
    if report.failed:
        entry["outcome"] = "failed"
    elif report.skipped and entry["outcome"] == "passed":
        entry["outcome"] = "skipped"
    entry.update(dict(report.user_properties))


def pytest_sessionfinish(session: pytest.Session) -> None:
    if GUARANTEES_REPORT and _results:
        path = Path(GUARANTEES_REPORT)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
                                    "tests": _results}, indent=1, default=str) + "\n")


def _server_log(server: EmbeddedNats, lines: int = 40) -> str:
    parts = []
    for node in server.nodes:
        log = node.log_path.read_text(errors="replace").splitlines()[-lines:] if node.log_path else []
        parts.append(f"----- nats-server {node.name}\n" + "\n".join(log))
    return "\n".join(parts)


def _running_server(request: pytest.FixtureRequest, base: Path, **kw: object) -> Iterator[EmbeddedNats]:
    server = EmbeddedNats(base, **kw)  # type: ignore[arg-type]
    try:
        server.start(timeout=30)  # waits for /healthz on every node (a cluster: until its meta leader is known)
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


@pytest.fixture
def authority(tmp_path: Path) -> Authority:
    """The keys of a system with auth on: operator, accounts, and credentials minted from them."""
    return Authority.ensure(tmp_path / "auth")


@pytest.fixture
def secure_server(request: pytest.FixtureRequest, authority: Authority, tmp_path: Path) -> Iterator[EmbeddedNats]:
    """One node in operator mode trusting `authority`: every connection needs a credential of it."""
    yield from _running_server(request, tmp_path / "nats", extra_config=authority.server_config())


@pytest.fixture
def secure_services(request: pytest.FixtureRequest, secure_server: EmbeddedNats, authority: Authority,
                    tmp_path: Path) -> Iterator[Services]:
    """Services on `secure_server`, each process with the credential of its own role (an agent: its own id)."""
    creds_dir = tmp_path / "creds"

    def identity(name: str, module: str) -> dict[str, str]:
        role = Role.AGENT if module == "agent" else SERVICE_ROLES[module]
        who = {"agent_id": name} if role is Role.AGENT else {}
        env = {"JETCRON_NATS_CREDS": mint(authority, creds_dir / f"{name}.creds", role, **who)}
        if role is Role.API:
            env["JETCRON_JOB_SIGNING_KEY_FILE"] = str(authority.job_minter())
        if role in (Role.API, Role.AGENT, Role.NOTIFIER):
            env["JETCRON_SECRETS_KEY_FILE"] = str(ensure_key_file(authority.root / "secrets.key"))
        return env

    yield from services_on(request, secure_server, tmp_path, identity)


@pytest.fixture
def services(request: pytest.FixtureRequest, nats_server: EmbeddedNats, tmp_path: Path) -> Iterator[Services]:
    """Start services with `services.start(...)` or `await services.start_system()`; all stopped afterwards."""
    yield from services_on(request, nats_server, tmp_path)


@pytest.fixture
def cluster_services(request: pytest.FixtureRequest, nats_cluster: EmbeddedNats, tmp_path: Path) -> Iterator[Services]:
    """The same against a 3-node cluster (streams and buckets at R3); `cluster_services.server.nodes` to stop one."""
    yield from services_on(request, nats_cluster, tmp_path)


@pytest.fixture
async def client(nats_server: EmbeddedNats) -> AsyncIterator[Client]:
    c = await Client.connect(nats_server.url, timeout=10)
    try:
        yield c
    finally:
        await c.close()


@pytest.fixture
async def topology_js(nats_server: EmbeddedNats) -> AsyncIterator[JetStreamContext]:
    """A JetStream context on `nats_server` with jetcron's streams and buckets made: for tests of one store."""
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream(timeout=5)
    await ensure_topology(js)
    try:
        yield js
    finally:
        await nc.close()
