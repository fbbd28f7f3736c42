"""The REST API keeps the word of its OpenAPI document: schemathesis (pinned in the dev extra) drives the real
gateway from the document alone, with a tenant's token and with the admin's, through all its phases (examples,
coverage, fuzzing, and the stateful phase that follows the document's links: create → get → trigger → cancel),
with every default check and one of its own (schemathesis_hooks.py), and finds nothing, whatever the seed: a fresh one
each run, named by a failure. No agent runs: the jobs it makes are recorded and never executed."""

from __future__ import annotations

import asyncio
import os
import re
import secrets
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from harness import Services, mint
from rest_support import Rest

from jetcron.auth.authority import Authority
from jetcron.auth.roles import Role
from jetcron.bus.connect import Identity
from jetcron.sdk.client import Client

CONFIG = Path(__file__).with_name("schemathesis.toml")
HOOKS = Path(__file__).with_name("schemathesis_hooks.py")
ST = str(Path(sys.executable).with_name("st"))
SEED = int(os.environ.get("JETCRON_FUZZ_SEED") or secrets.randbelow(2**32))
"""A fresh seed each run unless JETCRON_FUZZ_SEED names one (make test-fuzz picks and prints it): each run tries
other requests, and a failure names its seed so that it can be replayed."""
EXAMPLES = int(os.environ.get("JETCRON_FUZZ_EXAMPLES") or 40)
"""Cases per operation and phase."""

pytestmark = [pytest.mark.timeout(600), pytest.mark.fuzz]


@pytest.fixture
async def agentless_rest(secure_services: Services, authority: Authority, tmp_path: Path) -> AsyncIterator[Rest]:
    await secure_services.start_system(agents=0)
    gateway = secure_services.start("gateway", "gateway", JETCRON_HTTP_PORT="0")
    await gateway.wait_logged("gateway ready", 30)
    found = re.search(r"http://127\.0\.0\.1:(\d+)/api/v1", gateway.output())
    assert found, gateway.output()
    admin = await Client.connect(secure_services.server.url, identity=Identity(
        creds=mint(authority, tmp_path / "admin.creds", Role.ADMIN)))
    try:
        yield Rest(f"http://127.0.0.1:{found.group(1)}", admin)
    finally:
        await admin.close()


def _schemathesis(url: str, token: str, report: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ST, "--config-file", str(CONFIG), "run", f"{url}/api/v1/openapi.json", "-H", f"Authorization: Bearer {token}",
         "--phases", "examples,coverage,fuzzing,stateful", "--max-examples", str(EXAMPLES), "--seed", str(SEED),
         "--workers", "1", "--no-color", "--report", "junit", "--report-junit-path", str(report)],
        capture_output=True, text=True, timeout=540,
        env={**os.environ, "SCHEMATHESIS_HOOKS": HOOKS.stem,
             "PYTHONPATH": os.pathsep.join(filter(None, [str(HOOKS.parent), os.environ.get("PYTHONPATH")]))})


@pytest.mark.parametrize("who", ["tenant", "admin"])
async def test_the_gateway_keeps_the_word_of_its_openapi_document(agentless_rest: Rest, who: str,
                                                                   tmp_path: Path) -> None:
    token = await agentless_rest.token("acme" if who == "tenant" else None)
    done = await asyncio.to_thread(_schemathesis, agentless_rest.url, token, tmp_path / "junit.xml")
    replay = f"seed {SEED}: replay with JETCRON_FUZZ_SEED={SEED} make test-fuzz\n"
    tail = replay + done.stdout[-12000:] + done.stderr[-3000:]
    assert done.returncode == 0, tail
    assert "No issues found" in done.stdout or " 0 failures" in done.stdout or "passed" in done.stdout, tail
