"""Where a run goes: agents' capacity, placement and its books, fairness and quotas, preemption, gangs, admission.
Pure: no I/O.

Each module's public names are re-exported here, loaded on first use: importing one module of the group
loads that module alone."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jetcron.core.placing.admission import (
        FULL as FULL,
    )
    from jetcron.core.placing.admission import (
        check_pending as check_pending,
    )
    from jetcron.core.placing.admission import (
        check_queue as check_queue,
    )
    from jetcron.core.placing.admission import (
        check_rate as check_rate,
    )
    from jetcron.core.placing.agents_index import (
        Accept as Accept,
    )
    from jetcron.core.placing.agents_index import (
        AgentState as AgentState,
    )
    from jetcron.core.placing.agents_index import (
        FreeIndex as FreeIndex,
    )
    from jetcron.core.placing.agents_index import (
        Used as Used,
    )
    from jetcron.core.placing.agents_index import (
        to_mcpu as to_mcpu,
    )
    from jetcron.core.placing.capacity import (
        CapacitySummary as CapacitySummary,
    )
    from jetcron.core.placing.capacity import (
        LeafShape as LeafShape,
    )
    from jetcron.core.placing.capacity import (
        Shape as Shape,
    )
    from jetcron.core.placing.capacity import (
        summarize as summarize,
    )
    from jetcron.core.placing.capacity import (
        unsatisfiable as unsatisfiable,
    )
    from jetcron.core.placing.demand import waits_from as waits_from
    from jetcron.core.placing.fairness import FairQueue as FairQueue
    from jetcron.core.placing.fairness_quotas import QUOTA_MAX as QUOTA_MAX
    from jetcron.core.placing.fairness_quotas import QuotaBooks as QuotaBooks
    from jetcron.core.placing.fairness_waiting import LEVELS as LEVELS
    from jetcron.core.placing.fairness_waiting import WaitingDemands as WaitingDemands
    from jetcron.core.placing.gangs import LEAF as LEAF
    from jetcron.core.placing.gangs import LeafIndex as LeafIndex
    from jetcron.core.placing.gangs import per_host as per_host
    from jetcron.core.placing.placement import Cluster as Cluster
    from jetcron.core.placing.placement import Strategy as Strategy
    from jetcron.core.placing.placement import Unplaced as Unplaced
    from jetcron.core.placing.placement_books import ClusterBooks as ClusterBooks
    from jetcron.core.placing.placement_books import check_resources as check_resources
    from jetcron.core.placing.placement_reasons import (
        constraints as constraints,
    )
    from jetcron.core.placing.placement_reasons import (
        cpu_text as cpu_text,
    )
    from jetcron.core.placing.placement_reasons import (
        matching as matching,
    )
    from jetcron.core.placing.placement_reasons import (
        never_reason as never_reason,
    )
    from jetcron.core.placing.placement_reasons import (
        now_reason as now_reason,
    )
    from jetcron.core.placing.preemption import (
        Amount as Amount,
    )
    from jetcron.core.placing.preemption import (
        Guards as Guards,
    )
    from jetcron.core.placing.preemption import (
        Holder as Holder,
    )
    from jetcron.core.placing.preemption import (
        Host as Host,
    )
    from jetcron.core.placing.preemption import (
        Plan as Plan,
    )
    from jetcron.core.placing.preemption import (
        choose as choose,
    )
    from jetcron.core.placing.preemption import (
        eligible as eligible,
    )
    from jetcron.core.placing.preemption import (
        guards_for as guards_for,
    )
    from jetcron.core.placing.preemption import (
        preemptible_anywhere as preemptible_anywhere,
    )
    from jetcron.core.placing.preemption import (
        short_of as short_of,
    )
    from jetcron.core.placing.preemption import (
        validate_preemption as validate_preemption,
    )
    from jetcron.core.placing.suspects import Suspects as Suspects

_HOME = {
    "Accept": "agents_index",
    "AgentState": "agents_index",
    "Amount": "preemption",
    "CapacitySummary": "capacity",
    "Cluster": "placement",
    "ClusterBooks": "placement_books",
    "FULL": "admission",
    "FairQueue": "fairness",
    "FreeIndex": "agents_index",
    "Guards": "preemption",
    "Holder": "preemption",
    "Host": "preemption",
    "LEAF": "gangs",
    "LEVELS": "fairness_waiting",
    "LeafIndex": "gangs",
    "LeafShape": "capacity",
    "Plan": "preemption",
    "QUOTA_MAX": "fairness_quotas",
    "QuotaBooks": "fairness_quotas",
    "Shape": "capacity",
    "Strategy": "placement",
    "Suspects": "suspects",
    "Unplaced": "placement",
    "Used": "agents_index",
    "WaitingDemands": "fairness_waiting",
    "check_pending": "admission",
    "check_queue": "admission",
    "check_rate": "admission",
    "check_resources": "placement_books",
    "choose": "preemption",
    "constraints": "placement_reasons",
    "cpu_text": "placement_reasons",
    "eligible": "preemption",
    "guards_for": "preemption",
    "matching": "placement_reasons",
    "never_reason": "placement_reasons",
    "now_reason": "placement_reasons",
    "per_host": "gangs",
    "preemptible_anywhere": "preemption",
    "short_of": "preemption",
    "summarize": "capacity",
    "to_mcpu": "agents_index",
    "unsatisfiable": "capacity",
    "validate_preemption": "preemption",
    "waits_from": "demand",
}
"""Where each re-exported name is defined, by module of jetcron.core.placing."""

__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
