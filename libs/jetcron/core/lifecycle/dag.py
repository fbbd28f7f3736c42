"""Job dependencies as a DAG: checks at submit, closures for release and blocking, a text view.

A graph maps each job to its upstreams (its depends_on). Everything here is iterative, so a
long chain cannot exhaust the interpreter's recursion limit.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from jetcron.core.errors import InvalidSpec
from jetcron.core.models import JobSpec, JoinPolicy, Schedule, ScheduleKind

__all__ = ["DEFAULT_WAIT_SECONDS", "MAX_UPSTREAMS", "MAX_WAIT_SECONDS", "check_join", "downstream", "find_cycle",
           "join_of", "not_since", "render", "roots", "roots_apart", "upstream_closure", "validate_dependencies",
           "wait_timeout"]

MAX_WAIT_SECONDS = 30 * 86400.0
DEFAULT_WAIT_SECONDS = 7 * 86400.0
"""How long a run waits on its upstreams when its job sets no wait_timeout_seconds: a week, as an Airflow sensor
waits by default. Fixed, not the job's interval times a factor: a `latest` join on its own schedule waits as long
as its slowest upstream takes (an hourly report on a daily load), and a same-occurrence join has no interval of
its own. Long enough for any upstream that runs at least weekly; short enough that no run waits without end."""

MAX_UPSTREAMS = 32
Graph = Mapping[str, Sequence[str]]


def find_cycle(graph: Graph, start: str | None = None) -> list[str] | None:
    """A cycle as ["a", "b", "c", "a"] (a depends on b ...), or None; only from `start` if given."""
    done: set[str] = set()
    for root in [start] if start is not None else list(graph):
        if root in done:
            continue
        path, on_path = [root], {root}
        stack = [iter(graph.get(root, ()))]
        while stack:
            up = next(stack[-1], None)
            if up is None:
                stack.pop()
                finished = path.pop()
                on_path.discard(finished)
                done.add(finished)
                continue
            if up in on_path:
                return [*path[path.index(up):], up]
            if up not in done:
                path.append(up)
                on_path.add(up)
                stack.append(iter(graph.get(up, ())))
    return None


def validate_dependencies(
    name: str, tenant: str, depends_on: Sequence[str], jobs: Mapping[str, tuple[str, Sequence[str]]]
) -> None:
    """Raise InvalidSpec on field depends_on unless the new edges keep the graph a DAG of own jobs.

    `jobs` maps existing job names to (tenant, depends_on); the job's own entry, if it exists,
    is replaced by the new edges.
    """

    def bad(problem: str) -> InvalidSpec:
        return InvalidSpec("depends_on", list(depends_on), problem)

    if len(depends_on) > MAX_UPSTREAMS:
        raise bad(f"at most {MAX_UPSTREAMS} upstream jobs are allowed, got {len(depends_on)}")
    seen: set[str] = set()
    for up in depends_on:
        if up in seen:
            raise bad(f"job {up!r} is listed more than once")
        seen.add(up)
    if name in seen:
        raise bad("a job cannot depend on itself")
    unknown = [up for up in depends_on if up not in jobs]
    if unknown:
        raise bad(f"unknown job{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}")
    foreign = [up for up in depends_on if jobs[up][0] != tenant]
    if foreign:
        raise bad(f"job {foreign[0]!r} belongs to another tenant; dependencies stay within tenant {tenant!r}")
    graph: dict[str, Sequence[str]] = {job: ups for job, (_, ups) in jobs.items()}
    graph[name] = list(depends_on)
    cycle = find_cycle(graph, start=name)
    if cycle is not None:
        if name in cycle[:-1]:
            at = cycle.index(name)
            cycle = [*cycle[at:-1], *cycle[:at], name]
        raise bad(f"dependency cycle: {' -> '.join(cycle)}")


def upstream_closure(graph: Graph, name: str) -> list[str]:
    """Every job `name` waits on, directly or not, nearest first."""
    return _walk(name, lambda job: graph.get(job, ()))


def downstream(graph: Graph, name: str, *, transitive: bool = True) -> list[str]:
    """Jobs that depend on `name` (all of them, nearest first, or only the direct ones)."""
    users = _reverse(graph)
    if not transitive:
        return list(users.get(name, ()))
    return _walk(name, lambda job: users.get(job, ()))


def render(graph: Graph, name: str) -> str:
    """The job with its upstreams and downstreams as indented trees; a job met twice is not expanded."""
    users = _reverse(graph)
    lines = [name]
    def ups(job: str) -> Sequence[str]:
        return graph.get(job, ())

    def downs(job: str) -> Sequence[str]:
        return users.get(job, ())

    sections: list[tuple[str, Callable[[str], Sequence[str]]]] = [("upstream", ups), ("downstream", downs)]
    for i, (title, edges) in enumerate(sections):
        last = i == len(sections) - 1
        branch, indent = ("└── ", "    ") if last else ("├── ", "│   ")
        roots = list(edges(name))
        lines.append(f"{branch}{title}" + ("" if roots else ": none"))
        lines.extend(_tree(roots, edges, indent, {name}))
    return "\n".join(lines)


def _tree(
    roots: Sequence[str], edges: Callable[[str], Sequence[str]], prefix: str, seen: set[str]
) -> list[str]:
    lines: list[str] = []
    stack = [(job, prefix, i == len(roots) - 1) for i, job in enumerate(roots)][::-1]
    while stack:
        job, pre, last = stack.pop()
        branch = "└── " if last else "├── "
        if job in seen:
            lines.append(f"{pre}{branch}{job} (see above)")
            continue
        seen.add(job)
        lines.append(f"{pre}{branch}{job}")
        kids = list(edges(job))
        below = pre + ("    " if last else "│   ")
        stack.extend((kid, below, k == len(kids) - 1) for k, kid in reversed(list(enumerate(kids))))
    return lines


def _walk(name: str, edges: Callable[[str], Sequence[str]]) -> list[str]:
    order: list[str] = []
    seen = {name}
    queue = deque([name])
    while queue:
        for nxt in edges(queue.popleft()):
            if nxt not in seen:
                seen.add(nxt)
                order.append(nxt)
                queue.append(nxt)
    return order


def _reverse(graph: Graph) -> dict[str, list[str]]:
    users: dict[str, list[str]] = {}
    for job, ups in graph.items():
        for up in ups:
            users.setdefault(up, []).append(job)
    return users


def join_of(spec: JobSpec) -> JoinPolicy:
    """The job's join: its own, else `latest` when it has a schedule of its own (it fires on it), else
    `same_occurrence` (its runs are its upstreams' occurrences')."""
    if spec.join is not None:
        return spec.join
    return JoinPolicy.SAME_OCCURRENCE if spec.schedule.kind is ScheduleKind.NOW else JoinPolicy.LATEST


def check_join(spec: JobSpec) -> None:
    """The parts of a dependent job that must fit together, each refused by name rather than dropped: a join or
    a wait timeout without upstreams, and a schedule on a job joined on the same occurrence (whose runs are its
    upstreams' occurrences, so the schedule would never fire)."""
    if not spec.depends_on:
        if spec.join is not None:
            raise InvalidSpec("join", spec.join.value, "applies to a job with depends_on; this job has none")
        if spec.wait_timeout_seconds is not None:
            raise InvalidSpec("wait_timeout_seconds", spec.wait_timeout_seconds,
                              "applies to a job with depends_on; this job has none")
        return
    if (spec.exclude_calendars or spec.only_calendars) and (
            spec.schedule.kind is ScheduleKind.NOW or join_of(spec) is JoinPolicy.SAME_OCCURRENCE):
        field = "exclude_calendars" if spec.exclude_calendars else "only_calendars"
        raise InvalidSpec(field, spec.exclude_calendars or spec.only_calendars, "a calendar skips occurrences of a "
                          "job's own schedule; this job runs when its upstreams allow: give the calendar to the "
                          "job its flow starts from")
    if spec.join is JoinPolicy.SAME_OCCURRENCE and spec.schedule.kind is not ScheduleKind.NOW:
        raise InvalidSpec("schedule", spec.schedule.kind.value,
                          "a job joined on the same occurrence runs when its upstreams' runs of one occurrence "
                          "succeed and has no schedule of its own: leave the schedule out, or use join: latest to "
                          "run it on its schedule once its upstreams have succeeded")
    wait = spec.wait_timeout_seconds
    if wait is not None and not (isinstance(wait, (int, float)) and 0 < wait <= MAX_WAIT_SECONDS):
        raise InvalidSpec("wait_timeout_seconds", wait, f"must be > 0 and <= {MAX_WAIT_SECONDS:.0f}")


def wait_timeout(spec: JobSpec) -> float | None:
    """How long a run of the job may wait on its upstreams: its own wait_timeout_seconds, else the default for a
    job with upstreams (None: it has none, and no run of it waits on them)."""
    if spec.wait_timeout_seconds is not None:
        return spec.wait_timeout_seconds
    return DEFAULT_WAIT_SECONDS if spec.depends_on else None


def roots(graph: Graph, name: str) -> list[str]:
    """The jobs without upstreams that `name`'s upstreams come from (itself if it has none), sorted."""
    if not graph.get(name):
        return [name]
    return sorted(job for job in upstream_closure(graph, name) if not graph.get(job))


def roots_apart(graph: Graph, name: str, schedules: Mapping[str, Schedule]) -> list[str] | None:
    """For a job joined on the same occurrence: its roots when they fire on different schedules (its runs would
    wait for ever: an occurrence of one root is never an occurrence of another), else None."""
    found = roots(graph, name)
    known = {schedules[r] for r in found if r in schedules}
    return found if len(known) > 1 else None


def not_since(upstreams: Sequence[str], succeeded: Mapping[str, datetime | None], since: datetime | None) -> list[str]:
    """The upstreams (join: latest) that have not succeeded since the job last ran (`since`: when its last run was
    released; None: it never ran, so any success counts), given each one's latest success. A success at that very
    instant was the last run's."""
    return [up for up in upstreams
            if (at := succeeded.get(up)) is None or (since is not None and at <= since)]


def took_at(now: datetime, newest: datetime | None) -> datetime:
    """When a run takes its upstreams' successes (its `released_at`, which `not_since` is given as `since` for
    the job's next run): now, or the newest success it takes when that is later (a success that ended while the
    decision read the records, or one stamped by another host's clock). Stamped earlier than a success it took,
    the job's next run would count that success as new and run on it a second time."""
    return max(now, newest) if newest is not None else now
