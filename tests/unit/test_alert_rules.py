"""The Prometheus rules in deploy/ name only metrics jetcron exports, carry the alerts operations.md promises,
and pass promtool (check and unit tests) where promtool is installed."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.metrics import MetricWrapperBase

from jetcron.telemetry import metrics

RULES_DIR = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"
RULES = RULES_DIR / "jetcron-rules.yml"
EXPECTED_ALERTS = {
    "JetcronTopologyRecreated",  # a stream, bucket or consumer deleted under the running system
    "JetcronQueueGrowing",  # queue growing while submissions are flat
    "JetcronRunWaitHigh",  # wait p99 > 5 min
    "JetcronAgentHeartbeatFailures",
    "JetcronTakeoverSlow",  # takeover > 30 s
    "JetcronSuccessRateLow",  # success rate < 95%
    "JetcronStorageHigh",  # a stream, bucket or the server's store over 80 %
    "JetcronHistoryShed",  # history let go before its retention
    "JetcronRetryRateHigh",  # retries > 20 % of the runs entering over 15 min, for 10 min
    "JetcronUrgentQueueGrowing",  # > 5 critical or high runs waiting and growing, per priority
    "JetcronTakeoverGapLong",  # old holder's last action -> new holder's first > 30 s
    "JetcronAgentsLost",  # an agent's entry aged out without a clean exit (counted by the tracker)
}
# Series Prometheus itself provides.
BUILTIN = {"up"}
SUFFIXES = {"counter": ("_total", "_created"), "gauge": ("",), "histogram": ("_bucket", "_count", "_sum", "_created")}


def _rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load(RULES.read_text())
    return [rule for group in doc["groups"] for rule in group["rules"]]


def _exported() -> set[str]:
    names: set[str] = set()
    for metric in vars(metrics).values():  # the one home of every metric
        if isinstance(metric, MetricWrapperBase):
            for family in metric.describe():
                names.update(family.name + suffix for suffix in SUFFIXES[family.type])
    return names


def test_every_expected_alert_is_defined_with_severity_and_summary() -> None:
    alerts = {rule["alert"]: rule for rule in _rules() if "alert" in rule}
    missing = EXPECTED_ALERTS - set(alerts)
    assert not missing, missing
    for name, rule in alerts.items():
        assert rule["labels"]["severity"] in {"critical", "warning", "info"}, name
        assert rule["annotations"]["summary"], name


def test_rules_name_only_metrics_that_exist() -> None:
    exported = _exported()
    recorded = {rule["record"] for rule in _rules() if "record" in rule}
    unknown: dict[str, set[str]] = {}
    for rule in _rules():
        # Metric names: identifiers outside label matchers and strings, and not function calls.
        expr = re.sub(r"\{[^}]*\}", "", re.sub(r'"[^"]*"', '""', rule["expr"]))
        names = set(re.findall(r"\b(jetcron[a-z0-9_:]*|up)\b(?!\s*\()", expr))
        missing = {n for n in names if n not in exported and n not in recorded and n not in BUILTIN}
        if missing:
            unknown[rule.get("alert") or rule["record"]] = missing
    assert not unknown, f"rules use metrics that libs/jetcron/telemetry/metrics.py does not define: {unknown}"


def test_metric_names_follow_prometheus_conventions() -> None:
    for name in _exported():
        assert re.fullmatch(r"jetcron_[a-z0-9_]+", name), name
        assert not re.search(r"_(ms|milliseconds|minutes|mb|kb)(_|$)", name), f"{name}: use base units"


@pytest.mark.needs("promtool", reason="it checks the rules and runs their unit tests")
def test_promtool_accepts_the_rules_and_their_unit_tests() -> None:
    check = subprocess.run(["promtool", "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    test = subprocess.run(["promtool", "test", "rules", "jetcron-rules.test.yml"], cwd=RULES_DIR,
                          capture_output=True, text=True, timeout=60)
    assert test.returncode == 0, test.stdout + test.stderr
