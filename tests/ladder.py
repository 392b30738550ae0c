"""Helpers for driving a NodeRemediation from a test."""

from __future__ import annotations

from datetime import timedelta

from temporalio.client import Client, WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from remedy.models import Finding, NodeRef
from remedy.remediation import FindingReport, Phase, RemediationResult, RemediationState
from remedy.runbook import Runbook
from tests.conftest import Queues
from workers.client import report_finding
from workflows.node_remediation import NodeRemediation

Handle = WorkflowHandle[NodeRemediation, RemediationResult]


async def report(client: Client, queues: Queues, finding: Finding, runbook: Runbook) -> Handle:
    return await report_finding(client, NodeRef(name=finding.node),
                                FindingReport(finding=finding, runbook=runbook),
                                node_task_queue=queues.agents, task_queue=queues.controller)


async def state_of(handle: Handle) -> RemediationState:
    return await handle.query(NodeRemediation.state)


async def wait_for_phase(env: WorkflowEnvironment, handle: Handle, phase: Phase,
                         step: timedelta = timedelta(seconds=5), steps: int = 200
                         ) -> RemediationState:
    """Poll until the workflow reaches ``phase``, moving the server's clock ``step`` per poll
    (settle timers pass; an hours-long approval window does not)."""
    for _ in range(steps):
        state = await state_of(handle)
        if state.phase is phase:
            return state
        await env.sleep(step)
    raise AssertionError(f"workflow stuck in {state.phase}, expected {phase}")
