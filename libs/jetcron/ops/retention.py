"""What new runs are stamped with: their retention from their job, its tenant and the cluster
(jetcron.core.lifecycle.retention), each tenant's policy read again at most every REFRESH seconds."""

from __future__ import annotations

import time
from collections.abc import Callable

from jetcron.bus.ports import Records
from jetcron.core.errors import JetcronError
from jetcron.core.lifecycle.retention import ClusterHistory, counts, keep_seconds, resolve
from jetcron.core.models import HistoryPolicy, JobSpec, TenantPolicy

REFRESH = 30.0
"""Seconds a tenant's policy is used before it is read again: a change applies to runs recorded after it, within
this long; the trigger records thousands of runs a second and must not read the tenant for each."""


class History:
    """The cluster's retention and each tenant's, as the trigger, the api and the tracker stamp new runs."""

    def __init__(self, tenants: Records[TenantPolicy], cluster: ClusterHistory,
                 monotonic: Callable[[], float] = time.monotonic, refresh: float = REFRESH) -> None:
        self.tenants = tenants
        self.cluster = cluster
        self._monotonic = monotonic
        self._refresh = refresh
        self._read: dict[str, tuple[HistoryPolicy | None, float]] = {}

    async def tenant(self, tenant: str) -> HistoryPolicy | None:
        """The tenant's own policy (None: it has none). A read that fails keeps what was read before (or none):
        recording a run must not wait on the tenants bucket."""
        now = self._monotonic()
        cached = self._read.get(tenant)
        if cached is not None and now - cached[1] < self._refresh:
            return cached[0]
        try:
            found = await self.tenants.maybe(tenant)
        except JetcronError:
            return cached[0] if cached is not None else None
        policy = found[0].history if found is not None else None
        self._read[tenant] = (policy, now)
        return policy

    def may_count(self, spec: JobSpec) -> bool:
        """Whether a count limit may apply to `spec`'s runs (without a read: a tenant not read yet may have one)."""
        layers = [spec.history, self.cluster.policy()]
        cached = self._read.get(spec.tenant)
        if cached is None:
            return True
        layers.append(cached[0])
        return any(p is not None and counts(p) for p in layers)

    async def keep_for(self, spec: JobSpec) -> float:
        """Run.keep_seconds of a new run of `spec`."""
        return keep_seconds(spec, await self.tenant(spec.tenant), self.cluster)

    async def policy(self, spec: JobSpec) -> HistoryPolicy:
        """The job's resolved policy (its count limits, for the tracker's pruning)."""
        return resolve(spec.history, await self.tenant(spec.tenant), self.cluster)
