"""Where a run goes: agents' capacity, placement and its books, fairness and quotas, preemption, gangs, admission.
Pure: no I/O.

Each module's public names are re-exported here, loaded on first use: importing one module of the group
loads that module alone."""

from __future__ import annotations

from jetcron.core.lazy import exports

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

__all__, __getattr__ = exports(__name__, _HOME)
