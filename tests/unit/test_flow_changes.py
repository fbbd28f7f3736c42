"""Every change of a job of a flow is checked, not only the dependent's own
(services/jetcron_services/api/dependents.py): a root moved to another schedule, an upstream moved to another root, a
job made again under a name others depend on, a job resumed. Each that would leave a same-occurrence join waiting for
ever is refused by name and stores nothing. On the bus's twins; tests/integration/test_flow_joins.py does it through the
API on a real server."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from twin_support import twin_context

from jetcron.core.errors import InvalidSpec
from jetcron.core.lifecycle.join_marks import dependents_filter
from jetcron_services.api.admission import Admission
from jetcron_services.api.call import Call
from jetcron_services.api.jobs import Jobs
from jetcron_services.runtime import Context

MINUTELY = {"kind": "every", "every_seconds": 60}
TWO_MINUTES = {"kind": "every", "every_seconds": 120}


def _call(**body: Any) -> Call:
    return Call(msgspec.json.encode(body), None)


def _spec(name: str, schedule: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    return {"name": name, "command": ["true"], "schedule": schedule or {"kind": "now"}, **fields}


async def _flow() -> tuple[Context, Jobs]:
    """The design's A->C->E, B->D->E, A and B on one schedule: E joins C and D on the same occurrence."""
    ctx = twin_context()
    jobs = Jobs(ctx, Admission(ctx))
    for spec in (_spec("a", MINUTELY), _spec("b", MINUTELY), _spec("c", depends_on=["a"]),
                 _spec("d", depends_on=["b"]), _spec("e", depends_on=["c", "d"])):
        await jobs.create(_call(spec=spec))
    return ctx, jobs


REFUSED = (r"job 'e' joins its upstreams on the same occurrence, and its flow would start from a \(every 60 s\), "
           r"b \(every 120 s\), which fire on different schedules: no occurrence of one is an occurrence of another, "
           r"so its runs would wait for ever; give a, b one schedule, or make 'e' join: latest")


async def test_a_root_moved_to_another_schedule_is_refused_naming_the_flow_and_nothing_is_stored() -> None:
    ctx, jobs = await _flow()
    before = await ctx.jobs.get("b")
    with pytest.raises(InvalidSpec, match=REFUSED) as refused:
        await jobs.update(_call(spec=_spec("b", TWO_MINUTES)))
    assert (refused.value.field, refused.value.value) == ("schedule", "every 120 s")
    assert await ctx.jobs.get("b") == before
    # a change that keeps the flow meeting is taken
    await jobs.update(_call(spec=_spec("b", MINUTELY, command=["echo", "b"])))


async def test_an_upstream_moved_to_a_root_on_another_schedule_is_refused_by_its_depends_on() -> None:
    ctx, jobs = await _flow()
    await jobs.create(_call(spec=_spec("z", TWO_MINUTES)))
    with pytest.raises(InvalidSpec, match=r"job 'e' joins its upstreams on the same occurrence, .* from a "
                                          r"\(every 60 s\), z \(every 120 s\)") as refused:
        await jobs.update(_call(spec=_spec("d", depends_on=["z"])))
    assert (refused.value.field, refused.value.value) == ("depends_on", ["z"])
    assert (await ctx.jobs.get("d"))[0].spec.depends_on == ["b"]


async def test_a_name_others_depend_on_made_again_on_another_schedule_is_refused() -> None:
    _, jobs = await _flow()
    await jobs.delete(_call(name="b"))
    with pytest.raises(InvalidSpec, match=REFUSED):
        await jobs.create(_call(spec=_spec("b", TWO_MINUTES)))
    await jobs.create(_call(spec=_spec("b", MINUTELY)))


async def test_a_job_resumed_into_a_flow_that_can_no_longer_meet_is_refused() -> None:
    # Given E paused, and its roots apart (as a record stored before the checks could be)
    ctx, jobs = await _flow()
    await jobs.pause(_call(name="e"))
    record, revision = await ctx.jobs.get("b")
    moved = msgspec.structs.replace(record.spec, schedule=msgspec.convert(TWO_MINUTES, type(record.spec.schedule)))
    await ctx.jobs.update("b", msgspec.structs.replace(record, spec=moved), revision)
    with pytest.raises(InvalidSpec, match=r"this job joins its upstreams on the same occurrence") as refused:
        await jobs.resume(_call(name="e"))
    assert refused.value.field == "join"
    assert (await ctx.jobs.get("e"))[0].status.value == "paused"


async def test_the_edges_follow_the_dependents_and_are_made_for_jobs_stored_before_them() -> None:
    _, jobs = await _flow()
    edges = await jobs.dependents.store()
    assert await jobs.dependents.of("default", "c") == ["e"]
    await jobs.update(_call(spec=_spec("e", depends_on=["d"])))
    assert await jobs.dependents.of("default", "c") == []
    await jobs.delete(_call(name="e"))
    assert await jobs.dependents.of("default", "d") == []
    # a job stored without its edges (by an earlier release) has them once the api has started
    for key in await edges.keys(dependents_filter("default", "a")):
        await edges.delete(key)
    assert await jobs.dependents.of("default", "a") == []
    await jobs.dependents.backfill()
    assert await jobs.dependents.of("default", "a") == ["c"]
