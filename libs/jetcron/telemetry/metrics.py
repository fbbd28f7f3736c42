"""Every Prometheus metric jetcron exports, in one place (base units, no run or job ids as labels)."""

from __future__ import annotations

from typing import Any, TypeVar, cast

from prometheus_client import Counter, Gauge, Histogram

from jetcron.core.models import Priority, RunState

_LATENCY = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900)

API_REQUESTS = Counter("jetcron_api_requests_total", "API requests by verb and outcome", ["verb", "outcome"])
QUEUE_DEPTH = Gauge("jetcron_queue_depth", "Runs waiting for placement, by priority", ["priority"])
RUN_WAIT = Histogram("jetcron_run_wait_seconds", "Due time to process start", buckets=_LATENCY)
FIRE_LATENESS = Histogram("jetcron_fire_lateness_seconds", "Nominal fire time to run recorded", buckets=_LATENCY)
OCCURRENCES = Counter("jetcron_occurrences_total", "Occurrences recorded by the trigger", ["result"])
SKIPPED_BY_CALENDAR = Counter("jetcron_occurrences_skipped_by_calendar_total",
                              "Occurrences the trigger recorded skipped because of a job's calendars: on an "
                              "exclude calendar, outside an only calendar, or naming a calendar that is gone",
                              ["kind"])
FIRE_GATE_DUPLICATES = Counter("jetcron_fire_gate_duplicates_total", "Second firings stopped by the KV-create gate")
RUNS_FINISHED = Counter("jetcron_runs_finished_total", "Runs reaching a terminal state", ["outcome"])
TOPOLOGY_RECREATED = Counter("jetcron_topology_recreated_total",
                             "Streams, buckets and durable consumers found deleted and made again, empty", ["part"])
RETRIES = Counter("jetcron_retries_total", "Attempts scheduled after a failure or loss")
DEAD_LETTERED = Counter("jetcron_dead_lettered_total", "Runs sent to the dead-letter stream")
LEASES_EXPIRED = Counter("jetcron_leases_expired_total", "Run leases found expired (runs declared lost)")
REPORTS_DROPPED = Counter("jetcron_reports_dropped_total", "Stale or duplicate reports dropped", ["reason"])
TAKEOVERS = Counter("jetcron_takeovers_total", "Leader or shard leases taken over", ["kind"])
TAKEOVER_DURATION = Histogram("jetcron_takeover_duration_seconds", "Lease won to ready to serve: the new holder's "
                              "start-up (the whole outage is jetcron_takeover_gap_seconds)", ["kind"],
                              buckets=_LATENCY)
TAKEOVER_GAP = Histogram("jetcron_takeover_gap_seconds", "The previous holder's last action (as its lease last "
                         "carried it) to the new holder's first: the time the work went undone. Wall clocks of two "
                         "hosts, so their skew enters it; clamped to [0, 3600]", ["kind"], buckets=_LATENCY)
AUTH_FAILURES = Counter("jetcron_auth_failures_total",
                        "Connections or subjects the NATS server refused to this process's credential, and HTTP "
                        "requests without a valid bearer token", ["kind"])
HEARTBEAT_FAILURES = Counter("jetcron_agent_heartbeat_failures_total", "Agent heartbeats that failed to write")
AGENTS_LOST = Counter("jetcron_agents_lost_total", "Agents whose entry aged out without a clean exit, counted by the "
                      "run tracker's leader (a dead agent cannot count itself)")
AGENTS_ALIVE = Gauge("jetcron_agents_alive", "Agents with a live heartbeat entry, as the run tracker's leader sees "
                     "them (0 on other replicas)")
PLACEMENTS = Counter("jetcron_placements_total", "Placement decisions", ["result"])
HANDOFFS = Counter("jetcron_handoffs_total", "Messages handed to their taker directly (kind: assign, report), by "
                   "result: taken, refused, unanswered, no_responders, skipped (the last four went to the stream)",
                   ["kind", "result"])
PREEMPTIONS = Counter("jetcron_preemptions_total", "Running runs preempted to give their place to a waiting run of "
                      "higher priority, by the preempted run's named queue and what the waiting run was short of "
                      "(gpus, cpu, memory, slots)", ["queue", "reason"])
REDRIVES = Counter("jetcron_redrives_total", "Runs re-driven by the reconciler", ["step"])
AGENT_RUNNING = Gauge("jetcron_agent_running_runs", "Runs executing on this agent")
AGENT_FREE_CPU = Gauge("jetcron_agent_free_cpu_cores", "Unreserved CPU cores on this agent")
AGENT_FREE_MEMORY = Gauge("jetcron_agent_free_memory_bytes", "Unreserved memory on this agent")
AGENT_FREE_GPUS = Gauge("jetcron_agent_free_gpus", "Unassigned GPUs on this agent")
LEASES_HELD = Gauge("jetcron_leases_held", "Leader and shard leases this instance holds now", ["kind"])
TRIGGER_SHARDS = Gauge("jetcron_trigger_shards", "Trigger shards configured (every one should be held)")
NATS_CONNECTED = Gauge("jetcron_nats_connected", "1 while this process's NATS connection answers; 0 from when a "
                       "server stopped answering (gone, frozen, or the link silent) until it is back")
SERVICE_READY = Gauge("jetcron_service_ready", "1 once the service is connected and its consumers exist")
GC_PAUSE = Counter("jetcron_gc_pause_seconds_total", "Seconds this process spent in cycle-collector passes",
                   ["generation"])
DEADLINES_MISSED = Counter("jetcron_deadlines_missed_total", "Occurrences that missed a deadline (recorded once each)",
                           ["deadline"])
NOTIFICATIONS = Counter("jetcron_notifications_total", "Notification delivery tries by target kind and result",
                        ["target", "result"])
NOTIFY_LATENCY = Histogram("jetcron_notification_latency_seconds",
                           "The event's time (run end, deadline) to its delivery acknowledged", ["target"],
                           buckets=_LATENCY)
STORAGE_USED = Gauge("jetcron_storage_used_bytes", "Bytes each stream and bucket holds (KV_<bucket>), and the "
                     "server's JetStream store (stream=\"server\"), as the run tracker's leader last looked",
                     ["stream"])
STORAGE_LIMIT = Gauge("jetcron_storage_limit_bytes", "The limit of each stream and bucket (max_bytes; 0: none of its "
                      "own) and of the server's store (max_file_store)", ["stream"])
STORAGE_USED_RATIO = Gauge("jetcron_storage_used_ratio", "Used share of each stream's limit and of the server's store "
                           "(0 without a limit); history is let go early from JETCRON_STORAGE_SHED_AT", ["stream"])
HISTORY_SHED = Counter("jetcron_history_shed_total", "Finished runs (jc_runs), events and output chunks let go before "
                       "their retention because storage was near full", ["stream"])
HISTORY_PRUNED = Counter("jetcron_history_pruned_total", "Finished runs let go by their job's count limits "
                         "(keep_succeeded, keep_failed)")

# Known label values start at zero, so rate() and absent() work before the first event.
LEASE_KINDS = ("placement_leader", "tracker_leader", "trigger_shard")
for _priority in Priority:
    QUEUE_DEPTH.labels(priority=_priority.value)
for _state in RunState:
    if _state.terminal:
        RUNS_FINISHED.labels(outcome=_state.value)
for _reason in ("stale", "duplicate_or_late", "unknown_run"):
    REPORTS_DROPPED.labels(reason=_reason)
for _kind in LEASE_KINDS:
    TAKEOVERS.labels(kind=_kind)
    TAKEOVER_GAP.labels(kind=_kind)
for _deadline in ("start", "finish"):
    DEADLINES_MISSED.labels(deadline=_deadline)
for _generation in ("0", "1", "2"):
    GC_PAUSE.labels(generation=_generation)
for _short in ("gpus", "cpu", "memory", "slots"):
    PREEMPTIONS.labels(queue="default", reason=_short)
for _kind in ("exclude", "only", "unknown"):
    SKIPPED_BY_CALENDAR.labels(kind=_kind)


_M = TypeVar("_M", Counter, Gauge, Histogram)
_children: dict[tuple[object, ...], Any] = {}


def child(metric: _M, **labels: str) -> _M:
    """`metric.labels(**labels)`, kept: prometheus-client checks the names and takes a lock on every call
    (3 us, against 0.7 for the increment itself), and runs call these on every step. Label values are bounded
    sets (no run or job ids), so what is kept stays small."""
    key = (metric, *labels.values())
    found = _children.get(key)
    if found is None:
        found = _children[key] = metric.labels(**labels)
    return cast(_M, found)


def forget(metric: _M) -> None:
    """Drop every labelled child of `metric` (a gauge only the current leader may speak for)."""
    metric.clear()
    for key in [k for k in _children if k[0] is metric]:
        del _children[key]
