"""jetcron's packages stand in layers, and a module imports only from its own package or a layer below it: the core
decides, wire spells messages, bus carries bytes, ops performs the protocol's steps, the services run them, the
CLI drives everything. Imports under `if TYPE_CHECKING:` and inside functions count: a cycle they would hide
is still a cycle. CONTRIBUTING.md describes each layer."""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = {"libs/jetcron": "jetcron", "services/jetcron_services": "jetcron_services"}
LAYERS: list[set[str]] = [
    {"core"},
    {"wire"},
    {"faults", "telemetry", "auth", "lifeline"},
    {"bus"},
    {"config", "ops"},
    {"sdk"},
    {"jetcron", "services"},  # the package's own face (`from jetcron import once`), and the services' package
    {"services.runtime"},
    {"services.agent.host"},  # how a child runs on this machine: the agent's protocol side drives it
    {"services.agent", "services.api", "services.gateway", "services.notifier", "services.placement",
     "services.run_tracker", "services.trigger"},
    {"cli"},
]
LAYER_OF = {unit: level for level, units in enumerate(LAYERS) for unit in units}


def modules() -> dict[str, Path]:
    """Every module of the tree by its dotted name."""
    found: dict[str, Path] = {}
    for folder, prefix in SOURCES.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([prefix, *parts])] = path
    return found


def imported(name: str, path: Path, known: dict[str, Path]) -> Iterator[str]:
    """The tree's modules that `name` imports, wherever the import stands."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            candidates = [[alias.name] for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                base = f"{anchor}.{base}" if base else anchor
            # `from a import b` names module a.b when there is one, else something of a
            candidates = [[f"{base}.{alias.name}", base] for alias in node.names]
        else:
            continue
        for options in candidates:
            target = next((option for option in options if option in known), None)
            if target is not None and target != name:
                yield target


def unit_of(module: str) -> str:
    """The layered unit a module belongs to: `jetcron.bus.kv` -> bus, `jetcron_services.agent.x` -> services.agent,
    `jetcron_services.agent.host.x` -> services.agent.host."""
    parts = module.split(".")
    if parts[0] == "jetcron_services":
        if len(parts) == 1:
            return "services"
        return "services.agent.host" if parts[1:3] == ["agent", "host"] else f"services.{parts[1]}"
    if len(parts) == 1:
        return "jetcron"
    return parts[1]


@functools.cache
def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: set(imported(name, path, known)) for name, path in known.items()}


def upward(edges: dict[str, set[str]]) -> list[str]:
    """Every import of a unit of the same layer (a sibling) or a higher one."""
    wrong = []
    for source, targets in sorted(edges.items()):
        mine = unit_of(source)
        for target in sorted(targets):
            theirs = unit_of(target)
            if theirs != mine and LAYER_OF[theirs] >= LAYER_OF[mine]:
                wrong.append(f"{source} imports {target} ({mine} may not use {theirs})")
    return wrong


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The import graph's strongly connected components of more than one module (Tarjan's, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_every_unit_of_the_tree_has_a_layer() -> None:
    units = {unit_of(name) for name in modules()}
    assert units - LAYER_OF.keys() == set(), "a new package needs its place in LAYERS"
    assert LAYER_OF.keys() - units == set(), "LAYERS names a package the tree does not have"


def test_no_module_imports_a_sibling_or_a_higher_layer() -> None:
    assert upward(graph()) == []


def test_no_import_cycle_anywhere_in_the_tree() -> None:
    assert cycles(graph()) == []


@pytest.mark.parametrize(("source", "text", "expected"), [
    ("jetcron.bus.kv", "from jetcron.ops import control", ["jetcron.bus.kv imports jetcron.ops.control"]),
    ("jetcron.core.placing.demand",
     "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from jetcron.bus import kv\n",
     ["jetcron.core.placing.demand imports jetcron.bus.kv"]),
    ("jetcron.auth.local", "def f():\n    from jetcron.bus.kv import Store\n",
     ["jetcron.auth.local imports jetcron.bus.kv"]),
    ("jetcron_services.trigger.x", "from jetcron_services.placement import view",
     ["jetcron_services.trigger.x imports jetcron_services.placement.view"]),
    ("jetcron.ops.dlq", "from jetcron.bus.streams import newest\nfrom . import control", []),
    ("jetcron_services.agent.host.spares", "from jetcron_services.agent.attempt import Attempt",
     ["jetcron_services.agent.host.spares imports jetcron_services.agent.attempt"]),
])
def test_the_guard_sees_an_upward_import_wherever_it_stands(source: str, text: str, expected: list[str],
                                                             tmp_path: Path) -> None:
    path = tmp_path / "sample.py"
    path.write_text(text)
    edges = {source: set(imported(source, path, modules()))}
    assert [line.partition(" (")[0] for line in upward(edges)] == expected


def test_the_guard_sees_a_cycle_behind_type_checking() -> None:
    edges = {"a.placement": {"a.reasons"}, "a.reasons": {"a.placement"}, "a.solo": {"a.placement"}}
    assert cycles(edges) == [["a.placement", "a.reasons"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


RAW_HANDLES = {"js", "nc"}
"""nats-py's connection and JetStream context, as a Context held them once: the runtime builds the ports from them."""


def raw_reaches(path: Path) -> list[str]:
    """Where a module reads raw NATS handles off a context (`ctx.js`, `self.ctx.nc`) or imports nats-py's handles
    (jetcron.bus.handles)."""
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if (isinstance(node, ast.Attribute) and node.attr in RAW_HANDLES
                and ((isinstance(node.value, ast.Name) and node.value.id == "ctx")
                     or (isinstance(node.value, ast.Attribute) and node.value.attr == "ctx"))):
            found.append(f"{path.name}:{node.lineno} reads ctx.{node.attr}")
        if isinstance(node, ast.ImportFrom) and node.module == "jetcron.bus.handles":
            found += [f"{path.name}:{node.lineno} imports {a.name}" for a in node.names]
    return sorted(found, key=lambda line: int(line.split(":")[1].split()[0]))


def test_services_reach_nats_only_through_the_ports_of_their_context() -> None:
    runtime = ROOT / "services" / "jetcron_services" / "runtime"
    assert [line for path in sorted((ROOT / "services" / "jetcron_services").rglob("*.py"))
            if runtime not in path.parents for line in raw_reaches(path)] == []


def test_the_ports_guard_sees_a_raw_handle(tmp_path: Path) -> None:
    path = tmp_path / "sample.py"
    path.write_text("from jetcron.bus.handles import JetStream\n"
                    "async def f(ctx):\n    await g(ctx.js)\n    return self.ctx.nc, ctx.publisher\n")
    assert raw_reaches(path) == ["sample.py:1 imports JetStream", "sample.py:3 reads ctx.js",
                                 "sample.py:4 reads ctx.nc"]


def test_the_ports_name_no_nats_type() -> None:
    """Every port is a jetcron Protocol or struct: ports.py imports nothing of nats-py."""
    tree = ast.parse((ROOT / "libs" / "jetcron" / "bus" / "ports.py").read_text())
    imported = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    imported += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert [m for m in imported if m == "nats" or m.startswith("nats.")] == []


WIRING = {"main", "_serve"}
"""A service's wiring: it builds the parts from the whole Context (and the runtime's own functions)."""


def whole_context_takers(path: Path) -> list[str]:
    """The functions of a module with a parameter typed as the whole Context, but a service's wiring."""
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name not in WIRING:
            args = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
            if any(isinstance(a.annotation, ast.Name) and a.annotation.id == "Context" for a in args):
                found.append(f"{path.name}:{node.lineno} {node.name}")
    return sorted(found, key=lambda line: int(line.split(":")[1].split()[0]))


def test_each_part_of_a_service_takes_the_ports_it_uses_not_the_whole_context() -> None:
    """Each part names what it reads of its Context as a Protocol (the service's ports.py), and mypy holds it to
    them; only the wiring (and the runtime that builds the Context) takes it whole. The gateway's pages have a
    Context of their own (gateway/ui/pages/_kit.py), not the runtime's."""
    services = ROOT / "services" / "jetcron_services"
    skipped = (services / "runtime", services / "gateway" / "ui")
    assert [line for path in sorted(services.rglob("*.py")) if not any(s in path.parents for s in skipped)
            for line in whole_context_takers(path)] == []


def test_the_context_guard_sees_a_part_taking_it_whole(tmp_path: Path) -> None:
    path = tmp_path / "sample.py"
    path.write_text("class A:\n    def __init__(self, ctx: Context) -> None: ...\n"
                    "async def main(ctx: Context) -> None: ...\n"
                    "def helper(x: int, *, ctx: Context) -> None: ...\n")
    assert whole_context_takers(path) == ["sample.py:2 __init__", "sample.py:4 helper"]
