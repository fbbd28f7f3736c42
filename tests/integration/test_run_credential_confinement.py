"""A tenant's job, with nothing but its own run credential, reaches nothing of another tenant's in JetStream.

Both jobs run for real on a system with auth on (every process with its own credential): acme's job saves a
checkpoint and claims a once() key; then mallory's job tries every way into them its credential might open.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import nats
from harness import Services, mint, wait_for

from jetcron.auth.authority import Authority
from jetcron.auth.roles import Role
from jetcron.bus.checkpoints import Checkpoints
from jetcron.bus.connect import Identity
from jetcron.sdk.client import Client
from jetcron.wire.subjects import STREAM_CHECKPOINTS, checkpoint_subject

SAVER = """
import os
from jetcron import checkpoint, once
with checkpoint.open() as ckpt:
    ckpt.save(1, {"secret": "acme-weights"})
with once("acme-email") as first:
    print("claimed" if first else "again", flush=True)
"""

# Each attack is a request a run's credential might make; it is "denied" when the server answers the request
# with a permission violation, "allowed" when anything else answers it.
ATTACKER = """
import asyncio, json, os, sys
import nats
from jetcron import checkpoint
from jetcron.bus.connect import Identity

VICTIM = json.loads(sys.argv[1])

async def main():
    errors = []
    async def on_error(exc):
        errors.append(str(exc))
    identity = Identity.from_env(os.environ)
    nc = await nats.connect(os.environ["JETCRON_NATS_URL"], error_cb=on_error, allow_reconnect=False,
                            **identity.options())
    outcome = {}
    for name, subject, body in VICTIM["attacks"]:
        errors.clear()
        try:
            reply = await nc.request(subject, body.encode(), timeout=1)
            answer = "allowed: " + reply.data[:200].decode(errors="replace")
        except Exception as exc:
            answer = f"no answer ({type(exc).__name__})"
        await asyncio.sleep(0.1)
        if any("permissions violation" in e.lower() for e in errors):
            answer = "denied"
        outcome[name] = answer
    await nc.close()
    print(json.dumps(outcome), flush=True)

asyncio.run(main())
# Its own checkpoint still works: the confinement is not a refusal of everything.
with checkpoint.open() as mine:
    mine.save(1, {"mine": True})
    print("own checkpoint:", json.dumps(mine.load().state), flush=True)
"""


async def test_a_tenants_job_cannot_read_write_or_purge_another_tenants_state(
        secure_services: Services, authority: Authority, tmp_path: Path) -> None:
    # Given the whole system with auth on, and acme's job that saved a checkpoint and claimed a once() key
    await secure_services.start_system(agents=1)
    admin = await Client.connect(secure_services.server.url, timeout=10,
                                 identity=Identity(creds=mint(authority, tmp_path / "admin.creds", Role.ADMIN)))
    try:
        victim = await _ran(admin, "acme", "saver", [sys.executable, "-c", SAVER])
        assert victim["output"].split() == ["claimed"]
        record = checkpoint_subject("acme", victim["run_id"], "rec")
        forged = json.dumps({"run_id": victim["run_id"], "step": 99, "attempt": 99, "state": "forged"})
        attacks = [
            ("purge checkpoints", f"$JS.API.STREAM.PURGE.{STREAM_CHECKPOINTS}", ""),
            ("purge old checkpoint store", "$JS.API.STREAM.PURGE.OBJ_jc_checkpoints", ""),
            ("read checkpoints by sequence", f"$JS.API.STREAM.MSG.GET.{STREAM_CHECKPOINTS}", '{"seq": 1}'),
            ("direct get, subject in body", f"$JS.API.DIRECT.GET.{STREAM_CHECKPOINTS}",
             json.dumps({"last_by_subj": record})),
            ("read acme's checkpoint by subject", f"$JS.API.DIRECT.GET.{STREAM_CHECKPOINTS}.{record}", ""),
            ("list checkpoint subjects", f"$JS.API.STREAM.INFO.{STREAM_CHECKPOINTS}", '{"subjects_filter": ">"}'),
            ("forge acme's checkpoint", record, forged),
            ("consume checkpoints", f"$JS.API.CONSUMER.CREATE.{STREAM_CHECKPOINTS}", "{}"),
            ("read idempotency keys by sequence", "$JS.API.STREAM.MSG.GET.KV_jc_idem", '{"seq": 1}'),
            ("list idempotency keys", "$JS.API.STREAM.INFO.KV_jc_idem", '{"subjects_filter": ">"}'),
            ("read acme's once key", "$JS.API.DIRECT.GET.KV_jc_idem.$KV.jc_idem.once.acme.acme-email", ""),
            ("overwrite acme's once key", "$KV.jc_idem.once.acme.acme-email", '{"state": "released"}'),
            ("purge idempotency keys", "$JS.API.STREAM.PURGE.KV_jc_idem", ""),
        ]

        # When mallory's job tries each with its own run credential
        attacker = await _ran(admin, "mallory", "prober",
                              [sys.executable, "-c", ATTACKER, json.dumps({"attacks": attacks})])

        # Then the server refuses every one, and mallory's own checkpoint works
        lines = attacker["output"].splitlines()
        outcome = json.loads(lines[0])
        assert outcome == {name: "denied" for name, _, _ in attacks}, attacker["output"]
        assert lines[1] == 'own checkpoint: {"mine": true}'

        # And acme's checkpoint and key are as acme left them
        nc = await nats.connect(secure_services.server.url,
                                **Identity(creds=str(tmp_path / "admin.creds")).options())
        try:
            saved = await Checkpoints(nc, nc.jetstream(), "acme").load(victim["run_id"])
            assert saved is not None and (saved.step, saved.state) == (1, {"secret": "acme-weights"})
        finally:
            await nc.close()
    finally:
        await admin.close()


async def _ran(admin: Client, tenant: str, name: str, command: list[str]) -> dict[str, Any]:
    """Run a job of `tenant` now and wait for it to succeed; its run with its output."""
    await admin.call("jobs.create", {"spec": {"name": name, "command": command, "schedule": {"kind": "now"},
                                              "tenant": tenant}})

    async def finished() -> dict[str, Any] | None:
        runs = (await admin.call("runs.list", {"job": f"{tenant}.{name}"}))["items"]
        return runs[0] if runs and runs[0]["state"] in ("succeeded", "failed", "dead") else None

    run = await wait_for(finished, 60, what=f"{tenant}'s {name} to end")
    output = (await admin.call("runs.logs", {"run_id": run["run_id"]}))["output"]
    assert run["state"] == "succeeded", output
    return {**run, "output": output}
