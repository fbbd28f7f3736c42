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


def test_a_rerun_takes_its_tests_places_and_the_page_says_so() -> None:
    first, second = G.CATALOGUE[0].test, G.CATALOGUE[1].test
    report = {"finished_at": "2026-12-03T00:00:00+00:00", "tests": {
        first: {"outcome": "passed", "figures": {"recovery_s": 1.5}},
        second: {"outcome": "failed", "figures": {}}}}
    rerun = {"finished_at": "2026-12-03T01:00:00+00:00", "tests": {
        second: {"outcome": "passed", "figures": {"recovery_after_heal_s": 2.5}}}}
    merged = G.merge(report, rerun, "the test's own request timed out")
    assert merged["tests"][first] == report["tests"][first]
    assert merged["tests"][second]["outcome"] == "passed"
    table = G.tables(merged)
    assert (f"Rerun on its own (finished 2026-12-03T01:00:00+00:00): `{second.split('::')[1]}`; the test's own "
            "request timed out.") in table
    assert next(line for line in table.splitlines() if G.CATALOGUE[1].fault in line).endswith(
        "| 2.5 s (recovery_after_heal_s) | held |")


def test_each_fuzzed_verb_is_a_row_and_a_finding_fails_only_its_own() -> None:
    report = {"finished_at": "2026-12-03T00:00:00+00:00", "tests": {G.FUZZED[0]: {"outcome": "failed", "fuzzed": {
        "jobs.create": {"tenant": 40, "admin": 40, "replies": {"ok": 10, "invalid": 70}, "failure": ""},
        "jobs.update": {"tenant": 3, "admin": 0, "replies": {"invalid": 3}, "failure": "internal | no field"}}}}}
    table = G.tables(report).splitlines()
    assert "| `jobs.create` | 40 / 40 | invalid 70, ok 10 | held |" in table
    assert "| `jobs.update` | 3 / 0 | invalid 3 | failed: internal \\| no field |" in table
    assert "| (not run) | | | |" in G.tables({"tests": {}}).splitlines()
