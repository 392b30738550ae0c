"""The Grafana dashboard (charts/remedy/files/dashboard.json) and the alert rules read only what
the metric reference (contract/metrics.py, docs/metrics.md) declares: every metric name a query
names is one a declaration exposes, every label it groups or matches by is one of those metrics'
labels (or one every sample carries). And every dashboard query parses as PromQL: the real
promtool checks them as recording rules."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from contract import metrics as metric
from tests.processes import Children
from tests.prometheus import DASHBOARD, RULES, VARIABLES, binary, panels
from tests.prometheus import dashboard_queries as queries

REFERENCE = {n: m for m in [*metric.declared(), *metric.SDK_METRICS] for n in metric.exposed(m)}
CARRIED = {*metric.GLOBAL_LABELS, *metric.WORKFLOW_LABELS, *metric.SCRAPE_LABELS, "le"}
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool"}
KEYWORDS |= {"and", "or", "unless", "inf", "nan"}
SECTIONS = {
    "Fleet health by pool",
    "Ladders by phase and rung",
    "Detection → cordon, and time in each phase",
    "Leases and breaker",
    "Goodput and job success",
}


def names_and_labels(expr: str) -> tuple[set[str], set[str]]:
    """The metric names and label names a PromQL expression uses."""
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', expr)  # strings: no names in them
    labels: set[str] = set()
    for matchers in re.findall(r"\{([^}]*)\}", text):
        labels |= set(re.findall(r"(\w+)\s*(?:=~|!~|!=|=)", matchers))
    text = re.sub(r"\{[^}]*\}", " ", text)
    grouping = r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)"
    for listed in re.findall(grouping, text):
        labels |= {label.strip() for label in listed.split(",") if label.strip()}
    text = re.sub(grouping, " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)  # range and subquery durations
    words = re.findall(r"(?<![\w.:])([A-Za-z_:][\w:]*)\b(?!\s*\()", text)  # not a function
    return {w for w in words if w.lower() not in KEYWORDS}, labels


def off_reference(expr: str) -> list[str]:
    names, labels = names_and_labels(expr)
    unknown = sorted(n for n in names if n not in REFERENCE)
    known = set().union(*(REFERENCE[n].labels for n in names if n in REFERENCE)) | CARRIED
    return [f"metric {n}" for n in unknown] + [f"label {la}" for la in sorted(labels - known)]


def rule_exprs() -> list[str]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [str(r["expr"]) for g in groups for r in g["rules"]]


def test_the_check_finds_a_name_or_label_off_the_reference() -> None:
    p95 = (
        "histogram_quantile(0.95, sum by (le, action) (rate(remedy_rung_duration_bucket{%s}[5m])))"
    )
    assert names_and_labels(p95 % 'pool=~"a|b"') == (
        {"remedy_rung_duration_bucket"},
        {"le", "action", "pool"},
    )
    assert off_reference('sum by (node) (remedy_remediation_total{pool="x"})') == [
        "metric remedy_remediation_total",
        "label node",
        "label pool",  # an unknown metric has no labels to know
    ]
    assert off_reference("max by (pool) (remedy_storm_breaker_tripped) == 1") == []
    assert off_reference("remedy_nodes_cordoned") == ["metric remedy_nodes_cordoned"]  # _total


def test_every_dashboard_query_reads_the_reference() -> None:
    found = queries()
    assert len(found) > 20
    wrong = {q: off_reference(q) for q in found if off_reference(q)}
    assert wrong == {}


def test_every_alert_reads_the_reference() -> None:
    wrong = {e: off_reference(e) for e in rule_exprs() if off_reference(e)}
    assert wrong == {}


def test_the_dashboard_has_its_sections_a_datasource_and_a_pool_variable() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["query"] == "prometheus"
    assert "remedy_fleet_nodes" in variables["pool"]["definition"]
    rows = {p["title"] for p in dashboard["panels"] if p["type"] == "row"}
    assert SECTIONS <= rows
    for panel in panels(dashboard):
        for target in panel.get("targets", []):
            assert target["datasource"]["uid"] == "${datasource}", panel["title"]
    ids = [p["id"] for p in panels(dashboard)]
    assert len(ids) == len(set(ids))


def test_every_dashboard_query_parses_as_promql(tmp_path: Path, processes: Children) -> None:
    """promtool has no query checker; a rules file of the queries, recorded, is parsed."""
    exprs = []
    for q in queries():
        for variable, value in VARIABLES.items():
            q = q.replace(variable, value)
        exprs.append(q)
    as_rules = tmp_path / "dashboard.rules.yaml"
    records = [{"record": f"dashboard:query_{i}", "expr": e} for i, e in enumerate(exprs)]
    as_rules.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": records}]}))
    checked = processes.run([binary("promtool"), "check", "rules", as_rules], timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in checked.stdout
