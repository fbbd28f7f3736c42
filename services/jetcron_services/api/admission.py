"""Admission control at submit: a tenant over its submit rate or its pending-runs cap is refused
(rate_limited, with a retry-after), and so is every submit while a placement queue is nearly full
(unavailable, retry): better a clear refusal than an acknowledged job whose runs cannot be queued. Placement's
queue is the runs its leader holds from their records, as it last counted them.

Reads are cached for a second: a tenant's policy, placement's queue depths, the queue streams' sizes. The
submit rate is counted per api replica (a token bucket in memory), so N replicas admit up to N times the rate.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TypeVar

from jetcron.bus.ports import Records
from jetcron.core.models import TenantPolicy
from jetcron.core.placing import admission
from jetcron.core.timing.pacing import TokenBucket
from jetcron.wire import subjects as s
from jetcron.wire.messages import QueueDepths
from jetcron_services.api.ports import AdmissionPorts

CACHE_SECONDS = 1.0
T = TypeVar("T")


class _Cached:
    """One value re-read at most every CACHE_SECONDS; a failed read keeps the last one."""

    def __init__(self) -> None:
        self.values: dict[str, tuple[float, object]] = {}
        self.reading: dict[str, asyncio.Future[object]] = {}
        """Reads in flight: submits that come while one is read wait for it instead of reading it again (each
        expiry under a burst of submits was read once per submit in flight)."""

    async def get(self, key: str, read: Callable[[], Awaitable[T]], default: T) -> T:
        now = time.monotonic()
        found = self.values.get(key)
        if found is not None and now - found[0] < CACHE_SECONDS:
            return found[1]  # type: ignore[return-value]
        if (pending := self.reading.get(key)) is not None:
            return await asyncio.shield(pending)  # type: ignore[arg-type]
        pending = self.reading[key] = asyncio.get_running_loop().create_future()
        # Admission must not fail a submit for want of a figure (e.g. no leader yet): the last one, or the default
        value: object = found[1] if found is not None else default
        try:
            value = await read()
            self.values[key] = (now, value)
        except Exception:
            pass
        finally:  # also when cancelled: those waiting get the last figure
            del self.reading[key]
            pending.set_result(value)
        return value  # type: ignore[return-value]


class Admission:
    def __init__(self, ctx: AdmissionPorts) -> None:
        self.ctx = ctx
        self.buckets: dict[str, TokenBucket] = {}
        self.cache = _Cached()
        self._depths: Records[QueueDepths] | None = None

    async def admit(self, tenant: str) -> None:
        """Raise RateLimited or Unavailable if this tenant's submit must wait; take one submit otherwise."""
        for stream in (s.STREAM_PLACE, s.STREAM_ASSIGN):
            messages, limit = await self.cache.get(f"stream.{stream}", partial(self._size, stream), (0, 0))
            admission.check_queue(stream, messages, limit)
        # The runs waiting for placement are records the leader holds, not messages of JC_PLACE (which holds only
        # re-drives, and the PlaceRuns of services of the previous release): its count is what bounds them (and
        # the leader's memory).
        depths = await self.cache.get("depths", self._read_depths, None)
        waiting = sum(depths.by_tenant.values()) if depths is not None else 0
        admission.check_queue("placement", waiting, self.ctx.settings.place_queue_max)
        policy = await self.cache.get(f"policy.{tenant}", lambda: self._policy(tenant), None)
        if policy is None:
            return
        if policy.max_pending_runs is not None:
            pending = depths.by_tenant.get(tenant, 0) if depths is not None else 0
            admission.check_pending(tenant, pending, policy.max_pending_runs)
        if policy.max_submits_per_second is not None:
            now = time.monotonic()
            bucket = self.buckets.get(tenant)
            if bucket is None or bucket.rate != policy.max_submits_per_second:
                bucket = self.buckets[tenant] = TokenBucket.full(policy.max_submits_per_second, now)
            admission.check_rate(tenant, bucket.take(now))

    async def _size(self, stream: str) -> tuple[int, int]:
        state = await self.ctx.streams.state(stream)
        return state.messages, state.max_msgs

    async def _policy(self, tenant: str) -> TenantPolicy | None:
        found = await self.ctx.tenants.maybe(tenant)
        return None if found is None else found[0]

    async def _read_depths(self) -> QueueDepths | None:
        if self._depths is None:
            self._depths = await self.ctx.buckets.open(s.BUCKET_PLACEMENT, QueueDepths)
        found = await self._depths.maybe(s.PENDING_KEY)
        return None if found is None else found[0]
