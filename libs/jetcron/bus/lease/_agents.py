"""Liveness per agent: one lease per agent (subjects.agent_lease_key) fences every attempt it holds."""

from __future__ import annotations

import secrets

import msgspec

from jetcron.bus.lease._store import TAKE_TRIES, LeaseStore
from jetcron.bus.lease._values import Lease, LeaseValue, Stop
from jetcron.core.errors import LeaseLost, WriteConflict
from jetcron.wire import subjects as s
from jetcron.wire.codec import encode


class AgentLeases(LeaseStore):
    """An agent's own lease: held, renewed with the stops written on it since, and written on to stop an attempt."""

    async def hold_agent(self, agent_id: str, ttl: float) -> Lease | None:
        """Take this agent's own lease; None while a claim of its own is still live (an earlier life of the
        agent, or a second process under its name: it expires within its TTL, and then this one takes it).

        Written over whatever else is last (a stop notice, a release marker, another writer's claim) by its
        revision, and never made to outlive it: the agent's claim must expire exactly a TTL after its last
        write, for that is when its runs are judged lost."""
        key = s.agent_lease_key(agent_id)
        value = LeaseValue(holder=agent_id, nonce=secrets.token_hex(8))
        for _ in range(TAKE_TRIES):
            mine = await self.own(key, agent_id)
            if mine is not None and mine.value.holder:
                return None
            current = await self.read(key)
            try:
                token = await self.log.write(key, agent_id, encode(value), ttl,
                                             current.token if current is not None else 0)
            except WriteConflict:
                continue
            return Lease(key=key, token=token, value=value, writer=agent_id)
        return None

    async def renew_agent(self, lease: Lease, ttl: float) -> tuple[Lease, tuple[Stop, ...]]:
        """Re-arm an agent lease, and the stops any notice written on it since the last renewal carried.

        Anything written on the key since our token fails the revision check: a stop notice, or a renewal of
        ours whose ack was lost. Then our own claim is read: still live and carrying our nonce, the renewal is
        written over the key's last write (a notice's stops are returned, to be carried out); gone or another
        life's (expired by the server's clock, taken by a new process of the agent), it is LeaseLost."""
        key, writer = lease.key, lease.writer
        value = msgspec.structs.replace(lease.value, at=None)
        try:
            return Lease(key=key, token=await self.log.write(key, writer, encode(value), ttl, lease.token),
                         value=value, writer=writer), ()
        except WriteConflict:
            pass
        for _ in range(TAKE_TRIES):
            mine = await self.own(key, writer)
            if mine is None or mine.value.nonce != lease.value.nonce:
                raise LeaseLost(f"agent lease {key} (token {lease.token}) was lost")
            last = await self.read(key)
            stops = last.value.stops if last is not None and last.writer == s.LEASE_REVOKER else ()
            try:
                token = await self.log.write(key, writer, encode(value), ttl, last.token if last is not None else 0)
            except WriteConflict:
                continue  # another notice landed meanwhile: read it too
            return Lease(key=key, token=token, value=value, writer=writer), stops
        raise WriteConflict(f"agent lease {key}: written by others on every try")

    async def notify_stops(self, agent_id: str, stop: Stop, ttl: float) -> bool:
        """Tell an agent holding its own lease to stop an attempt, through that lease: its next renewal (within
        a third of its TTL) finds the notice, whether or not the control message reached it. A notice keeps the
        stops of the last `ttl` seconds not yet read (appended to by revision); False when the agent holds no
        lease (gone, or an agent whose runs renew their own claims: the revoked run claim stops those)."""
        key = s.agent_lease_key(agent_id)
        for _ in range(TAKE_TRIES):
            current = await self.read(key)
            if current is None:
                return False
            kept = current.value.stops if current.writer == s.LEASE_REVOKER else ()
            stops = (*(x for x in kept if x.at >= stop.at - ttl), stop)
            try:
                await self.log.write(key, s.LEASE_REVOKER, encode(LeaseValue(holder="", revoked="stop", stops=stops)),
                                     ttl, current.token)
            except WriteConflict:
                continue
            return True
        return False
