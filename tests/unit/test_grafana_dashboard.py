"""The Grafana dashboard in deploy/grafana: every panel's PromQL parses (promtool, where installed) and names only
metrics jetcron exports, with labels they carry; every panel reads the provisioned Prometheus datasource; the
design's panels are there, each alert of deploy/prometheus has a panel that names it, and docs/operations.md
describes every panel. No Grafana is needed: the JSON is what Grafana loads."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.metrics import MetricWrapperBase

from jetcron.telemetry import metrics

ROOT = Path(__file__).resolve().parents[2]
GRAFANA = ROOT / "deploy" / "grafana"
DASHBOARD = GRAFANA / "jetcron.json"
DATASOURCES = GRAFANA / "provisioning" / "datasources" / "jetcron.yaml"
RULES = ROOT / "deploy" / "prometheus" / "jetcron-rules.yml"
OPERATIONS = ROOT / "docs" / "operations.md"

EXPECTED_PANELS = {
    # The design's panels, each with a series it must show.
    "Queue depth by priority": "jetcron_queue_depth",
    "Run wait p99 (due to started)": "jetcron_run_wait_seconds_bucket",
    "Agent heartbeat failures (5 min)": "jetcron_agent_heartbeat_failures_total",
    "Failover time p99 by kind (15 min)": "jetcron_takeover_gap_seconds_bucket",
    "Success rate (30 min)": "jetcron_runs_finished_total",
    # and throughput, storage and notifications
    "Throughput: runs finished by outcome": "jetcron_runs_finished_total",
    "Storage used share by stream": "jetcron_storage_used_ratio",
    "Notification deliveries by target and result": "jetcron_notifications_total",
}
SUFFIXES = {"counter": ("_total", "_created"), "gauge": ("",), "histogram": ("_bucket", "_count", "_sum", "_created")}
TARGET_LABELS = frozenset({"job", "instance"})
"""What Prometheus adds to every scraped series (deploy/compose/prometheus.yml scrapes jetcron's processes only: no
NATS exporter, so no nats-server series)."""
BUILTIN = {"up": TARGET_LABELS}
"""Series Prometheus makes itself."""
GRAFANA_VARIABLES = {"__rate_interval": "1m", "__interval": "15s", "__range": "6h"}
"""Grafana's built-in interval variables and a duration of the kind it puts in their place. The dashboard defines
no variables of its own, so any other `$name` would reach Prometheus unreplaced."""

FUNCTIONS = frozenset([
    "abs", "absent", "absent_over_time", "acos", "acosh", "asin", "asinh", "atan", "atanh", "avg_over_time", "ceil",
    "changes", "clamp", "clamp_max", "clamp_min", "cos", "cosh", "count_over_time", "day_of_month", "day_of_week",
    "day_of_year", "days_in_month", "deg", "delta", "deriv", "double_exponential_smoothing", "end", "exp", "floor",
    "histogram_avg", "histogram_count", "histogram_fraction", "histogram_quantile", "histogram_stddev",
    "histogram_stdvar", "histogram_sum", "holt_winters", "hour", "idelta", "increase", "irate", "label_join",
    "label_replace", "last_over_time", "ln", "log10", "log2", "mad_over_time", "max_over_time", "min_over_time",
    "minute", "month", "pi", "predict_linear", "present_over_time", "quantile_over_time", "rad", "rate", "resets",
    "round", "scalar", "sgn", "sin", "sinh", "sort", "sort_by_label", "sort_by_label_desc", "sort_desc", "sqrt",
    "start", "stddev_over_time", "stdvar_over_time", "sum_over_time", "tan", "tanh", "time", "timestamp", "vector",
    "year"
])
AGGREGATIONS = frozenset([
    "avg", "bottomk", "count", "count_values", "group", "limit_ratio", "limitk", "max", "min", "quantile", "stddev",
    "stdvar", "sum", "topk"
])
GROUPING = frozenset(["by", "without", "on", "ignoring", "group_left", "group_right"])
"""Keywords whose parenthesised list names labels, not series."""
KEYWORDS = frozenset(["and", "or", "unless", "atan2", "bool", "offset", "inf", "nan"])

_TOKEN = re.compile(r"""
    (?P<space>\s+|\#[^\n]*)
  | (?P<string>"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|`[^`]*`)
  | (?P<variable>\$\{[^}]*\}|\$\w+)
  | (?P<number>0[xX][0-9a-fA-F]+|(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?(?:(?:ms|[smhdwy])(?:\d+(?:ms|[smhdwy]))*)?)
  | (?P<name>[A-Za-z_:][A-Za-z0-9_:]*)
  | (?P<op>=~|!~|!=|==|>=|<=|[-+*/%^<>=(){}\[\],:@])
""", re.VERBOSE)


def exported() -> dict[str, frozenset[str]]:
    """Every series name jetcron's processes expose (with the suffixes prometheus_client adds), and the labels each
    carries: its own, `le` on a histogram's buckets, and the scrape's."""
    names: dict[str, frozenset[str]] = dict(BUILTIN)
    for metric in vars(metrics).values():  # the one home of every metric
        if isinstance(metric, MetricWrapperBase):
            # prometheus_client keeps a metric's label names only here: describe() gives the family without them
            own = frozenset(metric._labelnames) | TARGET_LABELS
            for family in metric.describe():
                for suffix in SUFFIXES[family.type]:
                    names[family.name + suffix] = own | ({"le"} if suffix == "_bucket" else frozenset())
    return names


@dataclass
class Scan:
    """What one query names: series, label matchers (with the series they qualify, None for a bare `{...}`), the
    labels it groups or matches by, and what could not be read."""

    series: set[str] = field(default_factory=set)
    matchers: set[tuple[str | None, str]] = field(default_factory=set)
    grouping: set[str] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)


def _tokens(expr: str) -> Iterator[tuple[str, str]]:
    at = 0
    while at < len(expr):
        found = _TOKEN.match(expr, at)
        if found is None:
            raise ValueError(f"unexpected {expr[at:at + 10]!r} at {at}")
        kind = found.lastgroup
        assert kind is not None
        if kind != "space":
            yield kind, found.group()
        at = found.end()


def scan(expr: str) -> Scan:
    """Read the names out of a PromQL expression: an identifier is a series unless it calls a function or
    aggregation, is a keyword, or stands in a label list (`by (...)`, `on (...)`, a selector's `{...}`); strings
    and ranges (`[5m]`, `[1h:1m]`) name nothing."""
    out = Scan()
    try:
        tokens = list(_tokens(expr))
    except ValueError as e:
        out.problems.append(str(e))
        return out

    def text(i: int) -> str | None:
        return tokens[i][1] if i < len(tokens) else None

    def matchers(i: int, series: str | None) -> int:
        """Read `{label op "value", ...}` from the `{` at i; the index after its `}`."""
        i += 1
        while text(i) not in ("}", None):
            if text(i) == ",":
                i += 1
                continue
            label, op, value = text(i), text(i + 1), (tokens[i + 2] if i + 2 < len(tokens) else ("", ""))
            if tokens[i][0] != "name" or op not in ("=", "!=", "=~", "!~") or value[0] != "string":
                out.problems.append(f"a label matcher that does not read: {expr!r}")
                return len(tokens)
            assert label is not None
            if label == "__name__" and op == "=":
                out.series.add(value[1][1:-1])
            else:
                out.matchers.add((series, label))
            i += 3
        return i + 1

    i = 0
    while i < len(tokens):
        kind, word = tokens[i]
        if kind == "variable":
            name = word.strip("${}")
            if name not in GRAFANA_VARIABLES:
                out.problems.append(f"{word}: not a Grafana variable this dashboard has")
            i += 1
        elif word == "[":  # a range or a subquery's range and step: durations and variables only
            close = next((j for j in range(i, len(tokens)) if tokens[j][1] == "]"), len(tokens))
            for var_kind, var in tokens[i + 1:close]:
                if var_kind == "variable" and var.strip("${}") not in GRAFANA_VARIABLES:
                    out.problems.append(f"{var}: not a Grafana variable this dashboard has")
            i = close + 1
        elif word == "{":
            i = matchers(i, None)
        elif kind != "name":
            i += 1
        elif word.lower() in GROUPING:
            if text(i + 1) != "(":  # group_left/group_right may stand without a list
                i += 1
                continue
            i += 2
            while text(i) not in (")", None):
                if tokens[i][0] == "name":
                    out.grouping.add(tokens[i][1])
                i += 1
            i += 1
        elif word.lower() in KEYWORDS or word.lower() in AGGREGATIONS:  # `sum by (le) (...)`: no series
            i += 1
        elif text(i + 1) == "(":
            if word not in FUNCTIONS and word.lower() not in AGGREGATIONS:
                out.problems.append(f"{word}(): not a PromQL function or aggregation")
            i += 1
        else:
            out.series.add(word)
            i = matchers(i + 1, word) if text(i + 1) == "{" else i + 1
    return out


def problems(expr: str, known: dict[str, frozenset[str]] | None = None) -> list[str]:
    """What is wrong with a panel's query: names jetcron does not export, labels its series do not carry, and
    anything the scan could not read."""
    known = exported() if known is None else known
    found = scan(expr)
    wrong = list(found.problems)
    wrong += [f"{name}: not a metric jetcron exports (libs/jetcron/telemetry/metrics.py)"
              for name in sorted(found.series - set(known))]
    carried: set[str] = set().union(*(known.get(name, frozenset()) for name in found.series))
    for series, label in sorted(found.matchers, key=str):
        has = carried if series is None else known.get(series)
        if has is not None and label not in has:  # an unknown series is reported above
            wrong.append(f"{label}: no label of {series or 'the series it matches'}")
    wrong += [f"{label}: grouped by, but no series of the query carries it"
              for label in sorted(found.grouping - carried)]
    return wrong


def to_promql(expr: str) -> str:
    """The query as Prometheus gets it, Grafana's interval variables replaced."""
    return re.sub(r"\$\{?(\w+)\}?", lambda m: GRAFANA_VARIABLES.get(m.group(1), m.group(0)), expr)


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def panels(board: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel, those inside a collapsed row too, rows left out."""
    found: list[dict[str, Any]] = []
    for panel in board["panels"]:
        if panel["type"] == "row":
            found += panel.get("panels", [])
        else:
            found.append(panel)
    return found


def queries(board: dict[str, Any]) -> Iterator[tuple[str, str, str]]:
    """(panel title, refId, expr) of every query."""
    for panel in panels(board):
        for target in panel.get("targets", []):
            yield panel["title"], target["refId"], target.get("expr", "")


def provisioned_uid() -> str:
    sources = yaml.safe_load(DATASOURCES.read_text())["datasources"]
    assert len(sources) == 1 and sources[0]["type"] == "prometheus", sources
    uid: str = sources[0]["uid"]
    return uid


def datasource_problems(node: Any, uid: str, where: str = "dashboard") -> list[str]:
    """Every datasource reference in the dashboard that is not the provisioned Prometheus by uid (a name, a
    variable, another uid, or a panel or query with none, which Grafana would fill with whatever is default)."""
    wrong: list[str] = []
    if isinstance(node, dict):
        where = node["title"] if isinstance(node.get("title"), str) else where  # a query takes its panel's
        if ("targets" in node or "expr" in node) and "datasource" not in node:
            wrong.append(f"{where}: no datasource")
        for key, value in node.items():
            if key == "datasource":
                if not (isinstance(value, dict) and value.get("uid") == uid and value.get("type") == "prometheus"):
                    wrong.append(f"{where}: datasource {value!r}")
            else:
                wrong += datasource_problems(value, uid, where)
    elif isinstance(node, list):
        for item in node:
            wrong += datasource_problems(item, uid, where)
    return wrong


def check_with_promtool(exprs: dict[str, str], directory: Path) -> subprocess.CompletedProcess[str]:
    """`promtool check rules` over a rule file holding each query as a recording rule's expression: promtool parses
    every expression the way Prometheus will (it has no offline check for a bare query)."""
    rules = {"groups": [{"name": "dashboard", "rules": [{"record": record, "expr": expr}
                                                         for record, expr in exprs.items()]}]}
    path = directory / "dashboard-queries.yml"
    path.write_text(yaml.safe_dump(rules, sort_keys=False))
    return subprocess.run(["promtool", "check", "rules", str(path)], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(("expr", "expected"), [
    ("sum by (priority) (jetcron_queue_depth)", []),
    ("histogram_quantile(0.99, sum by (le) (rate(jetcron_run_wait_seconds_bucket[$__rate_interval])))", []),
    ('sum(rate(jetcron_runs_finished_total{outcome="succeeded"}[30m])) / sum(rate(jetcron_runs_finished_total[30m]))',
     []),
    ('up{job=~"jetcron.*"} == 0 and on (instance) jetcron_service_ready offset 5m', []),
    ('label_replace(jetcron_queue_depth, "p", "$1", "priority", "(.*)")', []),
    ("sum(jetcron_queue_dept)", ["jetcron_queue_dept: not a metric jetcron exports"]),
    ("rate(jetcron_retries_bucket[5m])", ["jetcron_retries_bucket: not a metric jetcron exports"]),
    ('{__name__="jetcron_nope"}', ["jetcron_nope: not a metric jetcron exports"]),
    ("rated(jetcron_retries_total[5m])", ["rated(): not a PromQL function"]),
    ("sum by (priorty) (jetcron_queue_depth)", ["priorty: grouped by, but no series"]),
    ('jetcron_queue_depth{outcome="failed"}', ["outcome: no label of jetcron_queue_depth"]),
    ("rate(jetcron_retries_total[$window])", ["$window: not a Grafana variable"]),
    ("sum(jetcron_queue_depth) # a comment naming no_such_metric", []),
    ("sum(jetcron_queue_depth); 1", ["unexpected '; 1'"]),
])
def test_the_scan_names_what_a_query_reads_and_catches_what_is_wrong(expr: str, expected: list[str]) -> None:
    found = problems(expr)
    assert len(found) == len(expected), found
    for problem, start in zip(found, expected, strict=True):
        assert problem.startswith(start), found


def test_every_panel_query_names_only_metrics_jetcron_exports() -> None:
    known = exported()
    wrong = {f"{title} [{ref}]": found for title, ref, expr in queries(dashboard())
             if (found := problems(expr, known) if expr.strip() else ["an empty query"])}
    assert not wrong, f"deploy/grafana/jetcron.json: {wrong}"


@pytest.mark.needs("promtool", reason="it parses every panel's query as Prometheus will")
def test_promtool_parses_every_panel_query(tmp_path: Path) -> None:
    exprs = {f"jetcron_dashboard:panel_{panel['id']}:{target['refId']}": to_promql(target["expr"])
             for panel in panels(dashboard()) for target in panel["targets"]}
    assert len(exprs) == sum(1 for _ in queries(dashboard()))  # no two queries share a rule name
    checked = check_with_promtool(exprs, tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"{len(exprs)} rules found" in checked.stdout, checked.stdout


@pytest.mark.needs("promtool", reason="it shows the parse check refuses a query that does not parse")
def test_promtool_refuses_a_panel_query_that_does_not_parse(tmp_path: Path) -> None:
    checked = check_with_promtool({"jetcron_dashboard:broken": to_promql(
        "sum by (le) (rate(jetcron_run_wait_seconds_bucket[$__rate_interval])")}, tmp_path)
    assert checked.returncode != 0
    assert "jetcron_dashboard:broken" in checked.stdout + checked.stderr


def test_every_panel_reads_the_provisioned_prometheus() -> None:
    uid = provisioned_uid()
    assert not datasource_problems(dashboard(), uid)
    # and the check sees another uid, a datasource by name or variable, and a query that names none
    other = {"panels": [{"title": "p", "datasource": {"type": "prometheus", "uid": "other"},
                         "targets": [{"refId": "A", "expr": "up"}]},
                        {"title": "q", "datasource": "${DS}", "targets": []}]}
    assert datasource_problems(other, uid) == ["p: datasource {'type': 'prometheus', 'uid': 'other'}",
                                               "p: no datasource", "q: datasource '${DS}'"]


def test_the_design_panels_are_there_and_every_alert_has_a_panel() -> None:
    board = dashboard()
    by_title = {panel["title"]: panel for panel in panels(board)}
    for title, series in EXPECTED_PANELS.items():
        assert title in by_title, f"no panel {title!r}"
        assert any(series in scan(t["expr"]).series for t in by_title[title]["targets"]), (title, series)
    rules = yaml.safe_load(RULES.read_text())
    alerts = {rule["alert"] for group in rules["groups"] for rule in group["rules"] if "alert" in rule}
    named = {name for panel in by_title.values() for name in re.findall(r"\bJetcron[A-Z]\w+", panel["description"])}
    assert not named - alerts, f"panels name alerts deploy/prometheus does not define: {named - alerts}"
    assert not alerts - named, f"alerts no panel's description names (add one that shows what it watches): " \
                               f"{alerts - named}"


def test_the_panels_fit_the_grid_and_are_told_apart() -> None:
    board = dashboard()
    assert board["uid"] == "jetcron" and board["editable"] is False
    assert board["templating"]["list"] == [], "variables: GRAFANA_VARIABLES and the scan know none"
    ids = [panel["id"] for panel in board["panels"]]
    assert len(ids) == len(set(ids)), ids
    cells: dict[tuple[int, int], str] = {}
    for panel in board["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        for x in range(grid["x"], grid["x"] + grid["w"]):
            for y in range(grid["y"], grid["y"] + grid["h"]):
                assert (x, y) not in cells, f"{panel['title']} overlaps {cells[(x, y)]}"
                cells[(x, y)] = panel["title"]
    for panel in panels(board):
        refs = [t["refId"] for t in panel["targets"]]
        assert refs and len(refs) == len(set(refs)), panel["title"]
        assert panel["description"], panel["title"]


def test_operations_md_describes_every_panel() -> None:
    text = OPERATIONS.read_text()
    missing = [panel["title"] for panel in panels(dashboard()) if f"| {panel['title']} |" not in text]
    assert not missing, f"docs/operations.md (\"Grafana dashboard\") has no row for {missing}"
