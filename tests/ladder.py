"""Helpers for driving a NodeRemediation from a test."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from pydantic import BaseModel
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle, WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from adapters.sim import SimFleet
from adapters.sim.identity import as_agent
from contract.messages import REPORT_FINDING
from contract.names import remediation_workflow_id
from remedy.core.models import Action, Finding, NodeRef
from remedy.ladder.intake import by_operator
from remedy.ladder.remediation import (
    AttemptResult,
    FindingReport,
    Phase,
    RemediationResult,
    RemediationState,
)
from remedy.runbook import Runbook, RunbookSet
from remedy.scan.cluster import Cluster
from tests.conftest import Queues, running_workers
from workers.client import report_finding
from workflows.disruption_lease import REASK_EVERY
from workflows.node_remediation import NodeRemediation

Handle = WorkflowHandle[NodeRemediation, RemediationResult]
Step = Callable[[Handle], Awaitable[None]]


@dataclass(frozen=True)
class Ran:
    result: RemediationResult
    state: RemediationState  # the final state, from the query

    @property
    def ladder(self) -> list[tuple[Action, AttemptResult]]:
        """The rungs climbed, without the cordon and restore around them."""
        return [(a.action, a.result) for a in self.result.attempts if a.rung >= 0]


async def report(
    client: Client, queues: Queues, finding: Finding, runbook: Runbook | None, **options: object
) -> Handle:
    assert runbook is not None, "no runbook for the finding"
    sent = signed(queues, FindingReport(finding=finding, runbook=runbook))
    return await report_finding(
        client,
        NodeRef(name=finding.node, pool=queues.pool),
        sent,
        node_task_queue=queues.agents,
        task_queue=queues.controller,
        **options,
    )  # type: ignore[arg-type]


def signed(queues: Queues, report: FindingReport) -> FindingReport:
    """As the node's agent sends it; a runbook picked by hand for a finding it does not match
    goes as an operator's trigger does (taken unverified by a controller without a keyring).
    The controller is given the runbook first, as an operator would add it."""
    queues.known.add(report.runbook)
    now = datetime.now(UTC)
    try:
        RunbookSet([report.runbook]).named_for(report.runbook.name, report.finding)
    except ValueError:
        return by_operator(report, remediation_workflow_id(report.finding.node), "test", None, now)
    return as_agent(report, now)


async def send_report(handle: Handle, finding: Finding, runbook: Runbook) -> None:
    """A report to a running ladder, as the node's agent sends it."""
    sent = as_agent(FindingReport(finding=finding, runbook=runbook), datetime.now(UTC))
    await REPORT_FINDING.send(handle, sent)


async def remediate(
    env: WorkflowEnvironment,
    fleet: SimFleet,
    finding: Finding,
    runbook: Runbook | None,
    meanwhile: Step | None = None,
    cluster: Cluster | None = None,
) -> Ran:
    """Report the finding, run ``meanwhile`` against the workflow, and wait for the outcome
    (``cluster``: in place of the simulated fleet's)."""
    async with running_workers(env.client, fleet, cluster=cluster) as queues:
        handle = await report(env.client, queues, finding, runbook)
        if meanwhile:
            await meanwhile(handle)
        result = await handle.result()
        return Ran(result, await state_of(handle))  # queries need a worker: ask inside


def signal_at(env: WorkflowEnvironment, phase: Phase, name: str, arg: BaseModel) -> Step:
    async def step(handle: Handle) -> None:
        await wait_for_phase(env, handle, phase)
        await handle.signal(name, arg)

    return step


async def state_of(handle: Handle) -> RemediationState:
    return await handle.query(NodeRemediation.state)


async def wait_for_phase(
    env: WorkflowEnvironment,
    handle: Handle,
    phase: Phase,
    step: timedelta = timedelta(seconds=5),
    steps: int = 200,
) -> RemediationState:
    """Poll until the workflow reaches ``phase``, moving the server's clock ``step`` per poll
    (settle timers pass; an hours-long approval window does not)."""
    return await wait_until(env, handle, lambda state: state.phase is phase, phase, step, steps)


async def wait_until(
    env: WorkflowEnvironment,
    handle: Handle,
    holds: Callable[[RemediationState], bool],
    expected: str,
    step: timedelta = timedelta(seconds=5),
    steps: int = 200,
) -> RemediationState:
    """Poll until the workflow's state ``holds``. A brief phase (the lease's, when the grant
    comes at once) can pass between two polls on a busy machine: wait for what stays true."""
    for _ in range(steps):
        state = await state_of(handle)
        if holds(state):
            return state
        await env.sleep(step)
    raise AssertionError(f"workflow stuck in {state.phase}, expected {expected}")


async def local_activities(client: Client, workflow_id: str) -> list[str]:
    """The activity types of a run's local-activity markers, in order."""
    found = []
    async for event in client.get_workflow_handle(workflow_id).fetch_history_events():
        marker = event.marker_recorded_event_attributes
        if marker.marker_name == "core_local_activity":
            data = json.loads(marker.details["data"].payloads[0].data)
            found.append(str(data["activity_type"]))
    return found


def reasks(history: WorkflowHistory) -> int:
    """How often the ladder's wait for its lease ran out and it asked again (its re-ask timer
    fired): on the time-skipping server the clock can pass it while a grant is on its way."""
    summary = pydantic_data_converter.payload_converter.from_payload
    started = {
        e.event_id
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_TIMER_STARTED
        and e.user_metadata.HasField("summary")
        and f"asked again every {REASK_EVERY}" in summary(e.user_metadata.summary, str)
    }
    return sum(
        e.event_type == EventType.EVENT_TYPE_TIMER_FIRED
        and e.timer_fired_event_attributes.started_event_id in started
        for e in history.events
    )
