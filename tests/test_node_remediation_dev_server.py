"""NodeRemediation paths that need the real dev server rather than the time-skipping one."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio.testing import WorkflowEnvironment

from remedy.models import Action
from remedy.remediation import AttemptResult, Outcome
from remedy.runbook import Match, Runbook, Rung
from remedy.sim import SimFleet
from tests.conftest import running_workers
from tests.ladder import report, state_of
from workflows.node_remediation import NodeRemediation

NODE = "gpu-node-002"


async def test_dead_node_agent_fails_closed(dev_env: WorkflowEnvironment, fleet: SimFleet) -> None:
    finding = fleet.inject(NODE, "gpu_lost", gpu=0)
    runbook = Runbook(name="reboot-then-diagnose", match=Match(xids=[79]),
                      ladder=[Rung(action=Action.REBOOT), Rung(action=Action.DIAGNOSE)])
    async with running_workers(dev_env.client, fleet, agents=False) as queues:
        handle = await report(dev_env.client, queues, finding, runbook,
                              node_pickup_timeout=timedelta(seconds=1))
        result = await asyncio.wait_for(handle.result(), timeout=30)
    # No agent picked the reboot or the diagnose up: each counts as failed, never as healthy,
    # and the node is held cordoned for a human.
    assert result.outcome is Outcome.NEEDS_HUMAN
    ladder = [(a.action, a.result) for a in result.attempts if a.rung >= 0]
    assert ladder == [(Action.REBOOT, AttemptResult.FAILED),
                      (Action.DIAGNOSE, AttemptResult.FAILED)]
    assert "schedule" in result.attempts[1].detail.lower()
    assert fleet.node(NODE).unschedulable and fleet.node(NODE).boot_id == 0


async def test_long_tolerance_window_continues_as_new_and_keeps_its_state(
        dev_env: WorkflowEnvironment, fleet: SimFleet) -> None:
    finding = fleet.inject(NODE, "thermal_transient", gpu=1)
    runbook = Runbook(name="recheck-often", match=Match(checks=["thermal"]),
                      tolerance=timedelta(minutes=5), recheck_every=timedelta(milliseconds=100))
    async with running_workers(dev_env.client, fleet) as queues:
        handle = await report(dev_env.client, queues, finding, runbook)
        # A handle without a run id follows the chain of continue-as-new runs.
        latest = dev_env.client.get_workflow_handle_for(NodeRemediation.run, handle.id)
        for _ in range(300):
            state = await state_of(latest)
            if state.runs >= 3:
                break
            await asyncio.sleep(0.1)
        assert state.runs >= 3, "history never suggested continue-as-new"
        fleet.clear_faults(NODE)
        result = await asyncio.wait_for(latest.result(), timeout=30)
        final = await state_of(latest)
    assert result.outcome is Outcome.CLEARED
    assert final.reports_received == 1 and final.findings == [finding]  # carried over whole
    assert [action for name, action in fleet.actions if name == NODE] == ["cordon", "restore"]
