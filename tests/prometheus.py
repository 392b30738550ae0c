"""Debian's Prometheus binaries, which `make tools` unpacks into .tools/ (Makefile): promtool and
the server. A test that needs one fails without it, saying how to get it; nothing downloads at
test time."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / ".tools" / "prometheus-deb" / "usr" / "bin"
RULES = ROOT / "charts" / "remedy" / "files" / "remedy-alerts.rules.yaml"
RULES_TESTS = ROOT / "tests" / "alerts" / "remedy-alerts.test.yaml"
DASHBOARD = ROOT / "charts" / "remedy" / "files" / "dashboard.json"


def binary(name: str) -> Path:
    """``promtool`` or ``prometheus``; a test failure (not a skip) when absent."""
    path = BIN / name
    if not path.is_file():
        pytest.fail(f"{path} is missing: run `make tools` (Debian's prometheus package)")
    return path
