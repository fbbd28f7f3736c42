"""What a job's spec must satisfy before the api stores it: the spec's own rules, its flow (no cycle, joins that can
be met), its tenant's policy and ceiling, its calendars."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from jetcron.core.errors import InvalidSpec
from jetcron.core.ids import JOB_NAME_RE, body_hash, job_key
from jetcron.core.lifecycle import dag
from jetcron.core.lifecycle.retention import validate_history
from jetcron.core.models import JobSpec, JobStatus, JoinPolicy, Schedule
from jetcron.core.timing import exclusions
from jetcron.core.validate import decode_spec, validate_spec
from jetcron.wire.codec import encode, with_defaults
from jetcron_services.api import priorities
from jetcron_services.api.calendars import job_calendars
from jetcron_services.api.dependents import Dependents, describe, refusal
from jetcron_services.api.ports import JobValidationPorts


class JobValidation:
    def __init__(self, ctx: JobValidationPorts, dependents: Dependents) -> None:
        self.ctx = ctx
        self.dependents = dependents

    async def validated(self, raw: Any, tenant: str | None) -> tuple[JobSpec, str]:
        """The spec the caller sent, decoded and checked, and its body hash; `tenant`: the caller's (None: the
        admin)."""
        if not isinstance(raw, dict):
            raise InvalidSpec("spec", raw, "must be a JSON object")
        if tenant is not None:
            # The tenant is the caller's credential's, never the body's.
            if raw.get("tenant", tenant) != tenant:
                raise InvalidSpec("spec.tenant", raw["tenant"], f"is set by your credential (tenant {tenant!r}); "
                                  "leave it out")
            raw = {**raw, "tenant": tenant}
        spec = decode_spec(raw)
        graph, schedules = await self._graph(spec)
        validate_spec(spec, now=self.ctx.clock.now(), jobs=graph,
                      min_interval_seconds=self.ctx.settings.min_interval,
                      allow_private_targets=self.ctx.settings.notify_allow_private,
                      email_enabled=self.ctx.settings.smtp_host is not None)
        validate_history(spec.history, self.ctx.history.cluster, "spec.history")
        await priorities.check_ceiling(self.ctx, spec.tenant, spec.priority, tenant)
        await self._root_allowed(spec)
        if spec.depends_on and dag.join_of(spec) is JoinPolicy.SAME_OCCURRENCE:
            edges = {name: ups for name, (_, ups) in graph.items()} | {spec.name: spec.depends_on}
            apart = dag.roots_apart(edges, spec.name, schedules)
            if apart is not None:
                raise InvalidSpec("join", JoinPolicy.SAME_OCCURRENCE.value,
                                  f"its upstreams come from {', '.join(apart)}, which fire on different schedules: "
                                  "no occurrence of one is an occurrence of another, so its runs would wait for "
                                  "ever; use join: latest")
        # Over every field: the hash a spec had when specs were stored whole, so a job stored then is still the same
        # body.
        return spec, body_hash(encode(with_defaults(spec)))

    async def _graph(self, spec: JobSpec) -> tuple[dict[str, tuple[str, list[str]]], dict[str, Schedule]]:
        """The stored jobs reachable upstream of `spec` (what a cycle check needs), read breadth-first, and their
        schedules (whether a same-occurrence join can ever be met)."""
        graph: dict[str, tuple[str, list[str]]] = {}
        schedules: dict[str, Schedule] = {}
        todo = list(spec.depends_on)
        while todo and len(graph) < 1000:
            name = todo.pop()
            if name in graph or name == spec.name or not JOB_NAME_RE.fullmatch(name):
                continue
            found = await self.ctx.jobs.maybe(job_key(spec.tenant, name))
            # Another tenant's job is left out, so it reads as unknown: a tenant learns nothing of it.
            if found is None or found[0].status is JobStatus.DELETED:
                continue
            if found[0].spec.tenant != spec.tenant:
                continue
            graph[name] = (found[0].spec.tenant, list(found[0].spec.depends_on))
            schedules[name] = found[0].spec.schedule
            todo.extend(found[0].spec.depends_on)
        return graph, schedules

    async def _root_allowed(self, spec: JobSpec) -> None:
        """A job may ask to run as root only where its tenant's policy allows it, the admin's job too: an agent
        would refuse it at every start anyway (and checks again then: the policy may change)."""
        if not spec.run_as_root:
            return
        found = await self.ctx.tenants.maybe(spec.tenant)
        if found is None or not found[0].allow_run_as_root:
            raise InvalidSpec("run_as_root", True, f"tenant {spec.tenant!r}'s policy does not allow jobs to run as "
                              f"root (the admin: jetcron tenants set {spec.tenant} --allow-run-as-root)")

    async def flows_meet(self, spec: JobSpec, field: str, *, itself: bool = False) -> None:
        """Refuse a change of `spec` (create, update, resume) after which a job joined on the same occurrence
        downstream of it (or `spec` itself, `itself`) could never be met: its upstreams would come from roots on
        different schedules (jetcron_services.api.dependents; `field`: what the change is refused on)."""
        found = await self.dependents.never_met(spec, itself=itself)
        if found is None:
            return
        dependent, roots, schedules = found
        if dependent == spec.name:
            field = "join"
        value: object = describe(spec.schedule) if field == "schedule" else \
            list(spec.depends_on) if field == "depends_on" else JoinPolicy.SAME_OCCURRENCE.value
        raise InvalidSpec(field, value, refusal(spec.name, dependent, roots, schedules))

    async def calendars_ok(self, spec: JobSpec, created_at: datetime) -> None:
        """The calendars the job names exist (its own tenant's: another's reads as unknown), and leave it an
        occurrence to run within a year."""
        calendars = await job_calendars(self.ctx.calendars, spec, strict=True)
        exclusions.check_year(spec, calendars, now=self.ctx.clock.now(), created_at=created_at)
