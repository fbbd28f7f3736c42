"""What placed runs hold, per tenant and per named queue, against their quotas; and a queue quota's checks."""

from __future__ import annotations

import math
from typing import TypeVar

from jetcron.core.errors import InvalidSpec
from jetcron.core.ids import QUEUE_RE
from jetcron.core.models import QueueQuota, TenantPolicy
from jetcron.core.placing.agents_index import to_mcpu
from jetcron.core.placing.demand import Demand

_K = TypeVar("_K", str, tuple[str, str])


class QuotaBooks:
    """The charged runs and what they hold (mcpu, MB, gpus), summed per tenant and per tenant's named queue."""

    def __init__(self) -> None:
        self._usage: dict[str, tuple[int, int, int]] = {}
        self._queue_usage: dict[tuple[str, str], tuple[int, int, int]] = {}
        # Per charged run: its tenant and queue, and what it holds (mcpu, MB, gpus).
        self._charged: dict[str, tuple[str, str, tuple[int, int, int]]] = {}

    def block(self, demand: Demand, policy: TenantPolicy | None) -> str | None:
        """None if placing the demand keeps its named queue and its tenant within their quotas, else why not (the
        queue's quota is named first when both are reached: it is the narrower one)."""
        if policy is None:
            return None
        need = _amounts(demand)
        quota = policy.queues.get(demand.queue)
        if quota is not None:
            used = self._queue_usage.get((demand.tenant, demand.queue), (0, 0, 0))
            if (over := _over(quota, used, need)) is not None:
                return f"quota: queue {demand.tenant}/{demand.queue} at {over}"
        if (over := _over(policy, self._usage.get(demand.tenant, (0, 0, 0)), need)) is not None:
            return f"quota: tenant {demand.tenant} at {over}"
        return None

    def charge(self, demand: Demand) -> None:
        """Count a placed demand against its tenant and its queue; charging a run twice counts it once."""
        if demand.run_id in self._charged:
            return
        amounts = _amounts(demand)
        self._charged[demand.run_id] = (demand.tenant, demand.queue, amounts)
        _add(self._usage, demand.tenant, amounts, 1)
        _add(self._queue_usage, (demand.tenant, demand.queue), amounts, 1)

    def refund(self, demand: Demand) -> None:
        """Give back what charge() counted for this run (finished, cancelled, lost), to its tenant and its queue."""
        charged = self._charged.pop(demand.run_id, None)
        if charged is None:
            return
        tenant, queue, amounts = charged
        _add(self._usage, tenant, amounts, -1)
        _add(self._queue_usage, (tenant, queue), amounts, -1)

    def usage(self, tenant: str) -> tuple[float, int, int]:
        """The tenant's charged cpu, memory in MB and GPUs."""
        mcpu, mem, gpus = self._usage.get(tenant, (0, 0, 0))
        return mcpu / 1000, mem, gpus

    def queue_usage(self, tenant: str, queue: str) -> tuple[float, int, int]:
        """What the tenant's runs of one named queue hold: cpu, memory in MB and GPUs."""
        mcpu, mem, gpus = self._queue_usage.get((tenant, queue), (0, 0, 0))
        return mcpu / 1000, mem, gpus


QUOTA_MAX = 10**9
"""The largest quota a field may hold (as the tenant's own quotas)."""


def validate_queue_quotas(queues: dict[str, QueueQuota]) -> None:
    """Refuse a queue name a job could not be filed under, and a quota that is negative, not finite or absurd,
    naming the field (`queues.batch.max_cpu`) and the value."""
    for name, quota in queues.items():
        if not QUEUE_RE.fullmatch(name):
            raise InvalidSpec("queues", name, "a queue name must be 1-63 letters, digits, '-' or '_'")
        for field in ("max_cpu", "max_memory_mb", "max_gpus"):
            value = getattr(quota, field)
            if value is not None and not (math.isfinite(value) and 0 <= value <= QUOTA_MAX):
                raise InvalidSpec(f"queues.{name}.{field}", value, f"must be a number >= 0 and <= {QUOTA_MAX}")


def _over(quota: TenantPolicy | QueueQuota, used: tuple[int, int, int], need: tuple[int, int, int]) -> str | None:
    """`8/8 cpu (this run needs 1)` for the first of the quota's limits the demand would pass, else None."""
    limits = (
        (None if quota.max_cpu is None else to_mcpu(quota.max_cpu), 1000, "cpu"),
        (quota.max_memory_mb, 1, "MB memory"),
        (quota.max_gpus, 1, "gpus"),
    )
    for (limit, scale, unit), u, n in zip(limits, used, need, strict=True):
        if limit is not None and u + n > limit:
            return f"{_num(u / scale)}/{_num(limit / scale)} {unit} (this run needs {_num(n / scale)})"
    return None


def _add(usage: dict[_K, tuple[int, int, int]], key: _K, amounts: tuple[int, int, int], sign: int) -> None:
    """Add (sign 1) or take back (sign -1) a run's amounts; a key back at nothing leaves the books."""
    used = usage.get(key, (0, 0, 0))
    total = (used[0] + sign * amounts[0], used[1] + sign * amounts[1], used[2] + sign * amounts[2])
    if total == (0, 0, 0):
        usage.pop(key, None)
    else:
        usage[key] = total


def _amounts(d: Demand) -> tuple[int, int, int]:
    res = d.resources
    return to_mcpu(res.cpu) * res.hosts, res.memory_mb * res.hosts, res.gpus * res.hosts


def _num(x: float) -> str:
    return f"{x:.3f}".rstrip("0").rstrip(".")
