"""The Web UI views `remedy ui` prints: each query is one the server accepts, the fleet view
keeps the hardware records and schedules' runs out, docs/ui.md lists the same views, and the
README no longer claims a summary column this UI does not have."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from temporalio.testing import WorkflowEnvironment

from contract.names import (
    ACTIVE_CHECKS_WORKFLOW,
    FLEET_SCAN_WORKFLOW,
    HARDWARE_RECORD_WORKFLOW,
    NODE_REMEDIATION_WORKFLOW,
)
from tests.test_cli import cli
from workers.ui_views import VIEWS, markdown, text

ROOT = Path(__file__).resolve().parents[1]


async def test_every_view_is_a_query_the_server_accepts(dev_env: WorkflowEnvironment) -> None:
    for view in VIEWS:
        [_ async for _ in dev_env.client.list_workflows(view.query, limit=1)]


def test_the_fleet_view_keeps_records_and_schedules_out() -> None:
    fleet = VIEWS[0].query
    assert NODE_REMEDIATION_WORKFLOW in fleet
    for quiet in (HARDWARE_RECORD_WORKFLOW, FLEET_SCAN_WORKFLOW, ACTIVE_CHECKS_WORKFLOW):
        assert quiet not in fleet
    assert VIEWS[0].columns[:3] == ["RemedyNode", "RemedyPool", "RemedyPhase"]


async def test_remedy_ui_prints_each_view_with_its_url() -> None:
    code, out = await cli("ui", "--url", "http://ui.example:8080/")
    assert code == 0, out
    lines = out.splitlines()
    for view in VIEWS:
        url = lines[lines.index(view.name) + 1].strip()
        parts = urlsplit(url)
        assert (parts.netloc, parts.path) == ("ui.example:8080", "/namespaces/default/workflows")
        assert parse_qs(parts.query)["query"] == [view.query]


def test_the_docs_list_the_same_views_and_the_readme_claims_no_summary_column() -> None:
    assert markdown() in (ROOT / "docs" / "ui.md").read_text()
    readme = (ROOT / "README.md").read_text()
    assert "The list shows each one's summary" not in readme
    assert "(docs/ui.md)" in readme


def test_every_view_name_is_one_the_ui_saves() -> None:
    """The UI refused to save "remedy: fleet" (a colon): the names printed are letters and
    spaces, and `remedy ui` prints them so."""
    for view in VIEWS:
        assert re.fullmatch(r"[a-z][a-z ]*[a-z]", view.name), view.name
    printed = text("http://ui", "default")
    assert [line for line in printed if not line.startswith(" ")] == [v.name for v in VIEWS]
