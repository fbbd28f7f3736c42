"""Preemption: which running runs a waiting run that cannot be placed stops, to take their place (docs/preemption.md).

Pure. Placement's leader hands in what its books say (the agents the waiting run could run on and what is free on
each, the running runs and what each holds where) and carries out the answer; nothing here reads a clock or a
store. The rules:

- only runs of strictly lower priority than the waiting run's own (not its aged level), whose tenant's or queue's
  policy allows it (TenantPolicy.preemption, QueueQuota.preemption), that have run at least their minimum and
  were preempted fewer times than their maximum;
- the lowest priority first, then the most recently started (the least work lost), on the one agent (a gang:
  the one leaf) where the waiting run fits once they are gone; a gang is preempted whole, all its hosts;
- exactly what is needed: a victim whose going is not needed for the fit is kept; no set that frees enough means
  nothing is preempted;
- the waiting run must be within its tenant's and its queue's quotas once placed (the caller gives the room).
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import NamedTuple

import msgspec

from jetcron.core.errors import InvalidSpec
from jetcron.core.models import Preemption, Priority, Resources, TenantPolicy
from jetcron.core.placing.agents_index import to_mcpu

__all__ = ["Amount", "Guards", "Holder", "Host", "Plan", "choose", "eligible", "guards_for", "preemptible_anywhere",
           "short_of", "validate_preemption"]

MAX_PREEMPTIONS = 1000
MAX_SECONDS = 7 * 86400.0
"""The longest minimum runtime or grace period a policy may ask for."""
SHORT = ("gpus", "cpu", "memory", "slots")
"""What a waiting run may be short of on a host: the `reason` label of jetcron_preemptions_total."""


class Amount(NamedTuple):
    """Resources in the books' units: cpu in millicores, memory in MB, GPUs counted."""

    mcpu: int = 0
    memory_mb: int = 0
    gpus: int = 0

    def plus(self, other: Amount) -> Amount:
        return Amount(self.mcpu + other.mcpu, self.memory_mb + other.memory_mb, self.gpus + other.gpus)

    def covers(self, need: Amount) -> bool:
        return self.mcpu >= need.mcpu and self.memory_mb >= need.memory_mb and self.gpus >= need.gpus

    @staticmethod
    def of(res: Resources) -> Amount:
        """What one host of a run with these resources takes."""
        return Amount(to_mcpu(res.cpu), res.memory_mb, res.gpus)


class Guards(NamedTuple):
    """What protects a preemptible run: resolved from its queue's or tenant's policy and the cluster's settings."""

    max_preemptions: int
    min_runtime_seconds: float
    grace_seconds: float


class Host(msgspec.Struct, frozen=True, kw_only=True):
    """An agent the waiting run could ever run on (labels, capabilities and GPU model match), as the books see it."""

    agent_id: str
    leaf: str | None = None
    free: Amount
    free_slots: int | None = None
    """Attempts it may still be given (None: no limit)."""
    open: bool = True
    """Not draining, and for GPU work not suspect: nothing is placed on a closed host, preempted for or not."""


class Holder(msgspec.Struct, frozen=True, kw_only=True):
    """A running run and what it holds: a preemption candidate if its guards allow."""

    run_id: str
    attempt: int = 1
    tenant: str
    queue: str = "default"
    priority: Priority
    started_at: datetime | None
    """When its current attempt started (None: not started, so not preemptible)."""
    preemptions: int = 0
    holds: dict[str, Amount]
    """Per agent, what it holds there (a gang: every host)."""
    guards: Guards | None
    """None: its policy does not let it be preempted."""


class Plan(msgspec.Struct, frozen=True, kw_only=True):
    """The runs to preempt, and where the waiting run then fits."""

    run_id: str
    """The waiting run."""
    priority: Priority
    victims: list[Holder]
    where: str
    """"agent-2" for one host, "leaf l1" for a gang."""
    leaf: str | None = None
    """A gang's leaf."""
    hosts: list[str]
    """The agents of `where` (the waiting run lands on some of them)."""
    freed: Amount
    """What the victims free on those agents."""
    short: str
    """What the waiting run lacked there: gpus, cpu, memory or slots."""

    @property
    def freed_text(self) -> str:
        return _amount_text(self.freed, gpus=self.freed.gpus > 0)

    @property
    def reason(self) -> str:
        """The waiting run's reason: `preempting run X (low) to free 8 GPUs on leaf l1`."""
        names = ", ".join(f"{v.run_id} ({v.priority})" for v in self.victims)
        runs = "run" if len(self.victims) == 1 else "runs"
        return f"preempting {runs} {names} to free {self.freed_text} on {self.where}"

    def victim_reason(self) -> str:
        """What a victim's attempt record says: who took its place, and why."""
        return f"preempted by run {self.run_id} ({self.priority}) to free {self.freed_text} on {self.where}"


def guards_for(policy: TenantPolicy | None, queue: str, defaults: Guards) -> Guards | None:
    """The guards of a run of `queue` under its tenant's `policy`: the queue's own preemption setting when it has
    one, else the tenant's, each unset field from `defaults` (the cluster's settings). None: never preempted."""
    if policy is None:
        return None
    own = policy.queues.get(queue)
    chosen = own.preemption if own is not None and own.preemption is not None else policy.preemption
    if chosen is None or not chosen.enabled:
        return None
    return Guards(
        max_preemptions=defaults.max_preemptions if chosen.max_preemptions is None else chosen.max_preemptions,
        min_runtime_seconds=(defaults.min_runtime_seconds if chosen.min_runtime_seconds is None
                             else chosen.min_runtime_seconds),
        grace_seconds=defaults.grace_seconds if chosen.grace_seconds is None else chosen.grace_seconds)


def preemptible_anywhere(policy: TenantPolicy) -> bool:
    """Whether any of the tenant's runs could be preempted (its own setting or one of its queues')."""
    if policy.preemption is not None and policy.preemption.enabled:
        return True
    return any(q.preemption is not None and q.preemption.enabled for q in policy.queues.values())


def validate_preemption(policy: TenantPolicy) -> None:
    """Refuse a guard that is negative, not finite or absurd, naming the field (`preemption.grace_seconds`,
    `queues.batch.preemption.max_preemptions`) and the value."""
    settings = [("preemption", policy.preemption)]
    settings += [(f"queues.{name}.preemption", q.preemption) for name, q in policy.queues.items()]
    for where, p in settings:
        if p is not None:
            _check(where, p)


def _check(where: str, p: Preemption) -> None:
    if p.max_preemptions is not None and not 0 <= p.max_preemptions <= MAX_PREEMPTIONS:
        raise InvalidSpec(f"{where}.max_preemptions", p.max_preemptions, f"must be >= 0 and <= {MAX_PREEMPTIONS}")
    for field in ("min_runtime_seconds", "grace_seconds"):
        value = getattr(p, field)
        if value is not None and not (math.isfinite(value) and 0 <= value <= MAX_SECONDS):
            raise InvalidSpec(f"{where}.{field}", value, f"must be a number >= 0 and <= {MAX_SECONDS:g}")


def eligible(holder: Holder, priority: Priority, now: datetime) -> str | None:
    """None when a run of `priority` may preempt `holder` now, else why not."""
    if holder.priority.rank <= priority.rank:
        return f"priority {holder.priority} is not lower than {priority}"
    guards = holder.guards
    if guards is None:
        return "its tenant's policy does not allow preemption"
    if holder.started_at is None:
        return "not started"
    ran = (now - holder.started_at).total_seconds()
    if ran < guards.min_runtime_seconds:
        return f"ran {ran:.0f}s, under its minimum of {guards.min_runtime_seconds:g}s"
    if holder.preemptions >= guards.max_preemptions:
        return f"preempted {holder.preemptions} times already (at most {guards.max_preemptions})"
    return None


def choose(run_id: str, priority: Priority, res: Resources, hosts: list[Host], holders: list[Holder],
           now: datetime, room: Amount | None = None) -> Plan | None:
    """The runs to preempt so that the waiting run (`res` per host, `res.hosts` hosts) fits, or None.

    Per domain (each open host for one host, each leaf for a gang): its candidates, lowest priority first and most
    recently started first, are taken until enough hosts fit; then every one whose going turns out not to be
    needed is given back (last taken first). Of the domains that work, the plan whose most important victim is the
    least important wins, then the one that loses the least work (run time times hosts), then the fewest runs, then
    the name."""
    need, count = Amount.of(res), res.hosts
    if room is not None and not room.covers(Amount(need.mcpu * count, need.memory_mb * count, need.gpus * count)):
        return None  # outside its tenant's or queue's quota: taking others' place would not let it run
    candidates = [h for h in holders if eligible(h, priority, now) is None]
    if not candidates:
        return None
    best: tuple[tuple[int, float, int, str], Plan] | None = None
    for where, domain in _domains(hosts, count):
        plan = _plan_in(run_id, priority, where, domain, need, count, candidates)
        if plan is None:
            continue
        # Work lost in host-seconds: a gang loses its run time on every one of its hosts.
        lost = sum((now - v.started_at).total_seconds() * len(v.holds) for v in plan.victims
                   if v.started_at is not None)
        key = (-min(v.priority.rank for v in plan.victims), lost, len(plan.victims), where)
        if best is None or key < best[0]:
            best = (key, plan)
    return None if best is None else best[1]


def _domains(hosts: list[Host], count: int) -> list[tuple[str, list[Host]]]:
    open_hosts = [h for h in hosts if h.open]
    if count <= 1:
        return [(h.agent_id, [h]) for h in sorted(open_hosts, key=lambda h: h.agent_id)]
    leaves: dict[str, list[Host]] = {}
    for h in open_hosts:
        if h.leaf is not None:
            leaves.setdefault(h.leaf, []).append(h)
    return [(leaf, members) for leaf, members in sorted(leaves.items()) if len(members) >= count]


def _order(h: Holder) -> tuple[int, float, str]:
    """Lowest priority first, then the most recently started."""
    started = -h.started_at.timestamp() if h.started_at is not None else 0.0
    return (-h.priority.rank, started, h.run_id)


def _fitting(domain: list[Host], need: Amount, victims: list[Holder]) -> int:
    """How many hosts of the domain fit one host's share of the waiting run once `victims` are gone."""
    fit = 0
    for host in domain:
        free, slots = host.free, host.free_slots
        for v in victims:
            held = v.holds.get(host.agent_id)
            if held is not None:
                free = free.plus(held)
                slots = None if slots is None else slots + 1
        if free.covers(need) and (slots is None or slots > 0):
            fit += 1
    return fit


def _plan_in(run_id: str, priority: Priority, where: str, domain: list[Host], need: Amount, count: int,
             candidates: list[Holder]) -> Plan | None:
    ids = {h.agent_id for h in domain}
    local = sorted((c for c in candidates if ids & c.holds.keys()), key=_order)
    if not local or _fitting(domain, need, []) >= count:
        return None  # nothing to preempt here, or it fits already (the books' own fit decides that one)
    taken: list[Holder] = []
    for c in local:
        taken.append(c)
        if _fitting(domain, need, taken) >= count:
            break
    else:
        return None  # even every candidate here would not free enough: preempt nothing
    for c in reversed(list(taken)):
        rest = [v for v in taken if v is not c]
        if _fitting(domain, need, rest) >= count:
            taken = rest
    freed = Amount()
    for v in taken:
        for agent, held in v.holds.items():
            if agent in ids:
                freed = freed.plus(held)
    gang = count > 1
    return Plan(run_id=run_id, priority=priority, victims=taken, where=f"leaf {where}" if gang else where,
                leaf=where if gang else None, hosts=sorted(ids), freed=freed, short=short_of(domain, need))


def short_of(domain: list[Host], need: Amount) -> str:
    """What the waiting run lacked on the domain before any preemption: the first of gpus, cpu, memory and slots
    that some host of it did not have."""
    if any(h.free.gpus < need.gpus for h in domain):
        return "gpus"
    if any(h.free.mcpu < need.mcpu for h in domain):
        return "cpu"
    if any(h.free.memory_mb < need.memory_mb for h in domain):
        return "memory"
    return "slots"


def _amount_text(a: Amount, *, gpus: bool) -> str:
    if gpus:
        return f"{a.gpus} GPU" + ("" if a.gpus == 1 else "s")
    cpu = f"{a.mcpu / 1000:.3f}".rstrip("0").rstrip(".")
    return f"{cpu} cpu and {a.memory_mb} MB"
