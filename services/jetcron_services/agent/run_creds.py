"""A run's own short-lived NATS credential, for its once() keys and checkpoints: the agent makes a key pair per
attempt and asks the api to sign it; the seed stays on this host and goes only to the run's process."""

from __future__ import annotations

from jetcron.auth import jwt
from jetcron.bus.ports import Rpc
from jetcron.bus.rpc import NoAnswer
from jetcron.wire import subjects as s
from jetcron.wire.codec import decode, encode
from jetcron.wire.messages import AssignRun, MintRunCredential, RunCredential


async def run_credential(rpc: Rpc, cmd: AssignRun, timeout: float = 5.0) -> tuple[dict[str, str], str]:
    """The environment that carries the credential, or ({}, why not)."""
    user = jwt.new_key("user")
    request = MintRunCredential(run_id=cmd.run_id, attempt=cmd.attempt, public_key=user.public)
    try:
        reply = await rpc.request(s.mint_subject(cmd.agent), encode(request), timeout=timeout)
    except NoAnswer as exc:
        return {}, f"no api answered ({exc})"
    answer = decode(reply.data, RunCredential)
    if answer.error:
        return {}, answer.error
    return {"JETCRON_NATS_JWT": answer.jwt, "JETCRON_NATS_SEED": user.seed, "JETCRON_NATS_INBOX": answer.inbox}, ""
