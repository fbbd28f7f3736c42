"""Job dependencies as a DAG: checks at submit, closures for release and blocking, a text view.

A graph maps each job to its upstreams (its depends_on). Everything here is iterative, so a
long chain cannot exhaust the interpreter's recursion limit.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence

from jetcron.core.errors import InvalidSpec

__all__ = ["MAX_UPSTREAMS", "downstream", "find_cycle", "render", "upstream_closure", "validate_dependencies"]

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
