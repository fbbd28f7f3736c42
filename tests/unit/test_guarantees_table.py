"""docs/guarantees.md's fault and bad-input tables are generated from the last `make chaos` report
(docs/chaos-report.json): the page matches its report, every fault names a test that exists, and the verdict
says what the report says."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("guarantees", ROOT / "tests" / "chaos" / "guarantees.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


G = _generator()


def test_the_page_is_what_the_last_report_makes() -> None:
    report = json.loads((ROOT / "docs" / "chaos-report.json").read_text())
    doc = (ROOT / "docs" / "guarantees.md").read_text()
    assert G.rewrite(doc, G.tables(report)) == doc, (
        "docs/guarantees.md is stale: python tests/chaos/guarantees.py docs/chaos-report.json docs/guarantees.md")


@pytest.mark.parametrize("fault", [f for f in G.CATALOGUE if f.test], ids=lambda f: f.test.split("::")[1])
def test_every_fault_names_a_test_that_exists(fault: object) -> None:
    path, name = fault.test.split("::")  # type: ignore[attr-defined]
    function, _, param = name.partition("[")
    source = (ROOT / path).read_text()
    assert re.search(rf"^(async )?def {re.escape(function)}\(", source, re.M), fault
    if param:
        assert f'"{param[:-1]}"' in source, f"{fault}: no parameter id {param[:-1]!r}"


def test_a_row_says_held_only_when_the_test_passed_with_nothing_lost_or_doubled(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(G, "CATALOGUE", [*G.CATALOGUE, G.Fault("a fault with no test yet", "", G.INVARIANTS)])
    paused = G.CATALOGUE[2].test
    report = {"finished_at": "2026-12-03T00:00:00+00:00", "tests": {
        G.CATALOGUE[0].test: {"outcome": "passed", "figures": {"lost": 0, "duplicates": 0, "recovery_s": 4.25}},
        G.CATALOGUE[1].test: {"outcome": "failed", "figures": {"lost": 2, "duplicates": 0}},
        G.BAD_INPUT + "[huge_body]": {"outcome": "passed", "checks": "`invalid` naming `body`"},
    }}
    table = G.tables(report).splitlines()
    row = {line.split(" | ")[0].lstrip("| "): line for line in table if line.startswith("| ")}
    assert row[G.CATALOGUE[0].fault].endswith("| 4.25 s (recovery_s) | held |")
    assert row[G.CATALOGUE[1].fault].endswith("| failed |")
    assert next(r for r in row.values() if paused.split("::")[1] in r).endswith("| not run |")
    assert row["a fault with no test yet"].endswith("| not tested |")
    assert row["huge body"] == "| huge body | `invalid` naming `body` | held |"


def test_a_rerun_never_hides_a_failure() -> None:
    first, second, third = G.CATALOGUE[0].test, G.CATALOGUE[1].test, G.CATALOGUE[3].test
    report = {"finished_at": "2026-12-03T00:00:00+00:00", "tests": {
        first: {"outcome": "passed", "figures": {"recovery_s": 1.5}},
        second: {"outcome": "failed", "figures": {}},
        third: {"outcome": "passed", "figures": {"recovery_s": 2.0}}}}
    rerun = {"finished_at": "2026-12-03T01:00:00+00:00", "tests": {
        second: {"outcome": "passed", "figures": {"recovery_after_heal_s": 2.5}},
        third: {"outcome": "failed", "figures": {}}}}
    merged = G.merge(report, rerun, "the test's own request timed out")
    assert merged["tests"][first] == report["tests"][first]
    assert merged["tests"][second]["runs"] == ["failed", "held"]
    table = G.tables(merged)
    again = ", ".join(f"`{n.split('::')[1]}`" for n in sorted([second, third]))
    assert (f"Run again (finished 2026-12-03T01:00:00+00:00): {again}; the test's own request timed out. A verdict "
            "counts every run.") in table

    def verdict(fault: str) -> str:
        return next(line for line in table.splitlines() if fault in line).rsplit("|", 2)[-2].strip()

    # A test that failed and then passed says both; one that passed and then failed has failed
    assert verdict(G.CATALOGUE[0].fault) == "held"
    assert verdict(G.CATALOGUE[1].fault) == "held on rerun (failed 1 of 2)"
    assert verdict(G.CATALOGUE[3].fault) == "failed"


def test_three_full_runs_held_read_held() -> None:
    name = G.CATALOGUE[0].test
    runs = [{"finished_at": f"2026-12-0{i}T00:00:00+00:00", "tests": {
        name: {"outcome": "passed", "figures": {"recovery_s": float(i)}}}} for i in (1, 2, 3)]
    merged = G.merge(G.merge(runs[0], runs[1], "second full run"), runs[2], "third full run")
    assert merged["tests"][name]["runs"] == ["held", "held", "held"]
    assert G._verdict(merged["tests"][name]) == "held"
