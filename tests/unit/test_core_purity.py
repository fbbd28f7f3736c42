"""libs/jetcron/core decides; it never does I/O. A forbidden import anywhere in it fails this test."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[2] / "libs" / "jetcron" / "core"
FORBIDDEN = {"nats", "asyncio", "os", "time", "socket", "subprocess", "threading", "urllib", "requests", "jetcron.bus",
             "jetcron_services", "jetcron.sdk"}


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("path", sorted(CORE.rglob("*.py")), ids=lambda p: str(p.relative_to(CORE)))
def test_core_module_imports_nothing_that_does_io(path: Path) -> None:
    # urllib.parse splits strings (a webhook URL's parts); the rest of urllib opens connections.
    bad = {n for n in _imports(path) if any(n == f or n.startswith(f + ".") for f in FORBIDDEN)} - {"urllib.parse"}
    assert not bad, f"{path.relative_to(CORE)} imports {sorted(bad)}: core must stay pure"


def test_the_guard_sees_a_forbidden_import(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("import asyncio\nfrom nats.js import api\n")
    assert _imports(sample) >= {"asyncio", "nats.js"}


def test_importing_core_loads_no_io_library_at_run_time() -> None:
    import subprocess
    import sys

    # A fresh interpreter: this one has loaded everything already.
    probe = ("import sys, jetcron.core, jetcron.core.models, jetcron.core.timing.triggers, "
             "jetcron.core.placing.placement; "
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('nats', 'asyncio') "
             "or m.startswith(('jetcron.bus', 'jetcron.sdk'))))")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"
    assert subprocess.run([sys.executable, "-c", "import jetcron; assert callable(jetcron.once)"],
                          check=False).returncode == 0


ROOT = CORE.parents[2]


def _nats_importers() -> list[str]:
    found = []
    for path in sorted([*(ROOT / "libs").rglob("*.py"), *(ROOT / "services").rglob("*.py")]):
        if (ROOT / "libs" / "jetcron" / "bus") in path.parents:
            continue
        if any(n == "nats" or n.startswith("nats.") for n in _imports(path)):
            found.append(str(path.relative_to(ROOT)))
    return found


def test_only_bus_imports_nats() -> None:
    # bus is the NATS boundary: services and the SDK name its ports (jetcron.bus.ports), never nats-py's classes.
    assert _nats_importers() == []


GROUPS = ("timing", "lifecycle", "placing", "host", "models")


def test_the_core_is_grouped_by_question_with_only_shared_basics_at_its_top() -> None:
    assert sorted(p.name for p in CORE.iterdir() if p.is_dir() and p.name != "__pycache__") == sorted(GROUPS)
    assert sorted(p.stem for p in CORE.glob("*.py")) == ["__init__", "clock", "errors", "ids", "lazy", "validate"]


@pytest.mark.parametrize("group", GROUPS)
def test_each_group_re_exports_its_modules_public_names(group: str) -> None:
    import importlib

    package = importlib.import_module(f"jetcron.core.{group}")
    exported = list(getattr(package, "__all__", []))
    assert len(exported) >= 10, f"jetcron.core.{group} re-exports {exported}"
    homes = getattr(package, "_HOME", {})  # the lazy groups: each name read from its own module
    for name in exported:
        if name in homes:
            module = importlib.import_module(f"jetcron.core.{group}.{homes[name]}")
            assert getattr(package, name) is getattr(module, name), name
        else:
            assert getattr(package, name) is not None
    with pytest.raises(AttributeError, match=f"module 'jetcron.core.{group}' has no attribute 'no_such_name'"):
        package.no_such_name  # noqa: B018


def test_importing_one_module_of_a_group_loads_that_module_alone() -> None:
    import subprocess
    import sys

    probe = ("import sys, jetcron.core.timing.cron; "
             "print(sorted(m for m in sys.modules if m.startswith('jetcron.core.timing.')))")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    # (and what it imports itself: the croniter-free words of a schedule)
    assert loaded.strip() == "['jetcron.core.timing.cron', 'jetcron.core.timing.schedule_text']"
