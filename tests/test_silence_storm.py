"""Many agents silent at once is an incident of the agents or the control plane, not of the
nodes: the fleet scan, run by its real Temporal Schedule (dev server), cordons nothing, trips
once and alerts once however many scans see it; once it subsides, a real fault runs its ladder
and a single silent agent gets its own."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime, timedelta

from temporalio.client import Client, ScheduleActionExecutionStartWorkflow, ScheduleHandle
from temporalio.testing import WorkflowEnvironment

from contract.names import remediation_workflow_id
from remedy.core.events import EventReason
from remedy.runbook import RunbookSet
from remedy.scan.fleet import FleetSummary, ScanInput
from tests.conftest import own_fleet, running_workers
from tests.ladder import report, state_of
from tests.test_cli import cli
from tests.test_fleet_scan import scans_after
from workers.schedules import ensure_fleet_scan
from workflows.node_remediation import NodeRemediation


async def _scans(client: Client, schedule: ScheduleHandle) -> list[FleetSummary]:
    """Every scan the schedule still lists, oldest first (a running one is waited for)."""
    description = await schedule.describe()
    summaries = []
    for action in description.info.recent_actions:
        started = action.action
        assert isinstance(started, ScheduleActionExecutionStartWorkflow)
        handle = client.get_workflow_handle(
            started.workflow_id, run_id=started.first_execution_run_id, result_type=FleetSummary
        )
        summaries.append(await handle.result())
    return summaries


async def _until(client: Client, schedule: ScheduleHandle, storm: bool) -> FleetSummary:
    """The first scan from now on whose summary has (or has not) a silence storm."""
    for _ in range(30):
        await scans_after(schedule, 1)
        last = (await _scans(client, schedule))[-1]
        if (last.silence is not None) is storm:
            return last
    raise AssertionError(f"no scan with silence storm {storm}")


async def test_twenty_silent_agents_cordon_nothing_and_alert_once_then_a_fault_is_remedied(
    dev_env: WorkflowEnvironment, shipped_runbooks: RunbookSet
) -> None:
    client = dev_env.client
    address = client.service_client.config.target_host
    fleet = own_fleet("silence", 20)
    nodes = sorted(fleet.nodes)
    for name in nodes:  # a bad agent rollout: every agent stops heartbeating at once
        fleet.silence_agent(name, since=datetime.now(UTC) - timedelta(minutes=10))
    fast = RunbookSet(r.scaled(3600) for r in shipped_runbooks)  # real time: minutes → ms
    schedule_id = f"scan-{uuid.uuid4().hex[:8]}"
    async with running_workers(client, fleet, runbooks=fast) as queues:
        await ensure_fleet_scan(
            client,
            timedelta(seconds=1),
            queues.controller,
            # Judged on the controller's clock from the first scan on: 3 s of no change.
            ScanInput(node_task_queue=queues.agents, agent_silent_after=timedelta(seconds=3)),
            schedule_id=schedule_id,
        )
        schedule = client.get_schedule_handle(schedule_id)
        try:
            first = await _until(client, schedule, storm=True)
            await scans_after(schedule, 3)  # the storm goes on: still one alert
            during = await _scans(client, schedule)
            status = await cli("status", "--address", address, "--schedule", schedule_id, "--json")
            cordons_during = [n for n, a in fleet.actions if a == "cordon"]
            alerts_during = list(fleet.alerts)
            # The agents come back, but for one: a single silent agent is a fault again.
            lone, sick = nodes[0], nodes[1]
            for name in nodes[1:]:
                fleet.revive_agent(name)
            after = await _until(client, schedule, storm=False)
            finding = fleet.inject(sick, "ecc_dbe")
            ladder = await report(client, queues, finding, fast.match(finding))
            for _ in range(200):  # real time: until both ladders have cordoned
                if fleet.node(sick).unschedulable and fleet.node(lone).unschedulable:
                    break
                await asyncio.sleep(0.1)
            fault = await state_of(ladder)
            silent = await state_of(
                client.get_workflow_handle_for(NodeRemediation.run, remediation_workflow_id(lone))
            )
        finally:
            await schedule.delete()
    assert first.silence is not None and first.silence.fleet_wide
    assert (first.silence.silent, first.silence.of) == (20, 20)
    storms = [s for s in during if s.silence is not None]
    assert len(storms) >= 4 and {s.silence.since for s in storms if s.silence} == {
        first.silence.since
    }  # one storm, however many scans saw it
    assert all(s.started_remediations == [] for s in during)  # no AgentSilent ladder
    assert cordons_during == []
    silent_alert = [EventReason.AGENTS_SILENT]
    assert [reason for _, reason, _ in alerts_during] == silent_alert  # one clear alert
    assert "20 of 20 agents silent fleet-wide" in alerts_during[0][2]
    code, shown = status
    assert code == 3 and json.loads(shown)["silence"]["silent"] == 20
    assert after.silence is None
    assert [reason for _, reason, _ in fleet.alerts] == [
        EventReason.AGENTS_SILENT,
        EventReason.AGENTS_SILENT_OVER,
    ]
    assert fault.cordon is not None and fleet.node(sick).unschedulable  # its ladder runs
    assert silent.trigger is not None and silent.trigger.reason == "AgentSilent"
    assert fleet.node(lone).unschedulable
