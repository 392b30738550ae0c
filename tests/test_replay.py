"""Replay the recorded histories of every supported release against today's workflow code.

0.12.0 is the release between 0.1.0 and 0.13.0 (docs/operations.md of 0.13.0, "Upgrading"): it
replays the histories 0.1.0 recorded (a rolling update hands its runs over) and its own (a
worker's cache evicts a run, which is then replayed). A change that
makes a running workflow non-deterministic (reordered activities, a timer added without a
patch) fails here instead of in production. tests/histories/record.py records a release's."""

from __future__ import annotations

import base64
import json
import re
import tomllib
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer, WorkflowReplayResult

from contract.names import NODE_REMEDIATION_WORKFLOW, remediation_workflow_id
from contract.patches import FOLDED_FOUR
from workers.controller import STRICT_WORKFLOW_RUNNER
from workflows.active_check import ActiveCheck
from workflows.active_checks import ActiveChecks
from workflows.disruption_budget import DisruptionBudget
from workflows.fleet_scan import FleetScan
from workflows.job_guard import JobGuard
from workflows.node_remediation import NodeRemediation

ROOT = Path(__file__).parents[1]
HISTORY_DIR = Path(__file__).parent / "histories"
THIS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
BEFORE = "0.1.0"  # the release before this one: where upgrades to this one come from
SUPPORTED = (BEFORE, THIS)
CONTRACT = ("defs.py", "search_attributes.py")  # where the contract names changes
SCENARIOS = (
    "reset_fixes_ecc",  # a ladder: reset, verified
    "replace_after_approval",  # a ladder: replace, after an approval
    "budget",  # the pool's budget (a prefix: it runs on), over the reset's ladder
    "budget_people",  # ... over the replacement's, which told it that it waits for a person
    "job_guard_restart_then_stop",
    "active_checks_round",  # a pool's round, and a busy node's check under the budget
    "active_check_taken_out",
    "fleet_scan",  # a problem condition and a silent agent, each given a ladder
)
SUPPORTED_HISTORIES = [HISTORY_DIR / f"{s}_{r}.json" for r in SUPPORTED for s in SCENARIOS]


def _markers(path: Path) -> dict[str, bool]:
    """The workflow.patched ids a history's markers record, and whether each is deprecated."""
    events = json.loads(path.read_text())["events"]
    found = {}
    for e in events:
        details = e.get("markerRecordedEventAttributes", {}).get("details", {})
        # a local activity's marker holds its result, not a patch
        for payload in details.get("patch-data", {}).get("payloads", []):
            patch = json.loads(base64.b64decode(payload["data"]))
            found[patch["id"]] = bool(patch.get("deprecated"))
    return found


def _workflow_id(path: Path) -> str:
    """The id the history ran under, for a ladder (it checks it is its node's); else the
    file's name."""
    started = json.loads(path.read_text())["events"][0]["workflowExecutionStartedEventAttributes"]
    if started["workflowType"]["name"] != NODE_REMEDIATION_WORKFLOW:
        return path.stem
    data = json.loads(base64.b64decode(started["input"]["payloads"][0]["data"]))
    return remediation_workflow_id(data["node"]["name"])


async def _replay(path: Path) -> WorkflowReplayResult:
    history = WorkflowHistory.from_json(_workflow_id(path), path.read_text())
    replayer = Replayer(
        workflows=[
            NodeRemediation,
            DisruptionBudget,
            JobGuard,
            ActiveChecks,
            ActiveCheck,
            FleetScan,
        ],
        data_converter=pydantic_data_converter,
        workflow_runner=STRICT_WORKFLOW_RUNNER,  # every module re-imported, every call checked
    )
    return await replayer.replay_workflow(history, raise_on_replay_failure=False)


def test_histories_are_recorded() -> None:
    """Every scenario of every supported release, nothing of a release no longer supported
    (deleted with its support: v1-v12)."""
    recorded = {h.stem for h in HISTORY_DIR.glob("*.json")}
    assert recorded == {h.stem for h in SUPPORTED_HISTORIES}
    # 0.1.0 recorded plain markers; this release deprecates every one (so 0.13.0, asking
    # none, replays what this one records).
    for path in SUPPORTED_HISTORIES:
        markers = _markers(path)
        deprecated = path.stem.endswith(THIS)
        assert all(d == deprecated for d in markers.values()), (path.stem, markers)
    assert _markers(HISTORY_DIR / f"reset_fixes_ecc_{THIS}.json")  # it did record some


@pytest.mark.parametrize("path", SUPPORTED_HISTORIES, ids=lambda p: p.stem)
async def test_recorded_history_replays(path: Path) -> None:
    result = await _replay(path)
    assert result.replay_failure is None, result.replay_failure


def test_every_folded_change_is_one_the_workflows_ask() -> None:
    """A misspelt id in contract.patches.FOLDED would fold nothing: its change would record
    its own marker again (and one no longer asked must leave the list with its branch)."""
    root = HISTORY_DIR.parents[1]
    sources = [*root.glob("workflows/*.py"), *(root / "contract" / f for f in CONTRACT)]
    asked = {m for f in sources for m in re.findall(r'"([a-z0-9-]+)"', f.read_text())}
    assert sorted(FOLDED_FOUR - asked) == []
