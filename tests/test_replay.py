"""Replay the recorded histories of every supported release against today's workflow code.

Upgrades are supported from the release before only (docs/operations.md, "Upgrading"): this
release replays the histories the release before recorded (its perpetual workflows go on here,
AUTO_UPGRADE) and its own (a worker's cache evicts a run, which is then replayed). A change that
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
from contract.patches import LIVE, MOST_LIVE
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
BEFORE = "0.12.0"  # the release before this one: where upgrades to this one come from
SUPPORTED = (BEFORE, THIS)
# Recorded by 0.1.0, whose markers were not deprecated: kept to show such a history fails
# (an upgrade from 0.1.0 goes through 0.12.0, which deprecated them).
UNSUPPORTED = {"reset_fixes_ecc_0.1.0", "budget_0.1.0"}
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
    (deleted with its support) but the two kept to fail."""
    recorded = {h.stem for h in HISTORY_DIR.glob("*.json")}
    assert recorded == {h.stem for h in SUPPORTED_HISTORIES} | UNSUPPORTED
    # The release before deprecated every marker it records; this one asks only LIVE ones.
    for path in SUPPORTED_HISTORIES:
        markers = _markers(path)
        if path.stem.endswith(BEFORE):
            assert all(markers.values()), (path.stem, markers)
        else:
            assert set(markers) <= set(LIVE), (path.stem, markers)
    assert _markers(HISTORY_DIR / "reset_fixes_ecc_0.12.0.json")  # it did record some


@pytest.mark.parametrize("path", SUPPORTED_HISTORIES, ids=lambda p: p.stem)
async def test_recorded_history_replays(path: Path) -> None:
    result = await _replay(path)
    assert result.replay_failure is None, result.replay_failure


@pytest.mark.parametrize("name", sorted(UNSUPPORTED))
async def test_a_history_whose_marker_is_not_deprecated_fails(name: str) -> None:
    """Measured, not assumed: a marker that is not deprecated, in a history replayed by code
    that no longer asks for it, is a nondeterminism error; so a patch is deprecated for one
    release before it is removed (contract/patches.py)."""
    result = await _replay(HISTORY_DIR / f"{name}.json")
    assert "Non-deprecated patch marker encountered" in str(result.replay_failure)


def test_live_patches_are_few_and_each_has_its_removal_release() -> None:
    """The ids the workflows and the contract ask are listed in LIVE, at most MOST_LIVE, each
    removed in a release after this one."""
    sources = [*ROOT.glob("workflows/*.py"), *(ROOT / "contract").glob("*.py")]
    texts = {f: f.read_text() for f in sources}
    names = {n: v for t in texts.values() for n, v in re.findall(r'^([A-Z_]+) = "(.+)"', t, re.M)}
    asks = [t for f, t in texts.items() if f.name != "patches.py"]  # which defines ``patched``
    calls = [c for t in asks for c in re.findall(r"patched\(([^)]*)\)", t)]
    asked = {names.get(c.split(".")[-1], c.strip('"')) for c in calls}
    direct = [f.name for f, t in texts.items() if "workflow.patched(" in t]
    assert direct == ["patches.py"], direct  # every ask goes through contract.patches
    assert asked <= set(LIVE)
    assert len(LIVE) <= MOST_LIVE
    release = tuple(int(p) for p in THIS.split("."))
    assert all(tuple(int(p) for p in r.split(".")) > release for r in LIVE.values()), LIVE
