"""Short-lived credentials for runs: an agent asks for one for a run it holds, the api signs it with the scoped
job key (jetcron.auth.roles.job_template: its tenant's once() keys and its own run's checkpoints, nothing else)."""

from __future__ import annotations

from pathlib import Path

from jetcron.auth import jwt
from jetcron.auth.authority import mint_job
from jetcron.auth.roles import job_inbox
from jetcron.bus.ports import Message
from jetcron.core.errors import JetcronError
from jetcron.core.models import Run
from jetcron.wire import subjects as s
from jetcron.wire.codec import decode, encode
from jetcron.wire.messages import MintRunCredential, RunCredential
from jetcron_services.api.ports import MinterPorts, ServeMintPorts

MARGIN_SECONDS = 600.0


def _account_of(creds_file: str) -> str:
    """The account a credential belongs to (its JWT's issuer_account): the one a run's JWT must name."""
    claims = jwt.decode(jwt.creds_jwt(Path(creds_file).read_text()))
    return str(claims["nats"]["issuer_account"])


def refusal(run: Run, agent: str, attempt: int) -> str:
    """Why `agent` may not have a credential for this attempt of `run` (empty: it may)."""
    if agent not in (run.agents or ([run.agent] if run.agent else [])):
        return f"run {run.run_id} is not assigned to {agent}"
    if run.attempt != attempt:
        return f"run {run.run_id} is at attempt {run.attempt}, not {attempt}"
    if run.state.terminal:
        return f"run {run.run_id} has ended ({run.state})"
    return ""


class Minter:
    def __init__(self, ctx: MinterPorts, seed_file: str) -> None:
        self.ctx = ctx
        self.key = jwt.key_from_seed(Path(seed_file).read_text().strip())
        self.account = _account_of(ctx.settings.nats_creds or "")

    async def handle(self, msg: Message) -> None:
        agent = msg.subject.rsplit(".", 1)[-1]  # the subject is the asker's own: its credential allows no other
        try:
            req = decode(msg.data, MintRunCredential)
            run, _ = await self.ctx.runs.get(req.run_id)
            why = refusal(run, agent, req.attempt)
            if why:
                answer = RunCredential(error=why)
            else:
                lifetime = (run.spec.timeout_seconds if run.spec and run.spec.timeout_seconds
                            else self.ctx.settings.job_credential_seconds) + MARGIN_SECONDS
                token = mint_job(self.key, self.account, req.public_key, run.tenant, run.run_id, lifetime)
                answer = RunCredential(jwt=token, inbox=job_inbox(run.tenant))
        except (JetcronError, ValueError) as exc:
            answer = RunCredential(error=str(exc))
        if answer.error:
            self.ctx.log.warning("run credential refused", agent=agent, reason=answer.error)
        await msg.respond(encode(answer))


async def serve_mint(ctx: ServeMintPorts) -> object | None:
    """Answer jc.mint.* (in the api's queue group) when this api holds the job signing key."""
    if not ctx.settings.job_signing_key_file or not ctx.settings.nats_creds:
        return None
    minter = Minter(ctx, ctx.settings.job_signing_key_file)
    return await ctx.rpc.serve(s.MINT_ALL, minter.handle, queue=s.API_QUEUE)
