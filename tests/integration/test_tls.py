"""TLS on client and route connections: the whole system with auth runs over it, and nobody connects
without verifying the server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import nats
import nats.errors
import nats.js.errors
import pytest
from harness import Services, mint, run_cli, services_on, wait_for
from nats.js.api import StreamConfig

from jetcron.auth.authority import Authority
from jetcron.auth.certs import TlsFiles, ensure_local_tls
from jetcron.auth.local import SERVICE_ROLES
from jetcron.auth.roles import Role
from jetcron.bus.connect import Identity
from jetcron.bus.server import EmbeddedNats
from jetcron.core.errors import Untrusted
from jetcron.sdk.client import Client

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def tls(tmp_path: Path) -> TlsFiles:
    return ensure_local_tls(tmp_path / "tls")


@pytest.fixture
def tls_system(request: pytest.FixtureRequest, tmp_path: Path, tls: TlsFiles,
               authority: Authority) -> Iterator[Services]:
    """One node with TLS and auth on; each service with its credential and the CA."""
    server = EmbeddedNats(tmp_path / "nats", extra_config=authority.server_config(), tls=tls)
    server.start()
    creds = tmp_path / "creds"

    def identity(name: str, module: str) -> dict[str, str]:
        role = Role.AGENT if module == "agent" else SERVICE_ROLES[module]
        who = {"agent_id": name} if role is Role.AGENT else {}
        env = {"JETCRON_NATS_CREDS": mint(authority, creds / f"{name}.creds", role, **who),
               "JETCRON_NATS_TLS_CA": str(tls.ca)}
        if role is Role.API:
            env["JETCRON_JOB_SIGNING_KEY_FILE"] = str(authority.job_minter())
        return env

    try:
        yield from services_on(request, server, tmp_path, identity)
    finally:
        server.stop()


async def test_the_whole_system_runs_over_tls_and_the_cli_verifies_the_server(
        tls_system: Services, tls: TlsFiles, authority: Authority, tmp_path: Path) -> None:
    # Given every service connected over TLS, verifying the server with the CA
    await tls_system.start_system(agents=1)
    url = tls_system.server.url
    assert url.startswith("tls://")
    admin = mint(authority, tmp_path / "admin.creds", Role.ADMIN)

    # When a job is created through the SDK, which verifies the server too
    client = await Client.connect(url, timeout=10, identity=Identity(creds=admin, tls_ca=str(tls.ca)))
    try:
        await client.call("jobs.create", {"spec": {"name": "secure", "command": ["echo", "over tls"],
                                                   "schedule": {"kind": "now"}}})

        async def succeeded() -> str | None:
            runs = (await client.call("runs.list", {"job": "secure"}))["items"]
            return runs[0]["run_id"] if runs and runs[0]["state"] == "succeeded" else None

        run_id = await wait_for(succeeded, 30, what="the job to succeed over TLS")
        assert (await client.call("runs.logs", {"run_id": run_id}))["output"] == "over tls\n"
    finally:
        await client.close()

    # Then the CLI works given the CA, and refuses a server it cannot verify, by name and at once
    listed = run_cli(url, "--creds", admin, "--tls-ca", str(tls.ca), "jobs", "list")
    assert listed.returncode == 0 and "secure" in listed.stdout, listed.stderr
    stranger = ensure_local_tls(tmp_path / "other-ca")
    for ca in (None, stranger.ca):
        flags = ["--tls-ca", str(ca)] if ca else []
        refused = run_cli(url, "--creds", admin, *flags, "jobs", "list")
        assert refused.returncode == 1 and "error (untrusted)" in refused.stderr, refused.stderr
        assert "certificate" in " ".join(refused.stderr.split())


async def test_the_sdk_refuses_a_server_signed_by_another_ca(tmp_path: Path, tls: TlsFiles) -> None:
    server = EmbeddedNats(tmp_path / "nats", tls=tls)
    server.start()
    try:
        other = ensure_local_tls(tmp_path / "other")
        with pytest.raises(Untrusted, match="cannot verify the TLS certificate"):
            await Client.connect(server.url, timeout=3, identity=Identity(tls_ca=str(other.ca)))
    finally:
        server.stop()


async def test_a_cluster_forms_over_tls_routes(tmp_path: Path, tls: TlsFiles) -> None:
    # Given three nodes whose routes are mutual TLS (each node verifies the others' certificates)
    cluster = EmbeddedNats(tmp_path / "nats", nodes=3, tls=tls)
    cluster.start(timeout=60)
    try:
        conf = cluster.nodes[0].config_path.read_text()
        assert conf.count("tls {") == 2 and "verify: true" in conf
        # Then an R3 stream is made and stores a message: every route is up
        nc = await nats.connect(cluster.url.split(","), **Identity(tls_ca=str(tls.ca)).options())
        try:
            js = nc.jetstream(timeout=10)
            # (asked again while the new cluster elects its meta leader: under a loaded run that outlasted 10 s)
            await wait_for(lambda: js.add_stream(StreamConfig(name="ROUTES", subjects=["routes.>"], num_replicas=3)),
                           60, what="the R3 stream to be made", ignore=(nats.errors.TimeoutError,))
            # (and published to again while the new stream elects its leader: no responder until it has one)
            ack = await wait_for(lambda: js.publish("routes.x", b"hello", headers={"Nats-Msg-Id": "hello-1"}), 60,
                                 what="the first message stored", ignore=(nats.errors.TimeoutError,
                                                                          nats.errors.NoRespondersError,
                                                                          nats.js.errors.NoStreamResponseError))
            assert (await js.get_msg("ROUTES", ack.seq)).data == b"hello"
            assert len((await js.stream_info("ROUTES")).cluster.replicas or []) == 2  # type: ignore[union-attr]
        finally:
            await nc.close()
    finally:
        cluster.stop()
