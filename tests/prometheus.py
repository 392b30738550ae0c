"""Debian's Prometheus binaries, which `make tools` unpacks into .tools/ (Makefile): promtool and
the server. A test that needs one fails without it, saying how to get it; nothing downloads at
test time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / ".tools" / "prometheus-deb" / "usr" / "bin"
RULES = ROOT / "charts" / "remedy" / "files" / "remedy-alerts.rules.yaml"
RULES_TESTS = ROOT / "tests" / "alerts" / "remedy-alerts.test.yaml"
DASHBOARD = ROOT / "charts" / "remedy" / "files" / "dashboard.json"
# Grafana's variables, as a dashboard query runs: any pool, a five-minute rate window.
VARIABLES = {"$__rate_interval": "5m", "$pool": ".*"}


def binary(name: str) -> Path:
    """``promtool`` or ``prometheus``; a test failure (not a skip) when absent."""
    path = BIN / name
    if not path.is_file():
        pytest.fail(f"{path} is missing: run `make tools` (Debian's prometheus package)")
    return path


def panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel, those inside a row's too."""
    flat = []
    for panel in dashboard["panels"]:
        flat += [panel, *panel.get("panels", [])]
    return flat


def dashboard_queries() -> list[str]:
    """Each panel target's PromQL, as written (with Grafana's variables)."""
    dashboard = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in panels(dashboard) for t in p.get("targets", [])]
