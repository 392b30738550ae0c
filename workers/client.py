"""Connecting to Temporal, and starting or joining a node's remediation."""

from __future__ import annotations

from datetime import timedelta

from temporalio.client import Client, WorkflowHandle
from temporalio.contrib.pydantic import pydantic_data_converter

from remedy.models import NodeRef
from remedy.names import CONTROLLER_TASK_QUEUE, remediation_workflow_id
from remedy.remediation import FindingReport, RemediationInput, RemediationResult
from workflows.node_remediation import NodeRemediation


async def connect(address: str, namespace: str = "default") -> Client:
    return await Client.connect(address, namespace=namespace,
                                data_converter=pydantic_data_converter)


async def report_finding(
    client: Client,
    node: NodeRef,
    report: FindingReport,
    *,
    node_task_queue: str,
    task_queue: str = CONTROLLER_TASK_QUEUE,
    node_pickup_timeout: timedelta | None = None,
) -> WorkflowHandle[NodeRemediation, RemediationResult]:
    """Signal-with-start: a second report for the same node joins the running ladder."""
    inp = RemediationInput(node=node, node_task_queue=node_task_queue)
    if node_pickup_timeout is not None:
        inp.node_pickup_timeout = node_pickup_timeout
    return await client.start_workflow(
        NodeRemediation.run,
        inp,
        id=remediation_workflow_id(node.name),
        task_queue=task_queue,
        start_signal="report_finding",
        start_signal_args=[report],
        # What the UI's workflow list shows; ignored when the report joins a running ladder.
        static_summary=f"{node.name}: {report.finding.headline()} → {report.runbook.name}"[:200],
    )
