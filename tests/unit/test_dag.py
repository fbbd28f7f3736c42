"""Job dependencies: cycles named at submit, checks on upstreams, closures, and the text view."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jetcron.core.errors import InvalidSpec
from jetcron.core.lifecycle.dag import downstream, find_cycle, render, upstream_closure, validate_dependencies

PIPELINE = {
    "fetch": [], "extract": ["fetch"], "clean": ["extract"], "transform": ["extract"],
    "report": ["transform", "clean"], "publish": ["report"], "notify": ["publish"],
}


@pytest.mark.parametrize(("graph", "cycle"), [
    pytest.param({}, None, id="empty"),
    pytest.param(PIPELINE, None, id="diamond_is_no_cycle"),
    pytest.param({"a": ["a"]}, ["a", "a"], id="self_loop"),
    pytest.param({"a": ["b"], "b": ["a"]}, ["a", "b", "a"], id="two"),
    pytest.param({"a": ["b"], "b": ["c"], "c": ["a"]}, ["a", "b", "c", "a"], id="three"),
    pytest.param({"x": ["a"], "a": ["b"], "b": ["a"]}, ["a", "b", "a"], id="cycle_behind_a_tail"),
    pytest.param({"a": ["missing"]}, None, id="unknown_upstream_is_a_leaf"),
])
def test_find_cycle(graph: dict[str, list[str]], cycle: list[str] | None) -> None:
    assert find_cycle(graph) == cycle


JOBS: dict[str, tuple[str, Sequence[str]]] = {
    "fetch": ("t", []), "extract": ("t", ["fetch"]), "report": ("t", ["extract"]), "theirs": ("other", []),
}


@pytest.mark.parametrize(("name", "deps", "match"), [
    pytest.param("a", ["a"], r"depends_on: a job cannot depend on itself \(got \['a'\]\)", id="self"),
    pytest.param("a", ["nope", "gone"], r"depends_on: unknown jobs 'nope', 'gone'", id="unknown"),
    pytest.param("a", ["fetch", "nope"], r"depends_on: unknown job 'nope'", id="one_unknown"),
    pytest.param("a", ["theirs"], r"depends_on: job 'theirs' belongs to another tenant; dependencies stay "
                 r"within tenant 't'", id="other_tenant"),
    pytest.param("a", ["fetch", "fetch"], r"depends_on: job 'fetch' is listed more than once",
                 id="duplicate"),
    pytest.param("a", [f"j{i}" for i in range(33)], r"at most 32 upstream jobs are allowed, got 33",
                 id="too_many"),
    pytest.param("fetch", ["report"], r"depends_on: dependency cycle: fetch -> report -> extract -> fetch",
                 id="cycle_through_existing_jobs"),
    pytest.param("extract", ["report"], r"dependency cycle: extract -> report -> extract", id="two_cycle"),
])
def test_bad_dependencies_are_refused_with_the_reason(name: str, deps: list[str], match: str) -> None:
    with pytest.raises(InvalidSpec, match=match) as caught:
        validate_dependencies(name, "t", deps, JOBS)
    assert caught.value.field == "depends_on"


@pytest.mark.parametrize(("name", "deps"), [
    pytest.param("new", [], id="no_upstreams"),
    pytest.param("new", ["report", "fetch"], id="several"),
    pytest.param("new", [f"j{i}" for i in range(32)], id="exactly_32"),
    pytest.param("extract", [], id="update_drops_edges"),
])
def test_good_dependencies_pass(name: str, deps: list[str]) -> None:
    jobs = {**JOBS, **{f"j{i}": ("t", []) for i in range(32)}}
    validate_dependencies(name, "t", deps, jobs)


def test_new_edges_replace_the_old_ones() -> None:
    # Given b depends on a; when a is updated to depend on b, it is a cycle
    jobs: dict[str, tuple[str, Sequence[str]]] = {"a": ("t", []), "b": ("t", ["a"])}
    with pytest.raises(InvalidSpec, match="a -> b -> a"):
        validate_dependencies("a", "t", ["b"], jobs)
    # When b is updated to drop a first, then a may depend on b
    validate_dependencies("b", "t", [], jobs)
    jobs["b"] = ("t", [])
    validate_dependencies("a", "t", ["b"], jobs)


@pytest.mark.parametrize(("name", "ups", "downs"), [
    pytest.param("report", ["transform", "clean", "extract", "fetch"], ["publish", "notify"], id="middle"),
    pytest.param("fetch", [], ["extract", "clean", "transform", "report", "publish", "notify"], id="root"),
    pytest.param("notify", ["publish", "report", "transform", "clean", "extract", "fetch"], [], id="leaf"),
])
def test_closures_are_nearest_first(name: str, ups: list[str], downs: list[str]) -> None:
    assert upstream_closure(PIPELINE, name) == ups
    assert downstream(PIPELINE, name) == downs


def test_direct_downstream_only() -> None:
    assert downstream(PIPELINE, "extract", transitive=False) == ["clean", "transform"]


def test_render_shows_upstreams_and_downstreams_as_trees() -> None:
    assert render(PIPELINE, "report") == "\n".join([
        "report",
        "├── upstream",
        "│   ├── transform",
        "│   │   └── extract",
        "│   │       └── fetch",
        "│   └── clean",
        "│       └── extract (see above)",
        "└── downstream",
        "    └── publish",
        "        └── notify",
    ])


def test_render_of_a_lone_job() -> None:
    assert render({"solo": []}, "solo") == "solo\n├── upstream: none\n└── downstream: none"


def test_long_chains_do_not_hit_the_recursion_limit() -> None:
    chain = {f"j{i}": [f"j{i + 1}"] for i in range(5000)}
    assert find_cycle(chain) is None
    assert len(upstream_closure(chain, "j0")) == 5000
    assert render(chain, "j0").count("\n") == 5002
    chain["j5000"] = ["j0"]
    cycle = find_cycle(chain)
    assert cycle is not None and len(cycle) == 5002


@settings(max_examples=100, deadline=None)
@given(
    size=st.integers(2, 12),
    edges=st.lists(st.tuples(st.integers(0, 11), st.integers(0, 11)), max_size=30),
    back=st.tuples(st.integers(0, 11), st.integers(0, 11)),
)
def test_forward_edges_never_cycle_and_any_reported_cycle_is_real(
    size: int, edges: list[tuple[int, int]], back: tuple[int, int],
) -> None:
    # Edges only from a higher to a lower index form a DAG.
    graph: dict[str, list[str]] = {f"n{i}": [] for i in range(size)}
    for a, b in edges:
        if b < a < size and f"n{b}" not in graph[f"n{a}"]:
            graph[f"n{a}"].append(f"n{b}")
    assert find_cycle(graph) is None
    low, high = sorted(back)
    if high < size:
        graph[f"n{low}"].append(f"n{high}")
        cycle = find_cycle(graph)
        reachable = f"n{low}" in upstream_closure(graph, f"n{high}") or low == high
        assert (cycle is not None) == reachable
        if cycle is not None:
            assert cycle[0] == cycle[-1]
            assert all(b in graph[a] for a, b in itertools.pairwise(cycle))
