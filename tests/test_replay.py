"""Replay recorded NodeRemediation, DisruptionBudget, JobGuard, active-check and fleet-scan
histories against today's workflow code.

A change that makes a running workflow non-deterministic (reordered activities, a timer added
without workflow.patched) fails here instead of in production."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from contract.activities import (
    ADMIT_REPORT,
    ASK_TO_CORDON,
    CORDON,
    DELIVER_BUDGET_SIGNALS,
    OPERATOR_KEYRING,
    RELEASE_LEASE,
    REQUEST_LEASE,
)
from contract.names import NODE_REMEDIATION_WORKFLOW, remediation_workflow_id
from contract.patches import (
    FOLDED_AGAIN_INTO,
    FOLDED_FOUR,
    FOLDED_FOUR_INTO,
    FOLDED_INTO,
    FOLDED_THRICE_INTO,
)
from workers.controller import STRICT_WORKFLOW_RUNNER
from workflows.active_check import ActiveCheck
from workflows.active_checks import ActiveChecks
from workflows.budget_renewal import CONTINUE_WHEN_QUIET
from workflows.common import FIRST_TASK
from workflows.disruption_budget import DisruptionBudget
from workflows.disruption_lease import LOCAL_LEASE_CALLS
from workflows.fleet_scan import CONTROLLER_CLOCK, FleetScan
from workflows.job_guard import JobGuard
from workflows.node_remediation import NodeRemediation

HISTORY_DIR = Path(__file__).parent / "histories"
HISTORIES = sorted(HISTORY_DIR.glob("*.json"))
LADDERS = {"reset_fixes_ecc", "replace_after_approval"}
CONTRACT = ("defs.py", "search_attributes.py")  # where the contract names changes


def _patches(path: Path) -> set[str]:
    """The workflow.patched ids a history's markers record."""
    events = json.loads(path.read_text())["events"]
    return {
        json.loads(base64.b64decode(payload["data"]))["id"]
        for e in events
        if "markerRecordedEventAttributes" in e
        # a local activity's marker holds its result, not a patch
        for payload in e["markerRecordedEventAttributes"]["details"]
        .get("patch-data", {})
        .get("payloads", [])
    }


def test_histories_are_recorded() -> None:
    assert {h.stem for h in HISTORIES} == {
        *LADDERS,
        *(f"{n}_v2" for n in LADDERS),
        *(f"{n}_v3" for n in LADDERS),
        *(f"{n}_v4" for n in LADDERS),
        *(f"{n}_v5" for n in LADDERS),
        *(f"{n}_v6" for n in LADDERS),
        *(f"{n}_v7" for n in LADDERS),
        *(f"{n}_v8" for n in LADDERS),
        *(f"{n}_v9" for n in LADDERS),
        *(f"{n}_v10" for n in LADDERS),
        *(f"{n}_v11" for n in LADDERS),
        *(f"{n}_v12" for n in LADDERS),
        "job_guard_restart_then_stop",
        "job_guard_restart_then_stop_v2",  # indexed: RemedyJob, RemedyJobState (upserts)
        "budget_v3",
        "budget_v4",
        "budget_v5",
        "budget_people_v5",
        "budget_v6",
        "budget_people_v6",
        "budget_v7",
        "budget_people_v7",
        "budget_v8",
        "budget_people_v8",
        "budget_v9",  # the releases come from the controller (the ladders' local activities)
        "budget_people_v9",
        "budget_v10",  # the second fold: one marker for every change so far
        "budget_people_v10",
        "budget_v11",  # the third fold; the ladders load their keyring when first needed
        "budget_people_v11",
        "budget_v12",  # the ladders keep their door (reports through the controller's check)
        "budget_people_v12",
        "active_checks_round",  # a pool's round, and a busy node's check under the budget
        "active_check_taken_out",
        "fleet_scan",  # a problem condition and a silent agent, each given a ladder
        "fleet_scan_v2",  # liveness judged on the scans' clock, from the scan before's result
        # A budget's first run through a burst of reports past the suggestion to continue as
        # new (tests/histories/record_continued.py): before, it continued in the burst, a
        # task failed; since, once quiet, behind its own marker.
        "budget_continued_at_suggestion",
        "budget_continued_when_quiet",
    }
    # v2: recorded after remedy began indexing ladders, so their replay covers the upserts.
    for name in LADDERS:
        for tag, indexed in (("", False), ("_v2", True)):
            text = (HISTORY_DIR / f"{name}{tag}.json").read_text()
            assert ("UPSERT_WORKFLOW_SEARCH_ATTRIBUTES" in text) == indexed, name + tag
    # v3: exactly once — leases asked again and indexed, the GPUs given back after a failed
    # release, a replacement once per node object, a budget that rebuilds its holders.
    ecc = {"remedy-index-lease", "re-ask-for-lease", "return-gpus-after-a-failed-release"}
    assert ecc <= _patches(HISTORY_DIR / "reset_fixes_ecc_v3.json")
    replace = _patches(HISTORY_DIR / "replace_after_approval_v3.json")
    assert "replace-once-per-node-object" in replace
    assert "rebuild-holders-from-running-ladders" in _patches(HISTORY_DIR / "budget_v3.json")
    # v4: no silent no-ops, no false recoveries — rungs the node cannot perform skipped, each
    # rung verified with what saw the fault, a recurrence resumed above, every GPU diagnosed.
    node_side = {
        "skip-rungs-the-node-cannot-perform",
        "verify-with-what-saw-the-fault",
        "resume-above-a-recovery-that-did-not-hold",
    }
    assert node_side <= _patches(HISTORY_DIR / "reset_fixes_ecc_v4.json")
    replaced = _patches(HISTORY_DIR / "replace_after_approval_v4.json")
    assert node_side | {"diagnose-every-gpu"} <= replaced
    scan_v2 = HISTORY_DIR / "fleet_scan_v2.json"
    assert CONTROLLER_CLOCK in _patches(scan_v2) - _patches(HISTORY_DIR / "fleet_scan.json")
    assert "lastCompletionResult" in scan_v2.read_text()  # what it judged the heartbeats by
    # v5: a pool never seizes silently — a holder tells its budget it waits for a person (the
    # replacement's approval), on_approval_timeout read, a budget rebuilds its waiters in order.
    people = {"tell-the-budget-a-holder-waits-for-a-person", "on-approval-timeout-choices"}
    assert people <= _patches(HISTORY_DIR / "replace_after_approval_v5.json")
    for budget in ("budget_v5", "budget_people_v5"):
        assert "rebuild-waiters-in-order" in _patches(HISTORY_DIR / f"{budget}.json")
    assert "holder_waits" in (HISTORY_DIR / "budget_people_v5.json").read_text()
    # v6: fleet-scale speed — the first cordon before anything that can wait; the budget
    # publishes its breaker, sends without waiting, backs its sweep off while ladders wait.
    for name in LADDERS:
        first = "cordon-first-where-the-published-breaker-is-closed"
        assert first in _patches(HISTORY_DIR / f"{name}_v6.json")
    budget_v6 = {"publish-the-breaker-for-cordons", "budget-sends-without-waiting"}
    for budget in ("budget_v6", "budget_people_v6"):
        assert budget_v6 <= _patches(HISTORY_DIR / f"{budget}.json")
    # v7: every change so far folded into one marker per run (contract.patches); the budget's
    # grants go out in one activity that signals the holders side by side.
    for name in (*(f"{n}_v7" for n in LADDERS), "budget_v7", "budget_people_v7"):
        assert _patches(HISTORY_DIR / f"{name}.json") == {FOLDED_INTO}, name
    for budget in ("budget_v7", "budget_people_v7"):
        assert DELIVER_BUDGET_SIGNALS.name in (HISTORY_DIR / f"{budget}.json").read_text()
    # v8: a ladder's first steps (its keyring, its first cordon, the report after it) run in
    # its first workflow task, as local activities: their answers are markers, no task each.
    for name in LADDERS:
        v8 = HISTORY_DIR / f"{name}_v8.json"
        assert _patches(v8) == {FOLDED_INTO, FIRST_TASK}, name
        assert _local_activities(v8)[:3] == [CORDON.name, OPERATOR_KEYRING.name, ASK_TO_CORDON.name]
    # v9: the lease asked and given back by local activities of the ladder's workflow tasks.
    for name in LADDERS:
        v9 = HISTORY_DIR / f"{name}_v9.json"
        assert _patches(v9) == {FOLDED_INTO, FIRST_TASK, LOCAL_LEASE_CALLS}, name
        assert _local_activities(v9)[3:] == [REQUEST_LEASE.name, RELEASE_LEASE.name], name
        assert REQUEST_LEASE.name not in _local_activities(HISTORY_DIR / f"{name}_v8.json")
    # v10: every change so far folded again into one marker per run, the lease asked for its
    # answer (on the time-skipping server it is still signalled: tests/test_lease_answered.py
    # replays the answered shape) and one upsert per turn of the ladder's event loop.
    for name in (*(f"{n}_v10" for n in LADDERS), "budget_v10", "budget_people_v10"):
        assert _patches(HISTORY_DIR / f"{name}.json") == {FOLDED_AGAIN_INTO}, name
    for name in LADDERS:
        assert _upserts(name, "v10") < _upserts(name, "v9"), name
    before, since = (
        HISTORY_DIR / f"budget_continued_{n}.json" for n in ("at_suggestion", "when_quiet")
    )
    assert _patches(before) == {FOLDED_AGAIN_INTO} and "WORKFLOW_TASK_FAILED" in before.read_text()
    assert _patches(since) == {FOLDED_AGAIN_INTO, CONTINUE_WHEN_QUIET}
    assert "WORKFLOW_TASK_FAILED" not in since.read_text()
    # v11: folded a third time; the keyring loads when first needed (before the first rung,
    # here), not in the ladder's first workflow task.
    for name in (*(f"{n}_v11" for n in LADDERS), "budget_v11", "budget_people_v11"):
        assert _patches(HISTORY_DIR / f"{name}.json") == {FOLDED_THRICE_INTO}, name
    for name in LADDERS:
        first = _local_activities(HISTORY_DIR / f"{name}_v11.json")
        assert first[:3] == [CORDON.name, ASK_TO_CORDON.name, OPERATOR_KEYRING.name], name
        assert _first_task_markers(name, "v11") < _first_task_markers(name, "v10"), name
    # v12: the door, one marker more; the report goes through the controller's check
    # (admit_report) before the ladder's first cordon.
    for name in LADDERS:
        path = HISTORY_DIR / f"{name}_v12.json"
        assert _patches(path) == {FOLDED_FOUR_INTO}, name  # folded: one marker still
        assert _local_activities(path)[:3] == [ADMIT_REPORT.name, CORDON.name, ASK_TO_CORDON.name]
    for name in ("budget_v12", "budget_people_v12"):
        assert _patches(HISTORY_DIR / f"{name}.json") == {FOLDED_FOUR_INTO}, name
    # Job guards index themselves behind a patch: the history from before upserts nothing.
    for tag, indexed in (("", False), ("_v2", True)):
        guard = HISTORY_DIR / f"job_guard_restart_then_stop{tag}.json"
        assert ("remedy-index-job-guards" in _patches(guard)) == indexed
        assert ("UPSERT_WORKFLOW_SEARCH_ATTRIBUTES" in guard.read_text()) == indexed


def _upserts(ladder: str, tag: str) -> int:
    """The search attribute upserts in a recorded ladder's history."""
    return (HISTORY_DIR / f"{ladder}_{tag}.json").read_text().count("UPSERT_WORKFLOW_SEARCH")


def _first_task_markers(ladder: str, tag: str) -> int:
    """The markers in a recorded ladder's first workflow task completed (its patches and
    local activities): what every ladder of a storm pays for before it parks."""
    events = json.loads((HISTORY_DIR / f"{ladder}_{tag}.json").read_text())["events"]
    types = [e["eventType"] for e in events]
    first = types.index("EVENT_TYPE_WORKFLOW_TASK_COMPLETED")
    end = next(
        (i for i, t in enumerate(types) if i > first and t.startswith("EVENT_TYPE_WORKFLOW_TASK")),
        len(types),
    )
    return types[first:end].count("EVENT_TYPE_MARKER_RECORDED")


def _local_activities(path: Path) -> list[str]:
    """The activity types of a history's local-activity markers, in order."""
    events = json.loads(path.read_text())["events"]
    markers = [
        e["markerRecordedEventAttributes"]["details"]["data"]["payloads"][0]["data"]
        for e in events
        if e.get("markerRecordedEventAttributes", {}).get("markerName") == "core_local_activity"
    ]
    return [json.loads(base64.b64decode(m))["activity_type"] for m in markers]


def _workflow_id(path: Path) -> str:
    """The id the history ran under, for a ladder (since the door a ladder checks it is its
    node's); else the file's name."""
    started = json.loads(path.read_text())["events"][0]["workflowExecutionStartedEventAttributes"]
    if started["workflowType"]["name"] != NODE_REMEDIATION_WORKFLOW:
        return path.stem
    data = json.loads(base64.b64decode(started["input"]["payloads"][0]["data"]))
    return remediation_workflow_id(data["node"]["name"])


@pytest.mark.parametrize("path", HISTORIES, ids=lambda p: p.stem)
async def test_recorded_history_replays(path: Path) -> None:
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
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, result.replay_failure


def test_every_folded_change_is_one_the_workflows_ask() -> None:
    """A misspelt id in contract.patches.FOLDED would fold nothing: its change would record
    its own marker again (and one no longer asked must leave the list with its branch)."""
    root = HISTORY_DIR.parents[1]
    sources = [*root.glob("workflows/*.py"), *(root / "contract" / f for f in CONTRACT)]
    asked = {m for f in sources for m in re.findall(r'"([a-z0-9-]+)"', f.read_text())}
    assert sorted(FOLDED_FOUR - asked) == []
