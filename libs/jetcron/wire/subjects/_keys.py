"""The keys of jetcron's buckets besides leases, and the key filters a listing asks the server for."""

from __future__ import annotations

from jetcron.core.ids import DEFAULT_TENANT

# jc_cluster keys: settings fixed when the cluster was created.
SHARDS_KEY = "trigger.shards"
STORAGE_VERDICT_KEY = "storage.verdict"
"""jc_cluster: the server's storage facts (fsync before ack) as the last core service that could read a monitor
port found them; a process that reaches no monitor port (an agent in a container) trusts this record."""

# jc_placement keys: placement's capacity summary (read by the API at submit) and suspect GPU hosts.
CAPACITY_KEY = "capacity"
PENDING_KEY = "pending"
SUSPECTS = "suspect.*"


def suspect_key(agent_id: str) -> str:
    return f"suspect.{agent_id}"


def shard_lease_key(shard: int) -> str:
    return f"trigger.shard.{shard}"


SHARD_LEASES = "trigger.shard.*"


def parse_shard_lease_key(key: str) -> int:
    return int(key.rsplit(".", 1)[-1])


def trigger_member_key(replica: str) -> str:
    return f"trigger.member.{replica}"


TRIGGER_MEMBERS = "trigger.member.*"
PLACEMENT_LEADER_KEY = "placement.leader"
TRACKER_LEADER_KEY = "tracker.leader"


def service_key(service: str, instance: str) -> str:
    """jc_services key of one running service instance (its metrics URL, heartbeated)."""
    return f"{service}.{instance}"


def idempotency_key(scope: str, key: str) -> str:
    return f"{scope}.{key}"


FINISHED_CLUSTER = "all"
FINISHED_TENANT = "tenant"


def finished_key(tenant: str | None, stamp: str) -> str:
    """jc_finished: the runs that finished in one minute (`stamp`, jetcron.core.lifecycle.finished.stamp), the whole
    cluster's (tenant None: `all.<stamp>`) or one tenant's (`tenant.<tenant>.<stamp>`; a tenant name has no dot)."""
    return f"{FINISHED_CLUSTER}.{stamp}" if tenant is None else f"{FINISHED_TENANT}.{tenant}.{stamp}"


def finished_filter(tenant: str | None) -> str:
    """The keys of every minute of the cluster (None) or of one tenant."""
    return finished_key(tenant, "*")


def parse_finished_key(key: str) -> tuple[str | None, str]:
    """(tenant or None for the cluster, stamp) of a jc_finished key."""
    parts = key.split(".")
    return (None, parts[-1]) if parts[0] == FINISHED_CLUSTER else (parts[1], parts[-1])


def runs_of_job_filter(job: str) -> str:
    """The run keys of one job and no other's: a run id is its job's key and one token more (the stamp has no dot:
    jetcron.core.ids.RUN_ID_RE). Not `job.>`, which also matches the runs of tenant `job`'s jobs (`foo.bar.<stamp>`)."""
    return f"{job}.*"


def runs_of_tenant_filter(tenant: str | None) -> str:
    """The run keys of one tenant's jobs (its job keys and a stamp), or of every run for the admin."""
    return ">" if tenant is None else f"{jobs_of_tenant_filter(tenant)}.*"


def calendars_of_tenant_filter(tenant: str | None) -> str:
    """The calendar keys a caller may list: keyed as jobs are (`tenant.name`, the default tenant's bare)."""
    return jobs_of_tenant_filter(tenant)


def jobs_of_tenant_filter(tenant: str | None) -> str:
    """The job keys a caller may list, filtered by the server: one tenant's (the default tenant's keys are bare
    names, one token; another's are `tenant.name`, two: jetcron.core.ids.job_key), or everyone's for the admin."""
    if tenant is None:
        return ">"
    return "*" if tenant == DEFAULT_TENANT else f"{tenant}.*"
