"""Push a new account JWT (a revocation, a new signing key) to every server of a running system."""

from __future__ import annotations

import json

import nats
import nats.errors

from jetcron.bus.connect import Identity
from jetcron.core.errors import Unavailable

CLAIMS_UPDATE = "$SYS.REQ.CLAIMS.UPDATE"


async def push_account(url: str, token: str, identity: Identity, timeout: float = 5.0) -> str:
    """Send `token` to the servers' full resolver as the system account's user; the server that answers stores
    it and shares it with the rest of its cluster. Returns the server's message."""
    try:
        nc = await nats.connect(servers=url.split(","), name="jetcron-account-push", connect_timeout=3,
                                max_reconnect_attempts=0, allow_reconnect=False, **identity.options())
    except (OSError, nats.errors.Error) as exc:
        raise Unavailable(f"cannot reach NATS at {url} to push the account: {exc}") from None
    try:
        reply = await nc.request(CLAIMS_UPDATE, token.encode(), timeout=timeout)
    except (TimeoutError, nats.errors.TimeoutError, nats.errors.NoRespondersError) as exc:
        raise Unavailable(f"no server answered the account update ({type(exc).__name__})") from None
    finally:
        await nc.close()
    answer = json.loads(reply.data)
    if "error" in answer:
        raise Unavailable(f"the server refused the account update: {answer['error']}")
    return str(answer.get("data", {}).get("message", "updated"))
